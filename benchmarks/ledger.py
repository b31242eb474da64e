"""Ledger and scoring throughput, measured side by side.

1. Arrow ingest of N synthetic rollouts (default 10 M) through `Ledger.write` (batch dedupe +
   anti-join on the natural key, no index), beside the same rows into a primary-key-indexed
   table with INSERT OR IGNORE, and beside row-by-row `executemany` on a sample (extrapolated).
2. The `prompt_stats` view over those rows (seconds to materialise it).
3. Scoring: the exact/numeric fast path (extraction + Fraction comparison) vs math-verify alone
   on the same answers, plus `verify_batch`, the entry point the pipeline uses (fast path first,
   math-verify only when undecided). The fast path runs on all answers, math-verify on a random
   sample of them (it is a few hundred times slower) and its rate is per answer of that sample.

Run: `python benchmarks/ledger.py [--rows 10000000] [--answers 100000]`
Writes benchmarks/results/ledger.json and ledger.png.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from pipeline.scoring import fast_path, math_verify_only, verify_batch
from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"
GROUP = 16


def synthetic_rollouts(n: int, seed: int = 0) -> pl.DataFrame:
    """n rollouts: groups of 16 samples, 50 000 problems per run, 40 % correct."""
    rng = np.random.default_rng(seed)
    group = np.arange(n) // GROUP
    reward = (rng.random(n) < 0.4).astype(np.float64)
    return pl.DataFrame(
        {
            "run_id": pl.Series(group // 50_000).cast(pl.Utf8).str.zfill(6),
            "problem_id": pl.Series(group % 50_000).cast(pl.Utf8).str.zfill(16),
            "sample_idx": (np.arange(n) % GROUP).astype(np.int32),
            "completion": pl.Series(rng.integers(0, 10_000, n)).cast(pl.Utf8),
            "n_tokens": rng.integers(1, 12, n).astype(np.int32),
            "finish_reason": pl.Series(np.where(rng.random(n) < 0.02, "length", "stop")),
            "reward": reward,
            "correct": reward > 0.5,
        }
    )


def runs_frame(rollouts: pl.DataFrame) -> pl.DataFrame:
    ids = rollouts["run_id"].unique().sort()
    return pl.DataFrame(
        {
            "run_id": ids,
            "purpose": "screen",
            "model": "bench",
            "model_revision": "rev0",
            "backend": "synthetic",
            "group_size": GROUP,
            "temperature": 1.0,
            "status": "finished",
        }
    )


def bench_ingest(frame: pl.DataFrame, workdir: Path) -> dict[str, float]:
    with Ledger.open(path=workdir / "sieve.duckdb") as ledger:
        t0 = time.perf_counter()
        written = ledger.write("rollouts", frame)
        sieve_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = ledger.write("rollouts", frame)  # idempotent re-run of the same batch
        rerun_s = time.perf_counter() - t0
        ledger.write("sampling_runs", runs_frame(frame))
        t0 = time.perf_counter()
        stats = ledger.sql("SELECT * FROM prompt_stats")
        view_s = time.perf_counter() - t0
    assert written == frame.height and again == 0
    assert stats.height == frame["problem_id"].n_unique()
    return {
        "rows": frame.height,
        "sieve_write_s": sieve_s,
        "sieve_rows_per_s": frame.height / sieve_s,
        "idempotent_rerun_s": rerun_s,
        "prompt_stats_s": view_s,
        "prompt_stats_rows": stats.height,
        "pk_index_rows_per_s": _pk_indexed(frame, workdir / "pk.duckdb"),
        "executemany_rows_per_s": _executemany(frame.head(20_000), workdir / "em.duckdb"),
    }


def _pk_indexed(frame: pl.DataFrame, path: Path) -> float:
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE r (run_id VARCHAR, problem_id VARCHAR, sample_idx INTEGER, "
        "completion VARCHAR, n_tokens INTEGER, finish_reason VARCHAR, reward DOUBLE, "
        "correct BOOLEAN, PRIMARY KEY (run_id, problem_id, sample_idx))"
    ).fetchall()
    arrow = frame.to_arrow()
    con.register("batch", arrow)
    t0 = time.perf_counter()
    con.execute("INSERT OR IGNORE INTO r SELECT * FROM batch").fetchall()
    elapsed = time.perf_counter() - t0
    con.close()
    return frame.height / elapsed


def _executemany(sample: pl.DataFrame, path: Path) -> float:
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE r (run_id VARCHAR, problem_id VARCHAR, sample_idx INTEGER, "
        "completion VARCHAR, n_tokens INTEGER, finish_reason VARCHAR, reward DOUBLE, "
        "correct BOOLEAN)"
    ).fetchall()
    rows = sample.rows()
    t0 = time.perf_counter()
    con.executemany("INSERT INTO r VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    elapsed = time.perf_counter() - t0
    con.close()
    return len(rows) / elapsed


def answer_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """(completion, gold) pairs as the tiny model and chat models write them; ~half correct."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        value = Fraction(rng.randint(-999, 9999), rng.choice([1, 1, 1, 2, 3, 4, 7]))
        gold = str(value.numerator) if value.denominator == 1 else f"{value}"
        shown = value if rng.random() < 0.5 else value + rng.choice([1, -1])
        text = str(shown.numerator) if shown.denominator == 1 else f"{shown}"
        style = rng.random()
        if style < 0.6:
            completion = text  # tiny model: the bare answer
        elif style < 0.8:
            completion = f"We add them up, so the answer is \\boxed{{{_latex(shown)}}}."
        else:
            completion = f"First 3 + 4 = 7, then the result is {text}"
        pairs.append((completion, gold))
    return pairs


