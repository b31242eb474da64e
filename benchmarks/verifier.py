"""Verifier throughput before and after a change: `verify_batch` answers per second, side by side.

Issue 28 made the verifier stricter (one committed final answer: hedge, retraction, joined-digit
and touching-mark checks, pipeline/scoring/commit.py) and asked that it cost at most 20 % of
throughput. This benchmark runs the same answer sets through `verify_batch` of two trees, the
working tree and a base commit checked out with `git worktree`, each in its own process, in
alternating rounds (so machine noise hits both alike), and reports the median rate per tree and
the ratio after / before.

Two answer sets:
* `raw`: `benchmarks/ledger.py`'s pairs (bare answers, boxed answers, "then the result is N"),
  judged with `marker_required=False`, the tiny policy's reading and the figure ledger.py reports;
* `chat`: the same values as chat-model text (a sentence of working, then a boxed, "The answer
  is" or Minerva "Final Answer" line, sometimes a closing sentence), judged in marker mode.

Results: `benchmarks/results/verifier.json` + `.png`.

Run: `.venv/bin/python benchmarks/verifier.py [--base COMMIT] [--answers N] [--rounds R]`
(`--quick`: 20 000 answers, 3 rounds).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BASE = "b811388"  # main before issue 28's verifier (sieve-math/3)

# The child: time verify_batch on one answer set in the tree on sys.path[0]; print JSON.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pipeline.scoring import VERIFIER_VERSION, verify_batch
pairs = json.load(open(sys.argv[2]))
marker = sys.argv[3] == "chat"
completions = [c for c, _ in pairs]
golds = [g for _, g in pairs]
verify_batch(completions[:200], golds[:200], marker_required=marker)  # warm caches and imports
t0 = time.perf_counter()
verdicts = verify_batch(completions, golds, marker_required=marker)
elapsed = time.perf_counter() - t0
print(json.dumps({
    "version": VERIFIER_VERSION,
    "seconds": elapsed,
    "rate": len(pairs) / elapsed,
    "correct_share": sum(v.correct is True for v in verdicts) / len(pairs),
    "math_verify_share": sum(v.detail == "math_verify" for v in verdicts) / len(pairs),
}))
"""


def _value_text(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{v}"


def _latex(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


def answer_sets(n: int, seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    """The raw and chat answer sets (same values; about half correct)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ledger import answer_pairs

    raw = answer_pairs(n, seed)
    rng = random.Random(seed + 1)
    chat = []
    for _ in range(n):
        value = Fraction(rng.randint(-999, 9999), rng.choice([1, 1, 1, 2, 3, 4, 7]))
        shown = value if rng.random() < 0.5 else value + rng.choice([1, -1])
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        working = f"First we add {a} and {b} to get {a + b}. Then we simplify the result. "
        style = rng.random()
        if style < 0.5:
            final = f"So the answer is \\boxed{{{_latex(shown)}}}."
        elif style < 0.75:
            final = f"The answer is {_value_text(shown)}."
        else:
            final = f"Final Answer: The final answer is ${_latex(shown)}$. I hope it is correct."
        chat.append((working + final, _value_text(value)))
    return {"raw": raw, "chat": chat}


def run_child(tree: Path, pairs_file: Path, mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(pairs_file), mode],
        check=True,
        capture_output=True,
        text=True,
        cwd=tree,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(result["modes"])
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.38
    for i, tree in enumerate(("before", "after")):
        rates = [result["modes"][m][tree]["median_rate"] for m in modes]
        xs = [j + (i - 0.5) * width for j in range(len(modes))]
        ax.bar(xs, rates, width, label=f"{tree}: {result['modes'][modes[0]][tree]['version']}")
        for x, r in zip(xs, rates, strict=True):
            ax.text(x, r, f"{r:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels([f"{m}\nafter/before {result['modes'][m]['ratio']:.2f}x" for m in modes])
    ax.set_ylabel("verify_batch answers / s")
    rounds = result["rounds"]
    ax.set_title(f"verifier throughput, {result['answers']:,} answers, median of {rounds}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE, help="the commit measured as 'before'")
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.answers, args.rounds = 20_000, 3
    RESULTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        try:
            modes: dict[str, dict] = {}
            for mode, pairs in answer_sets(args.answers).items():
                pairs_file = Path(tmp) / f"{mode}.json"
                pairs_file.write_text(json.dumps(pairs))
                runs: dict[str, list[dict]] = {"before": [], "after": []}
                for _ in range(args.rounds):
                    runs["before"].append(run_child(base, pairs_file, mode))
                    runs["after"].append(run_child(ROOT, pairs_file, mode))
                summary = {}
                for tree, rs in runs.items():
                    summary[tree] = {
                        "version": rs[0]["version"],
                        "rates": [r["rate"] for r in rs],
                        "median_rate": statistics.median(r["rate"] for r in rs),
                        "correct_share": rs[0]["correct_share"],
                        "math_verify_share": rs[0]["math_verify_share"],
                    }
                after, before = summary["after"], summary["before"]
                summary["ratio"] = after["median_rate"] / before["median_rate"]
                modes[mode] = summary
                print(f"{mode}: after/before {summary['ratio']:.3f}", flush=True)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], check=False, cwd=ROOT
            )
    result = {
        "benchmark": "verifier",
        "machine": {"cpus": _cpus(), "python": platform.python_version()},
        "base_commit": args.base,
        "answers": args.answers,
        "rounds": args.rounds,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "modes": modes,
        "goal": "after/before >= 0.8 (at most 20 % slower)",
    }
    name = "verifier_quick" if args.quick else "verifier"
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / f"{name}.png")
    print(json.dumps(result, indent=2))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
