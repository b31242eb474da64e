"""Eval runs written straight into a ledger (no model, no verifier) for the held-out view tests.

An outcome list holds one verdict per sample: True (correct), False (wrong), None (the verifier
failed: reward NULL, as `pipeline.jobs.curate.rollouts` records it).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from pipeline.store import Ledger

Outcomes = dict[str, list[bool | None]]  # problem id -> one verdict per sample
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def add_problems(ledger: Ledger, cells: dict[str, tuple[str, int]]) -> None:
    """Held-out problems: id -> (family, level)."""
    ids = list(cells)
    ledger.write(
        "problems",
        pl.DataFrame(
            {
                "problem_id": ids,
                "source": "test",
                "family": [cells[i][0] for i in ids],
                "level": pl.Series([cells[i][1] for i in ids], dtype=pl.Int32),
                "params": "{}",
                "question": [f"question {i}" for i in ids],
                "answer": "1",
                "verifier": "math",
                "split": "heldout",
                "created_at": T0,
            }
        ),
    )


def add_run(
    ledger: Ledger,
    run_id: str,
    revision: str,
    temperature: float,
    outcomes: Outcomes,
    minute: int = 0,
    purpose: str = "eval",
) -> None:
    """One sampling run and its rollouts; its group size is the longest outcome list."""
    run = pl.DataFrame(
        {
            "run_id": [run_id],
            "purpose": [purpose],
            "model": ["m"],
            "model_revision": [revision],
            "backend": ["fake"],
            "group_size": [max(len(v) for v in outcomes.values())],
            "temperature": [temperature],
            "started_at": [T0 + timedelta(minutes=minute)],
            "finished_at": [T0 + timedelta(minutes=minute)],
            "status": ["finished"],
        }
    )
    pids = [p for p, verdicts in outcomes.items() for _ in verdicts]
    verdicts = [v for vs in outcomes.values() for v in vs]
    index = [i for vs in outcomes.values() for i in range(len(vs))]
    rewards = [None if v is None else float(v) for v in verdicts]
    rollouts = pl.DataFrame(
        {
            "run_id": run_id,
            "problem_id": pids,
            "sample_idx": pl.Series(index, dtype=pl.Int32),
            "completion": "x",
            "n_tokens": pl.Series([1] * len(pids), dtype=pl.Int32),
            "finish_reason": "stop",
            "reward": pl.Series(rewards, dtype=pl.Float64),
            "correct": pl.Series(verdicts, dtype=pl.Boolean),
        }
    )
    ledger.write_batch({"sampling_runs": run, "rollouts": rollouts})


def slow_pass1(
    cells: dict[str, tuple[str, int]], outcomes: Outcomes
) -> dict[tuple[str, int], tuple[float, int]]:
    """(family, level) -> (pass@1, verifier errors) by the documented rule, one loop at a time:
    per problem, correct samples over all samples (an error is wrong); per level, the mean over
    its problems."""
    per_level: dict[tuple[str, int], list[float]] = {}
    errors: dict[tuple[str, int], int] = {}
    for pid, verdicts in outcomes.items():
        cell = cells[pid]
        per_level.setdefault(cell, []).append(sum(v is True for v in verdicts) / len(verdicts))
        errors[cell] = errors.get(cell, 0) + sum(v is None for v in verdicts)
    return {c: (sum(v) / len(v), errors[c]) for c, v in per_level.items()}
