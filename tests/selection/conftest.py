"""Fixtures for selection tests: random rollouts, and a ledger holding them."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from pipeline.store import Ledger


def random_rollouts(seed: int = 0, n_problems: int = 40, runs: int = 3, g: int = 6) -> pl.DataFrame:
    """Rollouts of `runs` runs over `n_problems` problems: binary, graded, constant-with-jitter
    and partly failed (null reward) groups."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        for i in range(n_problems):
            kind = i % 4
            for s in range(g):
                if kind == 0:
                    reward: float | None = float(rng.random() < 0.4)
                elif kind == 1:
                    reward = float(rng.integers(0, 5)) / 4
                elif kind == 2:
                    reward = 1.0 + float(rng.normal()) * 1e-9  # constant up to rounding
                else:
                    reward = None if rng.random() < 0.3 else float(rng.random() < 0.7)
                rows.append(
                    {
                        "run_id": f"run{r}",
                        "problem_id": f"{i:016x}",
                        "sample_idx": s,
                        "reward": reward,
                        "correct": None if reward is None else reward >= 0.99,
                    }
                )
    return pl.DataFrame(rows)


def runs_frame(run_ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": run_ids,
            "purpose": "screen",
            "model": "m",
            "model_revision": "rev",
            "backend": "hf",
            "group_size": 6,
            "temperature": 1.0,
            "started_at": datetime(2026, 1, 1, tzinfo=UTC),
            "status": "finished",
        }
    )


@pytest.fixture
def rollouts() -> pl.DataFrame:
    return random_rollouts()


@pytest.fixture
def filled(ledger: Ledger, rollouts: pl.DataFrame) -> Ledger:
    runs = runs_frame(sorted(rollouts["run_id"].unique().to_list()))
    ledger.write_batch({"sampling_runs": runs, "rollouts": rollouts})
    return ledger
