"""A screen run's verifier audit written straight into a ledger (no model, no verifier), for the
view and `sieve audit` tests: three problems (arith 1, arith 2, word 1), six audited rollouts, two
disagreements, one unverified by math-verify, one that Sieve's verifier failed.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from pipeline.jobs.curate.audit import AUDIT_SCHEMA
from pipeline.store import Ledger

NOW = datetime(2026, 1, 1, tzinfo=UTC)
# Ledger text is never markup: `[bold]` would be eaten by Rich, a stray `[/oops]` raise there.
LONG = "[bold]" + "7" * 500  # longer than the view's 200-character excerpt
STRAY = "[/oops] 1.5"
# (problem, sample, sieve_correct, second_correct, why); the run is "screen-k"
AUDITED = [
    ("pa", 0, True, True, "sample"),
    ("pa", 1, True, False, "sample"),  # disagreement
    ("pa", 2, False, None, "sample"),  # math-verify timed out: not compared
    ("pb", 0, False, True, "guess"),  # disagreement on a guessed verdict
    ("pw", 0, True, True, "sample"),
    ("pw", 1, None, False, "sample"),  # Sieve's verifier failed: not compared
]
COMPLETIONS = {("pa", 1): LONG, ("pb", 0): STRAY}


def problems() -> pl.DataFrame:
    ids = ["pa", "pb", "pw"]
    return pl.DataFrame(
        {
            "problem_id": ids,
            "source": "test",
            "family": ["arith", "arith", "word"],
            "level": pl.Series([1, 2, 1], dtype=pl.Int32),
            "params": "{}",
            "question": [f"q {i}" for i in ids],
            "answer": ["7", "1,5", "3"],
            "verifier": "math",
            "split": "train",
            "created_at": NOW,
        }
    )


def audit_frame(run_id: str = "screen-k") -> pl.DataFrame:
    rows = [
        (run_id, p, j, "v1", ours, "correct" if ours else "wrong", "fast_path", second,
         None if ours is None or second is None else ours != second, why)
        for p, j, ours, second, why in AUDITED
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=AUDIT_SCHEMA, orient="row")


def hand_built(ledger: Ledger) -> None:
    """Problems, a screen run's rollouts (one with a long completion) and their audit rows."""
    run = pl.DataFrame(
        {"run_id": ["screen-k"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
         "backend": ["sim"], "group_size": [3], "status": ["finished"]}
    )  # fmt: skip
    keys = [(p, j) for p, j, *_ in AUDITED]
    rollouts = pl.DataFrame(
        {
            "run_id": "screen-k",
            "problem_id": [p for p, _ in keys],
            "sample_idx": pl.Series([j for _, j in keys], dtype=pl.Int32),
            "completion": [COMPLETIONS.get((p, j), f"{p}{j}") for p, j in keys],
        }
    )
    ledger.write_batch(
        {
            "problems": problems(),
            "sampling_runs": run,
            "rollouts": rollouts,
            "verifier_audit": audit_frame(),
        }
    )
