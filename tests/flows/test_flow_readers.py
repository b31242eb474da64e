"""`sieve sql` in another process gets its answer while a curation or training flow is running.

The flows keep their ledger transient (DuckDB's lock only while they read or commit): here the
curation's sampler, and the training's per-step progress hook, run `sieve sql` as a subprocess
in the middle of the flow and record what it printed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from flows import curate as curate_flow
from flows.runtime import Runtime
from flows.train import TrainParams, train_flow
from pipeline.core.hooks import ProgressEvent
from pipeline.jobs.train.settings import TrainSettings
from pipeline.policy.model import folder_revision
from pipeline.store import Ledger

pytestmark = pytest.mark.integration  # 13 s: flows with `sieve sql` children

_spec = importlib.util.spec_from_file_location(
    "curate_child", Path(__file__).parents[1] / "curate_child.py"
)
assert _spec and _spec.loader
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)


def sieve_sql(home: Path, query: str) -> subprocess.CompletedProcess[str]:
    """`sieve sql QUERY --format csv` in a subprocess that gives up after 5 s of lock waiting."""
    env = {**os.environ, "SIEVE_LOCK_WAIT": "5"}
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "sql", query, "--format=csv", f"--home={home}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


class ReadingSampler:
    """Samples like `inner`; on its `at`-th call first runs `sieve sql` on the home."""

    def __init__(self, inner: object, home: Path, at: int):
        self.inner, self.home, self.at, self.calls = inner, home, at, 0
        self.backend = inner.backend  # type: ignore[attr-defined]
        self.model_name = inner.model_name  # type: ignore[attr-defined]
        self.seen: list[subprocess.CompletedProcess[str]] = []

    def sample(self, prompts: Sequence[str], n: int, params: object) -> list:
        self.calls += 1
        if self.calls == self.at:
            self.seen.append(sieve_sql(self.home, "SELECT count(*) AS n FROM rollouts"))
        return self.inner.sample(prompts, n, params)  # type: ignore[attr-defined]


def test_sieve_sql_answers_during_a_curation_flow(tmp_path: Path) -> None:
    params = curate_flow.CurateParams(
        model="simulated-readers", home=str(tmp_path), config=child.CFG
    )
    policy = child.simulated_policy(child.CFG)
    sampler = ReadingSampler(policy.sampler, tmp_path, at=3)
    curate_flow._POLICIES[curate_flow.policy_key(params)] = replace(policy, sampler=sampler)
    summary = curate_flow.run(params)
    (result,) = sampler.seen
    assert result.returncode == 0, result.stderr
    two_chunks = 2 * child.CFG.chunk_size * child.CFG.screen_g  # committed before the third
    assert result.stdout.split() == ["n", str(two_chunks)]
    assert summary["rollouts_spent"]["screen"] > two_chunks  # it was read mid-run


SETTINGS = TrainSettings(
    grpo={"total_steps": 3, "checkpoint_every": 1, "max_new_tokens": 4},
    rollouts_per_step=8,
    eval_per_level=1,
    eval_samples=1,
    eval_families=["arith"],
    tensorboard=False,
)


def test_sieve_sql_answers_during_a_training_flow(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[[Ledger], object]
) -> None:
    home = tmp_path / "home"
    model = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, model)
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
        ledger.run(
            "UPDATE curricula SET model = $m, model_revision = $r",
            {"m": str(model), "r": folder_revision(model)},
        )
    seen: list[subprocess.CompletedProcess[str]] = []

    def progress(event: ProgressEvent) -> None:
        if event.done == 2:
            seen.append(sieve_sql(home, "SELECT count(*) AS n FROM checkpoints"))

    out = train_flow(TrainParams(home=str(home), settings=SETTINGS), Runtime(progress=progress))
    assert out["steps"] == 3
    (result,) = seen
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["n", "1"]  # step 1's checkpoint; step 2's comes after