def _latex(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    sign = "-" if v < 0 else ""
    return f"{sign}\\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"


def bench_scoring(n: int, mv_sample: int) -> dict[str, float]:
    from pipeline.scoring import extract_answer

    pairs = answer_pairs(n)
    t0 = time.perf_counter()
    decided = 0
    for completion, gold in pairs:
        text, _ = extract_answer(completion)
        decided += fast_path(text or "", gold) is not None
    fast_s = time.perf_counter() - t0
    completions, golds = zip(*pairs, strict=True)
    t0 = time.perf_counter()
    verdicts = verify_batch(list(completions), list(golds), marker_required=False)  # raw format
    batch_s = time.perf_counter() - t0
    sample = random.Random(1).sample(pairs, mv_sample)
    math_verify_only(*sample[0])  # start the worker outside the timing
    t0 = time.perf_counter()
    errors = sum(math_verify_only(c, g) is None for c, g in sample)
    mv_s = time.perf_counter() - t0
    fast_rate, mv_rate = n / fast_s, mv_sample / mv_s
    return {
        "answers": n,
        "fast_path_answers_per_s": fast_rate,
        "fast_path_decided_share": decided / n,
        "verify_batch_answers_per_s": n / batch_s,
        "verify_batch_correct_share": sum(v.correct is True for v in verdicts) / n,
        "math_verify_sample": mv_sample,
        "math_verify_answers_per_s": mv_rate,
        "math_verify_errors": errors,
        "speedup_fast_over_math_verify": fast_rate / mv_rate,
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ingest, scoring = result["ingest"], result["scoring"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    names = ["Sieve write\n(anti-join)", "PK index\nINSERT OR IGNORE", "executemany\n(row by row)"]
    rates = [
        ingest["sieve_rows_per_s"],
        ingest["pk_index_rows_per_s"],
        ingest["executemany_rows_per_s"],
    ]
    axes[0].bar(names, rates, color=["tab:green", "tab:orange", "tab:red"])
    axes[0].set_yscale("log")
    axes[0].set_ylabel("rows / s (log)")
    axes[0].set_title(f"ingest of {ingest['rows']:,} rollouts")
    for i, r in enumerate(rates):
        axes[0].text(i, r, f"{r:,.0f}", ha="center", va="bottom")
    srates = [
        scoring["fast_path_answers_per_s"],
        scoring["verify_batch_answers_per_s"],
        scoring["math_verify_answers_per_s"],
    ]
    axes[1].bar(
        ["fast path", "verify_batch", "math-verify alone"],
        srates,
        color=["tab:green", "tab:blue", "tab:gray"],
    )
    axes[1].set_yscale("log")
    axes[1].set_ylabel("answers / s (log)")
    axes[1].set_title(f"scoring: {scoring['speedup_fast_over_math_verify']:,.0f}x")
    for i, r in enumerate(srates):
        axes[1].text(i, r, f"{r:,.0f}", ha="center", va="bottom")
    fig.suptitle(f"prompt_stats over {ingest['rows']:,} rows: {ingest['prompt_stats_s']:.2f} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--mv-sample", type=int, default=2_000)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    frame = synthetic_rollouts(args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        ingest = bench_ingest(frame, Path(tmp))
    del frame
    scoring = bench_scoring(args.answers, args.mv_sample)  # raw reading (bare answers)
    result = {
        "benchmark": "ledger",
        "machine": {"cpus": _cpus(), "python": platform.python_version()},
        "versions": {"duckdb": duckdb.__version__, "polars": pl.__version__},
        "ingest": ingest,
        "scoring": scoring,
    }
    (RESULTS / "ledger.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "ledger.png")
    print(json.dumps(result, indent=2))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
