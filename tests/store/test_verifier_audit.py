"""`verifier_audit` (migration 0007): idempotent on its natural key, added to an existing ledger,
and read through the `verifier_disagreements` and `verifier_audit_rates` views and the stored
queries `sieve audit` prints.

Test: `.venv/bin/pytest tests/store/test_verifier_audit.py -q`
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import pipeline.store.ledger as ledger_module
from pipeline.jobs.curate import audit
from pipeline.store import Ledger, migrations
from tests.store.audit_rows import AUDITED, LONG, STRAY, audit_frame, hand_built, problems


def test_the_disagreements_view(ledger: Ledger) -> None:
    hand_built(ledger)
    got = ledger.sql("SELECT * FROM verifier_disagreements ORDER BY problem_id")
    assert got.select("family", "level", "gold_answer", "sieve_correct", "second_correct",
                      "why", "run_id", "verifier_version").rows() == [
        ("arith", 1, "7", True, False, "sample", "screen-k", "v1"),
        ("arith", 2, "1,5", False, True, "guess", "screen-k", "v1"),
    ]  # fmt: skip
    assert got["completion_excerpt"].to_list() == [LONG[:200], STRAY]
    assert {"sieve_reason", "sieve_detail", "problem_id", "sample_idx"} <= set(got.columns)


def test_rates_per_family_and_per_cell(ledger: Ledger) -> None:
    hand_built(ledger)
    cells = ledger.sql(
        "SELECT family, level, audited, guesses, compared, disagreements, second_failed, "
        "disagreement_rate FROM verifier_audit_rates ORDER BY family, level"
    )
    assert cells.rows() == [
        ("arith", 1, 3, 0, 2, 1, 1, 0.5),
        ("arith", 2, 1, 1, 1, 1, 0, 1.0),
        ("word", 1, 2, 0, 1, 0, 0, 0.0),
    ]
    families = audit.by_family(ledger, ["screen-k", "refine-k"])
    assert families.select("family", "audited", "compared", "disagreements").rows() == [
        ("arith", 4, 3, 2),
        ("word", 2, 1, 0),
    ]
    assert families["disagreement_rate"].to_list() == [pytest.approx(2 / 3), 0.0]
    worst = audit.worst_cells(ledger, ["screen-k"])
    assert worst.select("family", "level", "disagreement_rate").rows() == [
        ("arith", 2, 1.0),
        ("arith", 1, 0.5),
    ]  # cells without a disagreement are left out
    assert audit.examples(ledger, ["screen-k"], 1)["why"].to_list() == ["guess"]
    assert audit.by_family(ledger, ["refine-k"]).height == 0
    line = audit.warning(ledger, ["screen-k"], 0.05, "cur-k")
    assert line is not None and "arith 66.7% (2 of 3 compared)" in line and "word" not in line
    assert "`sieve audit cur-k`" in line
    assert audit.warning(ledger, ["screen-k"], 0.7, "cur-k") is None


def test_writing_again_adds_nothing_but_a_new_verifier_version_does(ledger: Ledger) -> None:
    hand_built(ledger)
    assert ledger.write("verifier_audit", audit_frame()) == 0
    newer = audit_frame().with_columns(pl.lit("v2").alias("verifier_version"))
    assert ledger.write("verifier_audit", newer) == len(AUDITED)


def test_an_existing_ledger_gets_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sieve.duckdb"
    older = [m for m in migrations() if m[0] < 7]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0007
    with Ledger.open(path=path) as led:
        led.write("problems", problems())
    monkeypatch.undo()
    with Ledger.open(path=path, read_only=True) as led:  # a reader applies it too
        assert 7 in led.applied_migrations()
        assert led.sql("SELECT * FROM verifier_disagreements").height == 0
    with Ledger.open(path=path) as led:
        hand_built(led)
        assert led.checksum("verifier_audit")[0] == len(AUDITED)
