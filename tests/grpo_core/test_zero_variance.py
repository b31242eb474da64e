"""The trainer, the selection step and the ledger share one definition of an uninformative group."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from grpo_core.advantages import ZERO_VAR_TOL, is_uninformative
from pipeline.store import Ledger

GROUPS: dict[str, list[float]] = {
    "constant": [0.7, 0.7 + 1e-9, 0.7 - 1e-9, 0.7],  # floats differ by ~1e-9: still constant
    "all_right": [1.0, 1.0, 1.0, 1.0],
    "all_wrong": [0.0, 0.0, 0.0, 0.0],
    "mixed": [1.0, 0.0, 0.0, 1.0],
    "barely": [0.5, 0.5 + 1e-5, 0.5, 0.5],  # a real (if tiny) spread
}


def test_sql_macro_holds_the_same_tolerance(ledger: Ledger) -> None:
    assert ledger.run("SELECT sieve_zero_var_tol()")[0][0] == ZERO_VAR_TOL


def test_constant_group_is_uninformative_although_its_std_is_not_zero() -> None:
    rewards = GROUPS["constant"]
    mean = sum(rewards) / len(rewards)
    assert any(abs(r - mean) > 0 for r in rewards)  # advantage == 0 would call it informative
    assert is_uninformative(max(rewards), min(rewards))
    assert not is_uninformative(1.0, 0.0)
    assert is_uninformative(ZERO_VAR_TOL, 0.0)  # a spread of exactly tol is included


def test_group_stats_view_agrees_with_is_uninformative(ledger: Ledger) -> None:
    run = {
        "run_id": ["r"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
        "backend": ["hf"], "group_size": [4], "temperature": [1.0],
        "started_at": [datetime(2026, 1, 1, tzinfo=UTC)], "status": ["finished"],
    }  # fmt: skip
    rows = [
        {"run_id": "r", "problem_id": pid, "sample_idx": i, "reward": r, "correct": r >= 1.0}
        for pid, rewards in GROUPS.items()
        for i, r in enumerate(rewards)
    ]
    ledger.write_batch({"sampling_runs": pl.DataFrame(run), "rollouts": pl.DataFrame(rows)})
    got = dict(ledger.sql("SELECT problem_id, zero_variance FROM group_stats").iter_rows())
    for pid, rewards in GROUPS.items():
        assert got[pid] == is_uninformative(max(rewards), min(rewards)), pid
    assert got["constant"] and not got["barely"]


@pytest.mark.parametrize("tol", [0.0, 1e-12, 1e-3])
def test_tolerance_argument(tol: float) -> None:
    assert is_uninformative(0.5, 0.5, tol)
    assert is_uninformative(tol, 0.0, tol)
    assert not is_uninformative(2 * tol + 1e-9, 0.0, tol)
