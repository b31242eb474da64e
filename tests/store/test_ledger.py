"""The ledger: schema, migrations, idempotent batch writes, all-or-nothing commits, locking."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.store import Ledger, check_read_only, migrations

TABLES = {
    "problems",
    "sampling_runs",
    "rollouts",
    "curricula",
    "curriculum_items",
    "rejections",
    "train_runs",
    "train_metrics",
    "checkpoints",
    "rollout_steps",
    "verifier_audit",
    "rescored_verdicts",
    "train_rollouts",
}
VIEWS = {
    "group_stats",
    "prompt_stats",
    "difficulty_by_family",
    "run_summary",
    "curriculum_summary",
    "rejection_summary",
    "heldout_problem_pass1",
    "heldout_runs",
    "heldout_pass1",
    "step_accuracy_by_family",
    "first_wrong_step",
    "verifier_disagreements",
    "verifier_audit_rates",
    "verdict_changes",
    "train_group_stats",
    "train_prompt_trajectory",
    "posterior_clock",
    "posterior_observations",
    "posterior_weighted",
    "cell_posterior",
    "prompt_posterior",
    "selection_calibration",
}


def rollouts(n: int, run_id: str = "r1", reward: float = 1.0) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_id": [run_id] * n,
            "problem_id": [f"p{i // 4}" for i in range(n)],
            "sample_idx": [i % 4 for i in range(n)],
            "completion": [str(i) for i in range(n)],
            "n_tokens": [1] * n,
            "finish_reason": ["stop"] * n,
            "reward": [reward] * n,
            "correct": [reward > 0] * n,
        }
    )


def test_schema_has_the_designed_tables_and_views(ledger: Ledger) -> None:
    tables = {r[0] for r in ledger.run("SELECT table_name FROM duckdb_tables()")}
    views = {r[0] for r in ledger.run("SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    assert tables >= TABLES
    assert views == VIEWS
    for view in VIEWS:  # every view binds and runs on an empty ledger
        assert ledger.sql(f"SELECT * FROM {view}").height == 0


def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    with Ledger.open(path=path) as first:
        versions = [v for v, _, _ in migrations()]
        assert sorted(first.applied_migrations()) == versions
        first_id = first.ledger_id
    assert Ledger.memory().ledger_id != first_id
    with Ledger.open(path=path) as again:
        assert again.migrate() == []
        assert again.ledger_id == first_id
        assert again.run("SELECT count(*) FROM schema_migrations")[0][0] == len(versions)


def test_edited_migration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    with Ledger.open(path=path) as led:
        led.run("UPDATE schema_migrations SET checksum = 'tampered' WHERE version = 1")
    with pytest.raises(SieveError, match="forward-only"):
        Ledger.open(path=path)


def test_newer_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    with Ledger.open(path=path) as led:
        led.run("INSERT INTO schema_migrations VALUES (9999, '9999_x.sql', 'x', now())")
    with pytest.raises(SieveError, match="newer than this Sieve"):
        Ledger.open(path=path)


def test_same_batch_twice_leaves_identical_checksums(ledger: Ledger) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    run = pl.DataFrame(
        {
            "run_id": ["r1"],
            "purpose": ["screen"],
            "model": ["tiny"],
            "model_revision": ["rev"],
            "backend": ["hf"],
            "group_size": [4],
            "temperature": [1.0],
            "started_at": [now],
            "status": ["finished"],
        }
    )
    batch = {"sampling_runs": run, "rollouts": rollouts(40)}
    assert ledger.write_batch(batch) == {"sampling_runs": 1, "rollouts": 40}
    before = {t: ledger.checksum(t) for t in TABLES}
    assert ledger.write_batch(batch) == {"sampling_runs": 0, "rollouts": 0}
    assert {t: ledger.checksum(t) for t in TABLES} == before


def test_duplicate_keys_inside_a_batch_keep_the_first_row(ledger: Ledger) -> None:
    batch = pl.concat([rollouts(8, reward=1.0), rollouts(8, reward=0.0)])
    assert ledger.write("rollouts", batch) == 8
    assert ledger.sql("SELECT DISTINCT reward FROM rollouts")["reward"].to_list() == [1.0]


def test_ignore_keeps_stored_rows_and_replace_overwrites(ledger: Ledger) -> None:
    ledger.write("rollouts", rollouts(8, reward=1.0))
    assert ledger.write("rollouts", rollouts(12, reward=0.0)) == 4  # only the 4 new keys
    stored = ledger.sql("SELECT reward, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1")
    assert stored.rows() == [(0.0, 4), (1.0, 8)]
    assert ledger.write("rollouts", rollouts(12, reward=0.5), on_conflict="replace") == 12
    assert ledger.sql("SELECT DISTINCT reward FROM rollouts")["reward"].to_list() == [0.5]


def test_bad_batches_are_refused_and_nothing_is_written(ledger: Ledger) -> None:
    with pytest.raises(SieveError, match="no column"):
        ledger.write("rollouts", rollouts(4).with_columns(bogus=pl.lit(1)))
    with pytest.raises(SieveError, match="key column"):
        ledger.write("rollouts", rollouts(4).drop("sample_idx"))
    with pytest.raises(SieveError, match="no table"):
        ledger.write("nope", rollouts(4))
    assert ledger.checksum("rollouts") == (0, 0)


def test_failure_inside_a_batch_rolls_back_every_table(ledger: Ledger) -> None:
    bad_run = pl.DataFrame({"run_id": ["r1"], "purpose": ["not-a-purpose"], "status": ["x"]})
    with pytest.raises(Exception, match=r"(?i)constraint"):
        ledger.write_batch({"rollouts": rollouts(8), "sampling_runs": bad_run})
    assert ledger.checksum("rollouts") == (0, 0)


KILLER = textwrap.dedent(
    """
    import sys
    import polars as pl
    from pathlib import Path
    from pipeline.store import Ledger
    n = int(sys.argv[2])
    frame = pl.DataFrame({
        "run_id": ["big"] * n,
        "problem_id": pl.Series(range(n)).cast(pl.Utf8),
        "sample_idx": [0] * n,
        "completion": ["x" * 20] * n,
        "reward": [1.0] * n,
    })
    led = Ledger.open(path=Path(sys.argv[1]))
    print("writing", flush=True)
    led.write("rollouts", frame)
    print("done", flush=True)
    """
)


def _count_after_kill(path: Path, n: int, env: dict[str, str], delay: float | None) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, str(path), str(n)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    if delay is not None:
        import time

        time.sleep(delay)
        proc.kill()
    proc.wait(timeout=120)
    if delay is None:
        assert proc.returncode == -9  # the crash point killed it
    with Ledger.open(path=path) as led:
        return led.checksum("rollouts")[0]


def test_sigkill_at_the_commit_point_leaves_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "SIEVE_CRASH_AT": "ledger.before_commit"}
    assert _count_after_kill(tmp_path / "l.duckdb", 200_000, env, delay=None) == 0


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
def test_sigkill_during_a_batch_write_leaves_all_or_none(tmp_path: Path, delay: float) -> None:
    n = 500_000
    count = _count_after_kill(tmp_path / "l.duckdb", n, dict(os.environ), delay=delay)
    assert count in (0, n)


def test_a_ledger_locked_by_another_writer_gives_a_clear_error(tmp_path: Path, lock_holder) -> None:
    path = tmp_path / "l.duckdb"
    Ledger.open(path=path).close()
    with lock_holder(path), pytest.raises(SieveError, match="locked by another writer") as info:
        Ledger.open(path=path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "query",
    [
        "DROP TABLE problems",
        "DELETE FROM problems",
        "INSERT INTO problems SELECT * FROM problems",
        "UPDATE problems SET level = 0",
        "CREATE TABLE x AS SELECT 1",
        "COPY problems TO 'x.csv'",
        "ATTACH 'other.duckdb'",
        "SELECT 1; DROP TABLE problems",
        "PRAGMA enable_profiling",
    ],
)
def test_writing_statements_are_refused(query: str) -> None:
    with pytest.raises(SieveError, match="read-only"):
        check_read_only(query)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1",
        "EXPLAIN SELECT 1",
        "SHOW TABLES",
        "DESCRIBE problems",
        "WITH a AS (SELECT 1) SELECT * FROM a",
    ],
)
def test_reading_statements_pass(query: str) -> None:
    check_read_only(query)


def test_read_only_connection_cannot_write_even_if_the_guard_is_bypassed(tmp_path: Path) -> None:
    path = tmp_path / "l.duckdb"
    Ledger.open(path=path).close()
    with Ledger.open(path=path, read_only=True) as led:
        with pytest.raises(Exception, match=r"(?i)read-only"):
            led.run("DROP TABLE problems")
        with pytest.raises(SieveError, match="read-only"):
            led.write("rollouts", rollouts(4))
