"""The sandbox side of a code check: runs a candidate's function on each test and reports values.

pipeline/scoring/code.py runs this file's text as `python -I -S -c <text> FD` inside the sandbox
(pipeline/scoring/sandbox.py); it sees only the standard library and must not import pipeline.
Protocol:

* stdin: one JSON object {"code": str, "function": str, "args": [JSON text of one argument
  list, ...]}. The expected values never enter the sandbox, so nothing here can leak or judge
  them: the trusted parent compares.
* fd FD (the result channel): "S\\n" once the input is read, before any candidate code runs (so
  the parent can tell a sandbox that never started from code that failed); then either
  "E <json error text>\\n" when the code does not load or has no such function, or
  "R <json list>\\n" with one entry per test, ["ok", value] or ["error", "Type: message"].

A value must be plain JSON data (None, bool, int, float, str, and lists, tuples and str-keyed
dicts of those) and is serialised with `json.dumps(allow_nan=False)`; anything else (an object
whose `__eq__` is always true, a set, inf) is reported as an error, never passed on. The names
used here are bound before the candidate's code runs, so patching `json` or `os` afterwards only
garbles the report, which the parent then rejects.

Test: `.venv/bin/pytest tests/scoring/test_code_verifier.py -q`
"""

import json
import os
import sys

_PLAIN = (type(None), bool, int, float, str)
_MAX_DEPTH = 32
_dumps, _loads, _write = json.dumps, json.loads, os.write


def _check_plain(value: object, depth: int = 0) -> None:
    """Raise TypeError unless `value` is plain JSON data (exact types, bounded depth)."""
    kind = type(value)
    if kind in _PLAIN:
        return
    if depth >= _MAX_DEPTH:
        raise TypeError("result nested too deep")
    if kind is list or kind is tuple:
        for item in value:  # type: ignore[attr-defined]
            _check_plain(item, depth + 1)
    elif kind is dict:
        for key, item in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise TypeError("result dict has a non-str key")
            _check_plain(item, depth + 1)
    else:
        raise TypeError(f"result of type {kind.__name__} is not plain JSON data")


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:200]
    except BaseException:  # a hostile __str__
        return "unprintable exception"


def _call(function: object, arg_text: str) -> str:
    """One test's entry as JSON text: ["ok", value] or ["error", description]."""
    try:
        value = function(*_loads(arg_text))  # type: ignore[operator]
        _check_plain(value)
        return '["ok",' + _dumps(value, allow_nan=False) + "]"
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures too
        return _dumps(["error", _describe(exc)])


def _send(fd: int, data: bytes) -> None:
    while data:
        data = data[_write(fd, data) :]


def main() -> None:
    channel = int(sys.argv[1])
    request = _loads(sys.stdin.buffer.read())
    _send(channel, b"S\n")
    namespace = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        exec(compile(request["code"], "solution.py", "exec"), namespace)
        function = namespace.get(request["function"])
        if not callable(function):
            raise NameError(f"no function named {request['function']!r}")
    except BaseException as exc:
        _send(channel, b"E " + _dumps(_describe(exc)).encode() + b"\n")
        return
    entries = [_call(function, arg_text) for arg_text in request["args"]]
    _send(channel, b"R [" + ",".join(entries).encode() + b"]\n")


if __name__ == "__main__":
    main()
