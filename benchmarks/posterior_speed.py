"""How fast the difficulty model recomputes, and what selecting before rollout adds to a step
(issue 46: "the posterior for 1 M prompts recomputes in ≤ 1 s from the ledger"; "selection,
posterior updates and ledger writes add ≤ 5 % to a training step on the real model").

1. Recompute: a ledger (DuckDB file in a temporary folder) with `--prompts` train-split
   problems in 40 cells and `--groups` training groups of 8 samples over 50 updates of one
   lineage, written in bulk; timed: the views `prompt_posterior` (every prompt, seen or not) and
   `cell_posterior` materialised from the ledger, and the Python twin `ledger_posterior` (which
   reads the same tables into Polars). Best of `--repeats`.
2. Per step: `posterior_select` and `posterior_screen` at the headline's shape (8 groups picked
   from 64 candidates, an in-memory history of `--history` groups) against a trainer whose
   sampling costs nothing, so the time is the selection's own; and the same for the ledger side
   of a step (one `train_rollouts` + `train_metrics` batch of 64 rows). Each is divided by the
   real model's measured seconds per step, read from the headline's committed run files
   (`benchmarks/results/headline_runs/*.json`, sample + score + update per step; median).

Run: `.venv/bin/python benchmarks/posterior_speed.py [--prompts 1000000]`.
Writes benchmarks/results/posterior_speed.json and posterior_speed.png. Timings are of this
machine (recorded with its core count and load), never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RESULTS = Path(__file__).parent / "results"


def best(fn: Callable[[], Any], repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def build_ledger(path: Path, prompts: int, groups: int, seed: int = 0) -> None:
    from pipeline.store import Ledger

    rng = np.random.default_rng(seed)
    ids = [f"p{i:07d}" for i in range(prompts)]
    cell = rng.integers(0, 40, prompts)
    problems = pl.DataFrame(
        {
            "problem_id": ids,
            "source": "gen:bench",
            "family": [f"fam{c % 10}" for c in cell],
            "level": (cell // 10 + 1).astype(np.int32),
            "question": "q",
            "answer": "1",
            "verifier": "math",
            "split": "train",
            "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        }
    )
    which = rng.integers(0, prompts, groups)
    step = np.sort(rng.integers(0, 50, groups))
    rate = rng.beta(0.8, 0.8, groups)
    n = groups * 8
    correct = rng.random(n) < np.repeat(rate, 8)
    rollouts = pl.DataFrame(
        {
            "train_id": "t",
            "step": np.repeat(step, 8).astype(np.int32),
            "problem_id": np.repeat(np.array(ids, dtype=object)[which], 8),
            "sample_idx": np.tile(np.arange(8, dtype=np.int32), groups),
            "policy": "x",
            "reward": correct.astype(np.float64),
            "correct": correct,
        }
    )
    with Ledger.open(path=path) as ledger:
        ledger.write("problems", problems)
        ledger.run(
            "INSERT INTO train_runs (train_id, base_revision, started_at, status) "
            "VALUES ('t', 'base', now(), 'finished')"
        )
        ledger.write("train_rollouts", rollouts)


def recompute(prompts: int, groups: int, repeats: int) -> dict[str, Any]:
    from pipeline.selection.evidence import ledger_posterior
    from pipeline.store import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        t0 = time.perf_counter()
        build_ledger(path, prompts, groups)
        built = time.perf_counter() - t0
        with Ledger.open(path=path, read_only=True) as ledger:
            rows = ledger.sql("SELECT count(*) FROM prompt_posterior").item()
            view = best(
                lambda: ledger.sql("SELECT * FROM prompt_posterior").height, repeats
            )  # materialised into Polars, as a caller reads it
            cells = best(lambda: ledger.sql("SELECT * FROM cell_posterior").height, repeats)
            python = best(lambda: ledger_posterior(ledger), repeats)
    return {
        "prompts": prompts,
        "prompt_rows": int(rows),
        "groups": groups,
        "samples": groups * 8,
        "build_seconds": round(built, 2),
        "prompt_posterior_view_seconds": round(view, 3),
        "cell_posterior_view_seconds": round(cells, 3),
        "python_twin_seconds": round(python, 3),
    }


class Free:
    """A trainer whose sampling and scoring cost nothing: coin-flip verdicts at a fixed rate."""

    def __init__(self) -> None:
        from grpo_core.config import GRPOConfig

        self.cfg, self.rng = GRPOConfig(), np.random.default_rng(0)

    def step_seed(self, step: int, round_: int = 0) -> int:
        return step * 100 + round_

    def sample_and_score(self, items, seed, sizes=None):  # type: ignore[no-untyped-def]
        from grpo_core.types import Sample, Scores

        sizes = list(sizes) if sizes is not None else [it.group_size for it in items]
        groups = [[Sample((1,), "x", False) for _ in range(g)] for g in sizes]
        ok = (self.rng.random(sum(sizes)) < 0.4).tolist()
        return groups, Scores([float(x) for x in ok], ok), 0.0, 0.0


def per_step(history: int, repeats: int) -> dict[str, Any]:
    from grpo_core.types import Item
    from pipeline.selection.posterior import (
        Observations,
        PosteriorConfig,
        ScreenConfig,
        posterior_screen,
        posterior_select,
    )
    from pipeline.store import Ledger

    rng = np.random.default_rng(1)
    pool = [Item(f"q{i}", "1", 8, key=f"k{i}") for i in range(2000)]
    cell_of = {it.key: f"c{i % 20}" for i, it in enumerate(pool)}

    def obs() -> Observations:
        return Observations(
            [
                (f"k{int(j)}", cell_of[f"k{int(j)}"], float(rng.integers(0, 9)), 8.0, u % 32)
                for u, j in enumerate(rng.integers(0, 2000, history))
            ]
        )

    def source(step: int, _round: int) -> list[Item]:
        r = np.random.default_rng(step)
        return [pool[int(i)] for i in r.choice(len(pool), 64, replace=False)]

    cfg = PosteriorConfig(candidates=8)
    select = posterior_select(source, cell_of, obs(), 8, 0, cfg)
    screen = posterior_screen(source, cell_of, obs(), 8, 0, cfg, ScreenConfig(g_max=8))
    t = Free()
    select_s = best(lambda: select(t, 33), repeats)  # type: ignore[arg-type]
    screen_s = best(lambda: screen(t, 33), repeats)  # type: ignore[arg-type]
    rows = pl.DataFrame(
        {
            "train_id": "t",
            "step": np.zeros(64, dtype=np.int32),
            "problem_id": [f"k{i // 8}" for i in range(64)],
            "sample_idx": np.tile(np.arange(8, dtype=np.int32), 8),
            "policy": "x",
            "completion": "y" * 400,
            "reward": np.ones(64),
            "correct": np.ones(64, dtype=bool),
        }
    )
    metrics = pl.DataFrame(
        {"train_id": "t", "step": np.zeros(30, dtype=np.int32),
         "name": [f"m{i}" for i in range(30)], "value": np.ones(30)}
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(path=Path(tmp) / "l.duckdb") as led:
        write_s = best(
            lambda: led.write_batch(
                {"train_rollouts": rows, "train_metrics": metrics}, on_conflict="replace"
            ),
            repeats,
        )
    return {
        "history_groups": history,
        "candidates": 64,
        "batch": 8,
        "posterior_select_seconds": round(select_s, 4),
        "posterior_screen_seconds": round(screen_s, 4),
        "ledger_write_seconds": round(write_s, 4),
    }


def real_step_seconds() -> dict[str, Any] | None:
    """Median sample + score + update seconds per step of the headline's real-model runs."""
    steps = []
    runs = sorted((RESULTS / "headline_runs").glob("*_s*.json"))
    for f in runs:
        steps += [s["seconds"] for s in json.loads(f.read_text())["steps"] if s["seconds"]]
    if not steps:
        return None
    return {"runs": [f.stem for f in runs], "steps": len(steps),
            "median_seconds": statistics.median(steps)}  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    r = result["recompute"]
    names = ["prompt_posterior\n(view)", "cell_posterior\n(view)", "Python twin"]
    vals = [r["prompt_posterior_view_seconds"], r["cell_posterior_view_seconds"],
            r["python_twin_seconds"]]  # fmt: skip
    a.bar(names, vals, color=["tab:blue", "tab:blue", "tab:orange"])
    a.axhline(1.0, color="k", ls="--", lw=1, label="target 1 s")
    a.set_ylabel("seconds (best of repeats)")
    a.set_title(f"recompute: {r['prompts']:,} prompts, {r['samples']:,} samples")
    a.legend()
    s = result["per_step"]
    share = result.get("share_of_real_step") or {}
    names = ["select", "screen", "ledger write"]
    vals = [share.get(k, 0.0) * 100 for k in ("posterior_select", "posterior_screen",
                                              "ledger_write")]  # fmt: skip
    b.bar(names, vals, color="tab:green")
    b.axhline(5.0, color="k", ls="--", lw=1, label="target 5 %")
    b.set_ylabel("% of a real-model step")
    b.set_title(f"per step ({s['batch']} of {s['candidates']} candidates)")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=500_000, help="training groups of 8")
    ap.add_argument("--history", type=int, default=4_000, help="groups a run has seen")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1m": round(os.getloadavg()[0], 2),
        },
        "recompute": recompute(args.prompts, args.groups, args.repeats),
        "per_step": per_step(args.history, args.repeats),
        "real_step": real_step_seconds(),
    }
    result["machine"]["load_1m_after"] = round(os.getloadavg()[0], 2)
    if result["real_step"]:
        base = result["real_step"]["median_seconds"]
        s = result["per_step"]
        result["share_of_real_step"] = {
            k: round(s[f"{k}_seconds"] / base, 6)
            for k in ("posterior_select", "posterior_screen", "ledger_write")
        }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "posterior_speed.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.results / "posterior_speed.png")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
