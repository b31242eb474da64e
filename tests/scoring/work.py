"""Work counted, not timed: how much a text step does, for the linear-time tests.

`count(fn, *args)` runs `fn(*args)` and returns a `Work`:
- `steps`: Python lines executed in the project's own code (files under pipeline/ and
  grpo_core/), traced with `sys.settrace`;
- `scanned`: characters that code hands to C in one call: the receiver of each str method it
  calls (`find`, `rfind`, `replace`, `lower`, `strip`, ...: each reads it once at most), seen
  with `sys.setprofile`, and the span of each call of a compiled regular expression (while
  `count` runs, the patterns bound at module level in pipeline.scoring are counting proxies).

Both are the same on any machine under any load: no clock is read. `assert_linear(fn, build, n)`
counts `fn(build(n))` and `fn(build(2 n))`, where `build(n)` makes an input n units long; work
that grows linearly at most doubles (plus a small constant), quadratic work quadruples.

What no counter here sees is the work inside one regex call (CPython's engine exposes no step
count), so a pattern that backtracks on a long run (the `\\^\\s*\\{?\\s*` of issue 29, 24 s on
100 000 spaces) shows only as time: `benchmarks/text_worst_case.py` times the same worst cases.

Not a test module (no test_ prefix).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tuple(str(ROOT / d) + "/" for d in ("pipeline", "grpo_core"))
STEP_SLACK = 200  # lines: fixed costs that differ between the two sizes (a cache filled once)
SCAN_SLACK = 2_000  # characters, likewise


@dataclass
class Work:
    steps: int = 0  # Python lines executed in pipeline/ and grpo_core/
    scanned: int = 0  # characters handed to str methods and compiled regexes by that code


def _ours(frame: FrameType) -> bool:
    return frame.f_code.co_filename.startswith(PROJECT)


class _CountingPattern:
    """A compiled pattern that adds the span each call may read to `work.scanned`."""

    def __init__(self, pattern: re.Pattern[str], work: Work):
        self._pattern, self._work = pattern, work

    def __getattr__(self, name: str) -> Any:  # pattern, flags, groups, groupindex
        return getattr(self._pattern, name)

    def _span(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> None:
        self._work.scanned += max(0, min(endpos, len(string)) - pos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._span(string, pos, endpos)
        return self._pattern.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._span(string, pos, endpos)
        return self._pattern.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._span(string, pos, endpos)
        return self._pattern.fullmatch(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._span(string, pos, endpos)
        return self._pattern.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._span(string, pos, endpos)
        return self._pattern.findall(string, pos, endpos)

    def split(self, string: str, maxsplit: int = 0) -> Any:
        self._span(string)
        return self._pattern.split(string, maxsplit)

    def sub(self, repl: Any, string: str, count: int = 0) -> Any:
        self._span(string)
        return self._pattern.sub(repl, string, count)

    def subn(self, repl: Any, string: str, count: int = 0) -> Any:
        self._span(string)
        return self._pattern.subn(repl, string, count)


def _scoring_modules() -> list[ModuleType]:
    return [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("pipeline.scoring") and isinstance(m, ModuleType)
    ]


@contextmanager
def _counting_patterns(work: Work) -> Iterator[None]:
    swapped: list[tuple[ModuleType, str, re.Pattern[str]]] = []
    for module in _scoring_modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
                swapped.append((module, name, value))
                setattr(module, name, _CountingPattern(value, work))
    try:
        yield
    finally:
        for module, name, value in swapped:
            setattr(module, name, value)


def count(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Work, Any]:
    """(the work `fn(*args, **kwargs)` did in this thread, its result)."""
    work = Work()

    def lines(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            work.steps += 1
        return lines

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return lines if event == "call" and _ours(frame) else None

    def c_calls(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and _ours(frame):
            receiver = getattr(arg, "__self__", None)
            if isinstance(receiver, str):
                work.scanned += len(receiver)

    old_trace, old_profile = sys.gettrace(), sys.getprofile()
    with _counting_patterns(work):
        sys.settrace(calls)
        sys.setprofile(c_calls)
        try:
            result = fn(*args, **kwargs)
        finally:
            sys.setprofile(old_profile)
            sys.settrace(old_trace)
    return work, result


def assert_linear(fn: Callable[[str], Any], build: Callable[[int], str], n: int) -> Work:
    """Count `fn` on `build(n)` and on `build(2 n)`: the larger may do at most twice the work
    (plus the slack). Returns the larger input's work."""
    small, _ = count(fn, build(n))
    large, _ = count(fn, build(2 * n))
    assert small.steps > 0 or small.scanned > 0, "nothing counted: is fn the project's code?"
    assert large.steps <= 2 * small.steps + STEP_SLACK, (small, large)
    assert large.scanned <= 2 * small.scanned + SCAN_SLACK, (small, large)
    return large
