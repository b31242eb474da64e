"""Only the ledger's rows say what is done: nothing cached stands in for rollouts it lacks.

A copied ledger keeps its `ledger_id` (chunk results were once persisted under it), so a copy
whose rollouts were deleted, or an older copy restored over the ledger, must still be sampled
again and end equal to a clean run (same rollouts, same curriculum, rollouts spent > 0). All
runs of this module share the session's Prefect harness, so anything Prefect kept from an
earlier run is there to be (wrongly) found.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from flows import curate as curate_flow
from pipeline.store import Ledger

pytestmark = pytest.mark.integration  # 43 s: Prefect flow runs, a clean run to compare with

_spec = importlib.util.spec_from_file_location(
    "curate_child", Path(__file__).parents[1] / "curate_child.py"
)
assert _spec and _spec.loader
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)

COMPARED = ("rollouts", "curriculum_items", "rejections")


def run_flow(home: Path) -> tuple[dict, int]:
    """Curate into `home` on a fresh simulated policy; (summary, completions it drew)."""
    params = curate_flow.CurateParams(model="simulated-cache", home=str(home), config=child.CFG)
    policy = child.simulated_policy(child.CFG)
    curate_flow._POLICIES[curate_flow.policy_key(params)] = policy
    summary = curate_flow.run(params)
    return summary, policy.sampler.calls


def fingerprint(home: Path) -> dict[str, object]:
    with Ledger.open(home, read_only=True) as led:
        prints: dict[str, object] = {t: led.checksum(t) for t in COMPARED}
        prints["problems"] = led.checksum("problems")[0]  # rows carry their creation time
        prints["runs"] = led.sql("SELECT run_id, status FROM sampling_runs ORDER BY 1").rows()
    return prints


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    home = tmp_path_factory.mktemp("clean")
    summary, calls = run_flow(home)
    assert calls > 0
    return home, summary, fingerprint(home)


def test_a_copy_with_its_rollouts_deleted_is_sampled_again(
    tmp_path: Path, clean: tuple[Path, dict, dict]
) -> None:
    source, first, reference = clean
    home = tmp_path / "copy"
    shutil.copytree(source, home)
    with Ledger.open(home) as led:
        led.run("DELETE FROM rollouts")
    summary, calls = run_flow(home)
    assert sum(summary["rollouts_spent"].values()) > 0
    assert summary["rollouts_spent"] == first["rollouts_spent"]
    assert summary["kept"] == first["kept"]
    assert calls == sum(first["rollouts_spent"].values())  # every rollout drawn once more
    assert fingerprint(home) == reference


def test_an_older_copy_restored_over_the_ledger_is_sampled_again(
    tmp_path: Path, clean: tuple[Path, dict, dict]
) -> None:
    home = tmp_path / "restored"
    Ledger.open(home).close()  # a fresh, empty ledger: this is the "backup"
    backup = tmp_path / "backup.duckdb"
    shutil.copy(home / "sieve.duckdb", backup)
    first, _ = run_flow(home)
    shutil.copy(backup, home / "sieve.duckdb")  # same ledger id, none of the night's rows
    summary, calls = run_flow(home)
    assert summary["rollouts_spent"] == first["rollouts_spent"]
    assert sum(summary["rollouts_spent"].values()) > 0 and calls > 0
    assert summary["kept"] == first["kept"] == clean[1]["kept"]
    assert fingerprint(home) == fingerprint(clean[0])


def test_a_partly_deleted_chunk_is_the_only_one_sampled_again(
    tmp_path: Path, clean: tuple[Path, dict, dict]
) -> None:
    source, first, reference = clean
    home = tmp_path / "partial"
    shutil.copytree(source, home)
    with Ledger.open(home) as led:
        screen = led.run("SELECT run_id FROM sampling_runs WHERE purpose = 'screen'")[0][0]
        (victim,) = led.run(
            "SELECT min(problem_id) FROM rollouts WHERE run_id = $r", {"r": screen}
        )[0]
        led.run(
            "DELETE FROM rollouts WHERE run_id = $r AND problem_id = $p",
            {"r": screen, "p": victim},
        )
    summary, calls = run_flow(home)
    # the first chunk of the screen run (problems sorted by id) is drawn again, nothing else
    assert calls == child.CFG.chunk_size * child.CFG.screen_g
    assert summary["rollouts_spent"] == first["rollouts_spent"]
    assert fingerprint(home) == reference
