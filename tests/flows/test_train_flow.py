"""The Prefect training flow: without a model it trains the one the curriculum was curated with."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from flows.train import TrainParams, resolve, train_flow
from pipeline.core.errors import SieveError
from pipeline.jobs.train.settings import TrainSettings
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


def test_the_flow_checks_its_sampling_against_the_curation_when_it_resolves_the_job(
    tmp_path: Path,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`sieve loop`, the demo and benchmarks hand the flow no resolved job: the flow checks the
    run's sampling against the curation's itself (one warning line; `strict_sampling` refuses),
    as `sieve train` does before Prefect starts; a job handed in is not checked twice."""
    from pipeline.selection import CurateConfig

    home = tmp_path / "home"
    curated = CurateConfig.model_validate({"sampling": {"temperature": 0.6}}).model_dump_json()
    model = str(tiny_model_dir)
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
        ledger.run("UPDATE curricula SET config = $c", {"c": curated})
        job = resolve(ledger, TrainParams(home=str(home), model=model, settings=SETTINGS))
        out = capsys.readouterr().out
        warnings = [x for x in out.splitlines() if x.startswith("warning: ")]
        assert len(warnings) == 1, out
        assert "curriculum cur-test was curated at other sampling settings" in warnings[0]
        assert "temperature 0.6 (curated) vs 1 (trained)" in warnings[0]
        assert "max_new_tokens 16 (curated) vs 4 (trained)" in warnings[0]
        strict = TrainParams(home=str(home), model=model, settings=SETTINGS, strict_sampling=True)
        with pytest.raises(
            SieveError, match=r"^curriculum cur-test was curated .*drop --strict\)$"
        ):
            resolve(ledger, strict)
        assert resolve(ledger, TrainParams(job=job)) is job
        assert "warning" not in capsys.readouterr().out
        alike = SETTINGS.model_copy(
            update={"grpo": {**SETTINGS.grpo, "temperature": 0.6, "max_new_tokens": 16}}
        )
        resolve(ledger, TrainParams(home=str(home), model=model, settings=alike))
        assert "warning" not in capsys.readouterr().out
