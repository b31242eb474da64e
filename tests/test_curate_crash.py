"""Kill the shipped curation flow (SIGKILL) at six points; each re-run ends equal to an
uninterrupted run. The children run `flows.curate.curate_flow` under Prefect, against one
Prefect test server for the module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.store import Ledger
from tests.prefect_api import prefect_api  # noqa: F401 (the module's Prefect server)

pytestmark = pytest.mark.crash  # make test-crash: ~1.5 min of child processes

CHILD = Path(__file__).with_name("curate_child.py")
COMPARED = ("rollouts", "curriculum_items", "rejections", "problems")


def run_child(path: Path, crash_at: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "SIEVE_CRASH_AT"}
    if crash_at:
        env["SIEVE_CRASH_AT"] = crash_at
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, str(CHILD), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode


def fingerprint(path: Path) -> dict[str, object]:
    with Ledger.open(path=path) as led:
        prints: dict[str, object] = {t: led.checksum(t)[:1] for t in ("problems",)}
        for table in ("rollouts", "rollout_steps", "curriculum_items", "rejections"):
            prints[table] = led.checksum(table)
        runs = led.sql("SELECT run_id, status, group_size FROM sampling_runs ORDER BY run_id")
        prints["runs"] = runs.rows()
        dupes = led.sql(
            "SELECT count(*) AS n FROM (SELECT run_id, problem_id, sample_idx FROM rollouts "
            "GROUP BY ALL HAVING count(*) > 1)"
        )
        prints["duplicates"] = dupes["n"][0]
    return prints


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    path = tmp_path_factory.mktemp("ref") / "ledger.duckdb"
    assert run_child(path) == 0
    return fingerprint(path)


@pytest.mark.parametrize(
    "crash_at",
    [
        "curate.screen.before_chunk_commit@2",
        "curate.screen.after_chunk_commit@3",
        "ledger.before_commit@4",
        "curate.refine.before_chunk_commit@1",
        "curate.refine.after_chunk_commit@1",
        "curate.before_curriculum_commit",
    ],
)
def test_killed_curation_resumes_to_the_same_result(
    tmp_path: Path, reference: dict[str, object], crash_at: str
) -> None:
    path = tmp_path / "ledger.duckdb"
    assert run_child(path, crash_at) == -9  # killed at the crash point
    assert run_child(path) == 0  # the re-run completes
    result = fingerprint(path)
    assert result == reference
    assert result["duplicates"] == 0
    assert all(status == "finished" for _, status, _ in result["runs"])  # type: ignore[attr-defined]
