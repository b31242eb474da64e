"""The nightly flow: curate with the newest checkpoint -> train on that curriculum -> eval.

Each night continues a lineage (`pipeline.jobs.train.lineage.nightly_model`): with a model folder
given, the newest checkpoint trained from it (or from a checkpoint trained from it, and so on;
finished runs only), else the folder itself; without one, the lineage of the model the newest
curriculum was curated with, and on a fresh home the bootstrapped tiny policy. So each night samples
from what the previous night trained, and a checkpoint of another model's lineage is never picked
up. Curation reads the ledger's history (prompt_stats of recent revisions) for its prior. Training
uses the same model and backend, with `train` settings or else the recipe for the model
(the shipped `*_train.toml`), evaluates the held-out set before and after and registers the new
checkpoint, which the next night picks up. With the vllm backend a night starts one in-process
engine (`night_engine`): curation samples from it, training pushes its weights into it and
evaluates on it, and it is closed when the night ends.

Each night draws fresh candidates: the curation seed is the configured seed plus the date
(YYYYMMDD), so re-exploration by the history prior rotates instead of revisiting the same
prompts (a fixed seed re-explores the same ones every night). A night that crashed and is re-run
continues where it stopped: curation ids follow from the inputs (committed chunks are skipped)
and training resumes from its newest checkpoint (an unfinished run's checkpoints are not a
lineage head). Once a night has finished, `sieve loop` records it (table `nights`) and skips that
date on the same lineage (`flows.loop.night_done`; `--again` runs it again, from the newest
weights); this flow itself runs whatever night it is given.

Serve it on a schedule with `sieve schedule --cron "0 2 * * *"` (needs a Prefect server:
`prefect server start`, then `PREFECT_API_URL=http://127.0.0.1:4200/api`).
Test: `pytest tests/flows/test_schedule.py`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from prefect import flow
from pydantic import BaseModel, Field

from flows.curate import CurateParams, curate_flow
from flows.runtime import EngineParam, Runtime
from flows.train import TrainParams, train_flow
from grpo_core.validate import STRICT
from pipeline.core.home import resolve_home
from pipeline.core.hooks import Progress, report
from pipeline.jobs.curate.curation import policy_for
from pipeline.jobs.train.lineage import night_start
from pipeline.jobs.train.settings import TrainSettings, curation_sampling
from pipeline.selection import CurateConfig
from pipeline.store import Ledger

DEPLOYMENT = "nightly"


class NightlyParams(BaseModel):
    model_config = STRICT

    model: str | None = Field(
        default=None,
        description="Model folder whose lineage the nights continue; default the newest "
        "curriculum's model (the tiny policy on a fresh home).",
    )
    backend: str = Field(default="hf", description="hf, vllm or openai (curation and training).")
    base_urls: list[str] = Field(default_factory=list, description="openai backend servers.")
    engine: EngineParam = Field(
        default=None,
        description="vllm/openai engine options.",
    )
    home: str | None = None
    config: CurateConfig = Field(default_factory=CurateConfig)
    keep_sampling: list[str] = Field(
        default_factory=list,
        description="[sampling] fields the user set; the others follow the training settings "
        "for a chat model (pipeline.jobs.train.settings.curation_sampling).",
    )
    train: TrainSettings | None = Field(
        default=None, description="None: the recipe for the model (the shipped *_train.toml)."
    )
    skip_train: bool = Field(default=False, description="Curate only (the pre-trainer flow).")
    night: str | None = Field(default=None, description="YYYY-MM-DD; default today (UTC).")
    fresh: bool = Field(
        default=False,
        description="Start from the model folder itself, not the newest checkpoint trained from "
        "it: a new lineage (a second run, a sweep member) that still reads the groups the "
        "ledger holds of the runs trained from the same weights.",
    )


def night_seed(config: CurateConfig, night: date) -> int:
    return config.seed + int(night.strftime("%Y%m%d"))


@flow(name="sieve-nightly", log_prints=True)
def nightly_flow(params: NightlyParams, runtime: Runtime | None = None) -> dict[str, Any]:
    """One night; `runtime.progress` gets the engine start (job night, stage engine), the
    curation's chunks and the training steps."""
    progress = runtime.progress if runtime is not None else None
    night = date.fromisoformat(params.night) if params.night else datetime.now(UTC).date()
    config = params.config.model_copy(update={"seed": night_seed(params.config, night)})
    folder, why = night_start(params.home, params.model, params.fresh)
    model = str(folder)
    print(f"night {night}: model {model} ({why})")
    if params.backend != "openai" or folder.is_dir():  # a served name has no recipe to read
        config, line = curation_sampling(config, folder, params.keep_sampling, params.train)
        if line:
            print(f"night {night}: {line}")
    curate = CurateParams(
        model=model,
        backend=params.backend,
        base_urls=params.base_urls,
        home=params.home,
        config=config,
        engine=params.engine,
    )
    engine = night_engine(params, folder, progress)
    try:
        pol = policy_for(model, params.backend, sampler=engine) if engine else None
        summary = curate_flow(curate, Runtime(policy=pol, progress=progress))
        print(f"night {night}: curriculum {summary['curriculum_id']} kept {summary['kept']}")
        result: dict[str, Any] = {"night": night.isoformat(), "model": model, "curate": summary}
        if params.skip_train or not summary["kept"]:
            return result
        trained = train_flow(
            TrainParams(
                curriculum=summary["curriculum_id"],
                model=model,
                home=params.home,
                settings=params.train,
                backend=params.backend,
                base_urls=params.base_urls,
                engine=params.engine,
                resume=True,  # a re-run of the same night continues its own checkpoints
            ),
            Runtime(engine=engine, progress=progress),
        )
    finally:
        if engine is not None:
            engine.close()  # its weights are the trained ones: the next night starts afresh
    result["train"] = trained
    result["report"] = write_report(params.home, night)
    return result


def night_engine(params: NightlyParams, folder: Path, progress: Progress | None = None) -> Any:
    """vllm: one in-process engine for the whole night, on the night's model at the trainer's
    dtype (fp32 master weights). Curation samples from it, then the training run pushes its
    weights into it and evaluates with it, so a night starts one engine instead of two (each
    start is ~2 min on 2 CPU cores). Other backends: None (each flow builds its own)."""
    if params.backend != "vllm":
        return None
    import torch

    from pipeline.sampling.group_sampler import training_engine, training_engine_sampler

    report(progress, "night", "engine", 0, 1)
    engine = training_engine_sampler(folder, training_engine(params.engine, torch.float32))
    report(progress, "night", "engine", 1, 1)
    return engine


def write_report(home: str | None, night: date) -> str | None:
    """The HTML report of the ledger, linked from the flow run as a Prefect artifact."""
    from prefect.artifacts import create_link_artifact

    from pipeline.jobs.report import build_report

    with Ledger.open(home, read_only=True) as ledger:  # readers are not locked out meanwhile
        path = build_report(ledger, resolve_home(home) / "report").path.resolve()
    create_link_artifact(
        key="sieve-report",
        link=path.as_uri(),
        link_text=f"Sieve report after night {night}",
        description="Pass-rate histograms, difficulty heat map, curriculum, training curves.",
    )
    return str(path)


def serve(cron: str, params: NightlyParams, name: str = DEPLOYMENT) -> None:
    """Register the deployment with its cron schedule and run it here (blocks until stopped)."""
    nightly_flow.serve(
        name=name,
        cron=cron,
        parameters={"params": params.model_dump(mode="json")},
        description="Sieve: curate -> train -> eval every night",
        print_starting_message=True,
    )
