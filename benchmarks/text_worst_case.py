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
Writes benchmarks/results/text_worst_case.json (a row per input, with the machine's load) and
text_worst_case.png (the 2n / n ratio per input against the linear 2 and quadratic 4).
"""

from __future__ import annotations

import argparse
import json
import os
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


def write(rows: list[dict[str, Any]], load: float, repeat: int) -> None:
    """results/text_worst_case.json and .png (ratios: ~2 linear, ~4 quadratic)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    data = {"benchmark": "text_worst_case", "repeat": repeat, "bound_seconds": BOUND_S,
            "cpus": os.cpu_count(), "load_1m": round(load, 2), "rows": rows}  # fmt: skip
    (out / "text_worst_case.json").write_text(json.dumps(data, indent=1) + "\n")
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    ax.barh([r["input"][:50] for r in rows], [r["ratio_2n_over_n"] for r in rows])
    for x, label in ((2, "linear"), (4, "quadratic")):
        ax.axvline(x, color="k", ls="--", lw=1)
        ax.text(x, -0.9, label, ha="center", fontsize=8)
    ax.set_xlabel("time at 2n / time at n (best of repeats)")
    fig.tight_layout()
    fig.savefig(out / "text_worst_case.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    slow, rows = [], []
    load = os.getloadavg()[0]
    print(f"{'input':<60} {'chars 2n':>9} {'ms 2n':>8} {'2n / n':>7}")
    for name, step, build, n in cases():
        small, large = build(n), build(2 * n)
        t_small = best_of(step, small, args.repeat)
        t_large = best_of(step, large, args.repeat)
        ratio = t_large / t_small if t_small > 0 else float("nan")
        print(f"{name[:60]:<60} {len(large):>9,} {t_large * 1e3:>8.2f} {ratio:>7.1f}")
        rows.append({"input": name, "chars_2n": len(large), "seconds_n": t_small,
                     "seconds_2n": t_large, "ratio_2n_over_n": ratio})  # fmt: skip
        if t_large >= BOUND_S:
            slow.append(name)
    write(rows, load, args.repeat)
    if slow:
        print(f"{len(slow)} input(s) at {BOUND_S} s or more: {', '.join(slow)}")
    if args.check and slow:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
