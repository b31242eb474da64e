"""The Prefect training flow: without a model it trains the one the curriculum was curated with."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from flows.train import TrainParams, train_flow
from pipeline.jobs.recipes import TrainSettings
from pipeline.policy.model import folder_revision
from pipeline.store import Ledger

SETTINGS = TrainSettings(
    grpo={"total_steps": 2, "checkpoint_every": 0, "max_new_tokens": 4},
    rollouts_per_step=8,
    eval_per_level=1,
    eval_samples=1,
    eval_families=["arith"],
    tensorboard=False,
)


def test_the_flow_trains_the_curriculum_model(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[[Ledger], object]
) -> None:
    home = tmp_path / "home"
    curated = tmp_path / "curated-with"  # not <home>/models/tiny, which does not exist
    shutil.copytree(tiny_model_dir, curated)
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
        ledger.run(
            "UPDATE curricula SET model = $m, model_revision = $r",
            {"m": str(curated), "r": folder_revision(curated)},
        )
    out = train_flow(TrainParams(home=str(home), settings=SETTINGS))
    assert out["curriculum_id"] == "cur-test" and out["steps"] == 2
    assert out["base_revision"] == folder_revision(curated)
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.run("SELECT base_model, status FROM train_runs") == [
            (str(curated), "finished")
        ]
