"""`rescored_verdicts` (migration 0008): idempotent on its natural key, one set per verifier
version, added to an existing ledger, and read through the `verdict_changes` view.

Test: `.venv/bin/pytest tests/store/test_rescored_verdicts.py -q`
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import pipeline.store.ledger as ledger_module
from pipeline.store import Ledger, migrations
from tests.store.audit_rows import NOW, hand_built, problems

# (problem, sample, correct) of screen-k's rollouts as the stored verdicts and as rescored
STORED = [("pa", 0, True), ("pa", 1, True), ("pb", 0, False), ("pw", 1, None)]
RESCORED = [("pa", 0, True), ("pa", 1, False), ("pb", 0, True), ("pw", 1, False)]
SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "problem_id": pl.String(),
    "sample_idx": pl.Int32(),
    "verifier_version": pl.String(),
    "reward": pl.Float64(),
    "correct": pl.Boolean(),
    "reason": pl.String(),
    "detail": pl.String(),
    "rescored_at": pl.Datetime("us", "UTC"),
}


def verdicts(version: str) -> pl.DataFrame:
    rows = [
        ("screen-k", p, j, version, None if c is None else float(c), c,
         "verifier_error" if c is None else ("correct" if c else "wrong"), "fast_path", NOW)
        for p, j, c in RESCORED
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


def stored_verdicts(ledger: Ledger) -> None:
    """hand_built's screen-k, its rollouts given the STORED verdicts under version v1."""
    hand_built(ledger)
    ledger.run("UPDATE sampling_runs SET verifier_version = 'v1' WHERE run_id = 'screen-k'")
    for p, j, c in STORED:
        ledger.run(
            "UPDATE rollouts SET correct = $c WHERE problem_id = $p AND sample_idx = $j",
            {"c": c, "p": p, "j": j},
        )


def test_the_changes_view_lists_changed_verdicts_with_both_versions(ledger: Ledger) -> None:
    stored_verdicts(ledger)
    ledger.write("rescored_verdicts", verdicts("v2"))
    got = ledger.sql("SELECT * FROM verdict_changes ORDER BY problem_id, sample_idx")
    assert got.select("problem_id", "sample_idx", "family", "level", "gold_answer",
                      "old_version", "old_correct", "new_version", "new_correct").rows() == [
        ("pa", 1, "arith", 1, "7", "v1", True, "v2", False),
        ("pb", 0, "arith", 2, "1,5", "v1", False, "v2", True),
        ("pw", 1, "word", 1, "3", "v1", None, "v2", False),  # a verifier error is a change too
    ]  # fmt: skip
    assert {"completion_excerpt", "new_reason", "new_detail", "run_id"} <= set(got.columns)


def test_writing_again_adds_nothing_but_a_new_verifier_version_does(ledger: Ledger) -> None:
    stored_verdicts(ledger)
    assert ledger.write("rescored_verdicts", verdicts("v2")) == len(RESCORED)
    assert ledger.write("rescored_verdicts", verdicts("v2")) == 0
    assert ledger.write("rescored_verdicts", verdicts("v3")) == len(RESCORED)
    assert ledger.sql("SELECT * FROM verdict_changes").height == 6  # 3 changes per version


def test_an_existing_ledger_gets_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sieve.duckdb"
    older = [m for m in migrations() if m[0] < 8]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0008
    with Ledger.open(path=path) as led:
        led.write("problems", problems())
    monkeypatch.undo()
    with Ledger.open(path=path, read_only=True) as led:  # a reader applies it too
        assert 8 in led.applied_migrations()
        assert led.sql("SELECT * FROM verdict_changes").height == 0
