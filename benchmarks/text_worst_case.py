"""The verifier's text steps on their worst-case inputs, timed: the time the linear-time tests no
longer assert.

tests/scoring/test_extract.py, test_numeric.py and test_verdict_deadline.py count the work of
extraction, the numeric fast path and `normalise` on long adversarial inputs (Python steps and
characters scanned, tests/scoring/work.py), so they cannot flake on a loaded machine. A count
cannot see inside one regex call: a pattern that backtracks on a long run (the degree-sign regex
of issue 29 took 24 s on `$^` and 100 000 spaces) shows only as time. This script times the same
inputs, each at its size n and at 2n (best of `--repeat`), and prints one row per input: the
time at 2n and its ratio to n (about 2 when linear, about 4 when quadratic).

Run: `.venv/bin/python benchmarks/text_worst_case.py [--repeat 3] [--check]`
(`--check`: exit 1 when an input takes 0.5 s or more at 2n, the bound the tests once timed).
Prints only; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the input tables live with their tests

from pipeline.scoring import extract_answer  # noqa: E402
from pipeline.scoring.numeric import normalise  # noqa: E402
from tests.scoring.test_extract import LONG  # noqa: E402
from tests.scoring.test_numeric import ADVERSARIAL, fast_path_steps  # noqa: E402

BOUND_S = 0.5


def cases() -> list[tuple[str, Callable[[str], Any], Callable[[int], str], int]]:
    """(name, step, build, n) for every worst-case input of the three test files."""
    out: list[tuple[str, Callable[[str], Any], Callable[[int], str], int]] = []
    for name, (build, n) in sorted(LONG.items()):
        out.append((f"extract: {name}", uncached_extract, build, n))
    for i, (head, unit, n, tail) in enumerate(ADVERSARIAL):
        build = _runs(head, unit, tail)
        out.append((f"fast path {i}: {head + unit * 2 + tail!r}", fast_path_steps, build, n))
    for wrap in ("{}", "\\boxed{{{}}}", "The answer is {}"):
        for tail in ("", "x", "1", "}", " = 5"):
            build = _wrapped(wrap, tail)
            out.append((f"normalise: {build(2)!r}", normalise, build, 100_000))
    return out


def uncached_extract(text: str) -> Any:
    """`extract_answer` without its one-entry cache (a repeat of the same text is free)."""
    sys.modules["pipeline.scoring.extract"]._last = None  # type: ignore[attr-defined]
    return extract_answer(text)


def _runs(head: str, unit: str, tail: str) -> Callable[[int], str]:
    return lambda n: head + unit * n + tail


def _wrapped(wrap: str, tail: str) -> Callable[[int], str]:
    return lambda n: wrap.format("$^" + " " * n + tail)


def best_of(step: Callable[[str], Any], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    slow = []
    print(f"{'input':<60} {'chars 2n':>9} {'ms 2n':>8} {'2n / n':>7}")
    for name, step, build, n in cases():
        small, large = build(n), build(2 * n)
        t_small = best_of(step, small, args.repeat)
        t_large = best_of(step, large, args.repeat)
        ratio = t_large / t_small if t_small > 0 else float("nan")
        print(f"{name[:60]:<60} {len(large):>9,} {t_large * 1e3:>8.2f} {ratio:>7.1f}")
        if t_large >= BOUND_S:
            slow.append(name)
    if slow:
        print(f"{len(slow)} input(s) at {BOUND_S} s or more: {', '.join(slow)}")
    if args.check and slow:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
