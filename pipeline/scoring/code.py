"""The "code" verifier: run a completion's Python function on hidden tests inside the sandbox.

The gold answer is a test spec (`encode_spec`): canonical JSON
`{"args": [[...], ...], "expected": [...], "function": "name"}`, one argument list and one
expected value per test. The candidate is the last ```python (or ```py, or bare ```) fenced
block of the completion, else the whole completion. It runs in a fresh bubblewrap sandbox
(pipeline/scoring/sandbox.py) under pipeline/scoring/_code_harness.py, which sends back only the
values the function returned; the expected values stay here, in the trusted parent, and are
compared after a JSON round trip with exact JSON types (`True` is not `1`, `2.0` is not `2`;
floats to 1e-9 relative). The child's exit code and output are never the pass signal.

Components: `correctness` (every test passed), `format` (a fenced block was used) and `tests`
(the share of tests passed). Whatever the code does (crash, exit, timeout, flood, garbage on the
result channel) is a wrong answer; only a failure of the sandbox itself (bwrap missing, a sandbox
that never started) raises, which `verify` turns into reward None / "verifier_error".

Test: `.venv/bin/pytest tests/scoring/test_code_verifier.py tests/scoring/test_sandbox_hostile.py`
"""

from __future__ import annotations

import json
import keyword
import math
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.scoring.sandbox import Limits, Run, SandboxError, run_python
from pipeline.scoring.verifiers import Check, register_verifier

HARNESS = (Path(__file__).parent / "_code_harness.py").read_text()
_FENCE = re.compile(r"```(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
MAX_TESTS = 1000


@dataclass(frozen=True)
class CodeSpec:
    """Hidden tests of one problem: call `function(*args[i])`, expect `expected[i]`."""

    function: str
    args: list[list[Any]]
    expected: list[Any]


def encode_spec(function: str, args: list[list[Any]], expected: list[Any]) -> str:
    """The canonical answer text for a test spec (sorted keys, compact, plain JSON only)."""
    spec = {"args": [list(a) for a in args], "expected": list(expected), "function": function}
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)
    decode_spec(text)  # the same checks a verifier applies
    return text


def decode_spec(answer: str) -> CodeSpec:
    """Parse and check a test spec; ValueError in one line saying what is wrong."""
    try:
        raw = json.loads(answer)
    except ValueError:
        raise ValueError("code answer is not a JSON test spec") from None
    if not isinstance(raw, dict) or set(raw) != {"args", "expected", "function"}:
        raise ValueError("code answer must be a JSON object with args, expected and function")
    function, args, expected = raw["function"], raw["args"], raw["expected"]
    if not isinstance(function, str) or not function.isidentifier() or keyword.iskeyword(function):
        raise ValueError(f"code answer names no valid function: {function!r}")
    if not isinstance(args, list) or not all(isinstance(a, list) for a in args):
        raise ValueError("code answer args must be a list of argument lists")
    if not isinstance(expected, list) or len(expected) != len(args) or not args:
        raise ValueError("code answer needs one expected value per argument list (at least one)")
    if len(args) > MAX_TESTS:
        raise ValueError(f"code answer has {len(args)} tests; at most {MAX_TESTS}")
    return CodeSpec(function, args, expected)


def extract_code(completion: str) -> tuple[str, bool]:
    """(source, fenced): the last fenced Python block, else the whole completion."""
    blocks = _FENCE.findall(completion)
    if blocks:
        return blocks[-1], True
    return completion, False


def same(got: Any, want: Any) -> bool:
    """Equality of parsed JSON values with exact JSON types; floats to 1e-9 relative."""
    if type(got) is not type(want):
        return False
    if isinstance(want, float):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return bool(got == want)


def run_tests(source: str, spec: CodeSpec, limits: Limits) -> tuple[int, str]:
    """(tests passed, detail) for `source` against `spec`, run in a fresh sandbox."""
    args = [json.dumps(a) for a in spec.args]
    request = {"code": source, "function": spec.function, "args": args}
    run = run_python(HARNESS, json.dumps(request).encode(), limits)
    lines = run.channel.split(b"\n")
    if lines[0] != b"S":
        raise SandboxError(_not_started(run, limits))
    report = next((line for line in reversed(lines) if line[:2] in (b"R ", b"E ")), None)
    if report is None:
        return 0, _no_report(run, limits)
    try:
        body = json.loads(report[2:])
    except (ValueError, RecursionError):
        return 0, "garbled result channel"
    if report[:1] == b"E":
        return 0, f"load error: {str(body)[:200]}"
    return _score(body, spec)


def _score(entries: Any, spec: CodeSpec) -> tuple[int, str]:
    """Count the tests whose ["ok", value] entry matches the expected value."""
    if not isinstance(entries, list) or len(entries) != len(spec.expected):
        return 0, "result count does not match the tests"
    passed, first_error = 0, ""
    for entry, want in zip(entries, spec.expected, strict=True):
        ok = isinstance(entry, list) and len(entry) == 2 and entry[0] == "ok"
        if ok and same(entry[1], want):
            passed += 1
        elif not first_error and isinstance(entry, list) and len(entry) == 2:
            first_error = f"; first error: {str(entry[1])[:200]}" if entry[0] == "error" else ""
    return passed, f"{passed}/{len(spec.expected)} tests passed{first_error}"


def _not_started(run: Run, limits: Limits) -> str:
    if run.timed_out:
        return f"sandbox did not start within {limits.wall_s:g}s"
    why = run.stderr.decode(errors="replace").strip().splitlines()
    return f"sandbox failed to start: {why[-1][:200] if why else f'exit code {run.returncode}'}"


def _no_report(run: Run, limits: Limits) -> str:
    if run.channel_truncated:
        return f"result channel over {limits.channel_bytes} bytes"
    if run.timed_out:
        return f"timeout after {limits.wall_s:g}s"
    code = run.returncode
    if code is not None and (code < 0 or code > 128):  # bwrap reports a signal as 128 + n
        return f"killed by {_signal_name(-code if code < 0 else code - 128)} (exit code {code})"
    return f"exited with code {code} before reporting results"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def limits_for(timeout: float) -> Limits:
    """Sandbox limits for a verifier deadline: the wall clock is the deadline itself."""
    return Limits(wall_s=timeout, cpu_s=math.ceil(timeout) + 1)


@register_verifier("code", components=("tests",))
def code_verifier(completion: str, answer: str, timeout: float) -> Check:
    """Run the completion's function on the hidden tests of `answer` (a test spec)."""
    spec = decode_spec(answer)
    source, fenced = extract_code(completion)
    if not source.strip():
        return Check(False, False, {"correctness": 0.0, "format": 0.0, "tests": 0.0}, "no code")
    passed, detail = run_tests(source, spec, limits_for(timeout))
    correct = passed == len(spec.expected)
    share = passed / len(spec.expected)
    components = {"correctness": float(correct), "format": float(fenced), "tests": share}
    return Check(True, correct, components, detail)
