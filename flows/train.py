"""The Prefect training flow: a thin task over `pipeline.train.train`.

One task trains (stages in order, evaluation, checkpoints registered in the ledger) the model the
curriculum was curated with unless `model` says otherwise, with the recipe for that model unless
`settings` are given (`pipeline.train.curriculum_model`, `recipe_for`). The task is not cached:
the trainer's own checkpoints are the resume mechanism, and `resume=True` continues from the
newest valid one. The task's result is a small summary (ids, revisions, before/after). Its
ledger is transient: DuckDB's file lock is held only while metrics, evaluation rollouts or a
checkpoint row are committed, so readers can query the ledger while training runs.

Run: `sieve train` (Prefect's ephemeral local API; nothing to start).
Test: `pytest tests/flows/test_train_flow.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, ConfigDict, Field

from pipeline.policy.evaluate import overall
from pipeline.sampling import EngineOptions
from pipeline.store import Ledger
from pipeline.train import (
    Progress,
    TrainResult,
    TrainSettings,
    curriculum_model,
    recipe_for,
    train,
)


class TrainParams(BaseModel):
    """Flow parameters (validated; unknown keys rejected)."""

    model_config = ConfigDict(extra="forbid")

    curriculum: str = Field(default="latest", description="Curriculum id or 'latest'.")
    model: str | None = Field(
        default=None,
        description="Starting model folder; default the model the curriculum was curated with.",
    )
    home: str | None = None
    settings: TrainSettings | None = Field(
        default=None, description="None: the recipe for the model (data/configs/*_train.toml)."
    )
    backend: str = Field(default="hf", description="Rollouts: hf, vllm or openai.")
    base_urls: list[str] = Field(default_factory=list, description="openai backend servers.")
    engine: EngineOptions | None = Field(
        default=None, description="vllm/openai engine options (memory, dtype, parallelism)."
    )
    max_steps: int | None = Field(default=None, ge=1)
    resume: bool = False


def summary(result: TrainResult) -> dict[str, Any]:
    return {
        "train_id": result.train_id,
        "curriculum_id": result.curriculum_id,
        "base_revision": result.base_revision,
        "final_revision": result.final_revision,
        "checkpoint": str(result.final_checkpoint),
        "steps": result.steps,
        "rollouts": result.rollouts,
        "seconds": round(result.seconds, 1),
        "heldout_before": {k: overall(result.before, k) for k in ("greedy", "sampled")},
        "heldout_after": {k: overall(result.after, k) for k in ("greedy", "sampled")},
    }


_PROGRESS: list[Progress] = []  # set by the CLI in this process; not a flow parameter


def set_progress(callback: Progress | None) -> None:
    """Show per-step progress (reward, pass rate, KL, zero-variance share) from the task."""
    _PROGRESS.clear()
    if callback is not None:
        _PROGRESS.append(callback)


@task(cache_policy=NO_CACHE)
def train_task(params: TrainParams) -> dict[str, Any]:
    from pipeline.export import resolve_curriculum

    with Ledger.open(params.home, transient=True) as ledger:
        curriculum_id = resolve_curriculum(ledger, params.curriculum)
        if params.model:
            model = Path(params.model)
        else:
            model, note = curriculum_model(ledger, curriculum_id, params.home)
            print(f"model {model} ({note})")
        settings = params.settings
        if settings is None:
            recipe = recipe_for(model)
            print(recipe.line())
            settings = recipe.settings
        result = train(
            ledger,
            curriculum_id,
            model,
            settings,
            params.home,
            resume=params.resume,
            max_steps=params.max_steps,
            progress=_PROGRESS[0] if _PROGRESS else None,
            backend=params.backend,
            engine=params.engine,
            base_urls=params.base_urls,
        )
    return {**summary(result), "before": result.before.to_dicts(), "after": result.after.to_dicts()}


@flow(name="sieve-train", log_prints=True)
def train_flow(params: TrainParams) -> dict[str, Any]:
    """Train on a curriculum; returns a summary with the before/after held-out tables."""
    out = train_task(params)
    print(
        f"trained {out['train_id']} for {out['steps']} steps ({out['rollouts']} rollouts): "
        f"held-out sampled {out['heldout_before']['sampled']} -> {out['heldout_after']['sampled']}"
    )
    return out


__all__ = ["TrainParams", "set_progress", "summary", "train_flow"]
