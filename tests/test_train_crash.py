"""Kill the shipped training flow (SIGKILL) at named points; a --resume re-run ends equal to an
uninterrupted run. The children run `flows.train.train_flow` under Prefect, against one Prefect
test server for the module."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.store import Ledger
from tests.prefect_api import prefect_api  # noqa: F401 (the module's Prefect server)

pytestmark = pytest.mark.crash  # make test-crash: ~1 min of child processes

CHILD = Path(__file__).with_name("train_child.py")


def run_child(home: Path, mode: str, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SIEVE_CRASH_AT"}
    if crash_at:
        env["SIEVE_CRASH_AT"] = crash_at
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, str(CHILD), str(home), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def fingerprint(home: Path) -> dict[str, object]:
    with Ledger.open(home, read_only=True) as led:
        metrics = led.sql(
            "SELECT step, name, value FROM train_metrics WHERE name NOT LIKE 'time_%' "
            "ORDER BY step, name"
        )
        ckpts = led.sql("SELECT step, model_revision FROM checkpoints ORDER BY step")
        status = led.sql("SELECT status FROM train_runs")
        rollouts = led.sql("SELECT * FROM train_rollouts ORDER BY step, problem_id, sample_idx")
    return {
        "metrics": metrics.rows(),
        "checkpoints": ckpts.rows(),
        "status": status.rows(),
        "rollouts": rollouts.rows(),
    }


def make_home(root: Path, tiny_model_dir: Path, write: Callable[[Ledger], object]) -> Path:
    home = root / "home"
    shutil.copytree(tiny_model_dir, home / "models" / "tiny")
    with Ledger.open(home) as ledger:
        write(ledger)
    return home


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
) -> dict:
    home = make_home(tmp_path_factory.mktemp("ref"), tiny_model_dir, write_curriculum)
    proc = run_child(home, "fresh")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return fingerprint(home)


@pytest.mark.parametrize(
    "crash_at",
    [
        "train.after_step@3",
        "train.checkpoint.mid_write@2",
        "train.before_metrics_commit@3",
        pytest.param("train.checkpoint.after_rename@1", marks=pytest.mark.slow),
        pytest.param("train.after_step@6", marks=pytest.mark.slow),
    ],
)
def test_killed_training_resumes_to_the_uninterrupted_result(
    crash_at: str,
    reference: dict,
    tmp_path: Path,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
) -> None:
    home = make_home(tmp_path, tiny_model_dir, write_curriculum)
    crashed = run_child(home, "fresh", crash_at)
    assert crashed.returncode == -9, crashed.stderr[-2000:]  # SIGKILL, not an exception
    with Ledger.open(home, read_only=True) as led:
        assert led.run("SELECT status FROM train_runs") == [("running",)]
    resumed = run_child(home, "resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert fingerprint(home) == reference
    assert not list((home / "checkpoints").glob("*/.tmp-*"))  # leftovers pruned
