"""The training job, written once: `train_flow` (a Prefect flow) and `train` (the same sequence
called without a Prefect run), over a run's steps (`pipeline.jobs.train.trainee`) and its recorder
(`pipeline.jobs.train.recorder`).

plan (ids, curriculum, settings; fails fast on a run that exists without `--resume`) -> load the
trainee (fp32, LoRA-wrapped when the recipe trains adapters) -> sampler, held-out evaluator,
recorder, trainer, in that order, around that one model -> resume from the newest checkpoint ->
held-out eval of the starting weights -> train (metrics, checkpoints registered, per-step
progress through the recorder's hooks) -> held-out eval of the trained weights -> status.

The flow trains the model the curriculum was curated with unless `model` says otherwise, with the
recipe for that model unless `settings` are given, all resolved once into a
`pipeline.jobs.train.lineage.TrainJob` (`resolve_train_job`); a caller that resolved the job already
(`sieve train`, before Prefect starts) hands it over as `job`, and the flow resolves nothing again.
Steps keep no Prefect result cache: the trainer's own checkpoints are the resume mechanism, and
`resume=True` continues from the newest valid one. The flow's ledger is transient: DuckDB's file
lock is held only while metrics, evaluation rollouts or a checkpoint row are committed, so readers
can query the ledger while training runs. A `Runtime` (`flows.runtime`) may hand it an open
ledger, a reward function (tests; custom rewards; held-out evaluation always uses the verifiers)
and the progress hook.

Run: `sieve train` (Prefect's ephemeral local API; nothing to start).
Test: `pytest tests/flows/test_train_flow.py tests/test_train.py tests/test_train_crash.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, Field, model_validator

from flows.runtime import EngineParam, Runtime, step
from grpo_core import checkpoint as ckpt
from grpo_core.seeds import seed_torch
from grpo_core.trainer import RewardFn, Trainer, TrainerError
from grpo_core.validate import STRICT, AtLeastOne
from pipeline.core.crash import crash_point
from pipeline.core.errors import SieveError
from pipeline.core.home import resolve_home
from pipeline.core.hooks import Progress
from pipeline.jobs.analysis.evaluate import overall
from pipeline.jobs.train.curriculum_batches import CurriculumBatches, verifier_reward
from pipeline.jobs.train.lineage import TrainJob, check_sampling, resolve_train_job
from pipeline.jobs.train.recorder import Recorder, recorder_for
from pipeline.jobs.train.settings import TrainSettings, train_recipe
from pipeline.jobs.train.trainee import (
    TrainPlan,
    TrainResult,
    carry_lineage,
    collector_for,
    eval_sampler,
    load_trainee,
    result_of,
)
from pipeline.jobs.train.trainee import plan as plan_of
from pipeline.policy.prompts import render
from pipeline.sampling import EngineOptions
from pipeline.sampling.group_sampler import make_group_sampler
from pipeline.store import Ledger


class TrainParams(BaseModel):
    """Flow parameters (validated; unknown keys rejected)."""

    model_config = STRICT

    curriculum: str = Field(default="latest", description="Curriculum id or 'latest'.")
    model: str | None = Field(
        default=None,
        description="Starting model folder; default the model the curriculum was curated with.",
    )
    home: str | None = None
    settings: TrainSettings | None = Field(
        default=None, description="None: the recipe for the model (the shipped *_train.toml)."
    )
    backend: str = Field(default="hf", description="Rollouts: hf, vllm or openai.")
    base_urls: list[str] = Field(default_factory=list, description="openai backend servers.")
    engine: EngineParam = Field(
        default=None,
        description="vllm/openai engine options (memory, dtype, parallelism).",
    )
    max_steps: AtLeastOne | None = None
    resume: bool = False
    strict_sampling: bool = Field(
        default=False,
        description="Refuse to train at other sampling settings than the curriculum was "
        "curated at (else one warning line; `pipeline.jobs.train.lineage.check_sampling`).",
    )
    job: TrainJob | None = Field(
        default=None,
        description="The run resolved already (`sieve train` resolves it before Prefect "
        "starts): its curriculum id, model, home and settings are used as they are, and "
        "curriculum, model, home and settings above are left unset.",
    )

    @model_validator(mode="after")
    def _job_or_request(self) -> TrainParams:
        asked = self.curriculum != "latest" or self.model or self.home or self.settings
        if self.job is not None and asked:
            raise ValueError(
                "give a resolved job, or curriculum/model/home/settings to resolve, not both"
            )
        return self


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


# ---------------------------------------------------------------------- steps


# The steps that are one call of a pipeline function or method, as tasks of their own name.
plan_run = task(name="plan_run", cache_policy=NO_CACHE)(plan_of)
evaluate_base = task(name="evaluate_base", cache_policy=NO_CACHE)(Recorder.evaluate_base)
train_steps = task(name="train_steps", cache_policy=NO_CACHE)(Trainer.train)
evaluate_live = task(name="evaluate_live", cache_policy=NO_CACHE)(Recorder.evaluate_live)


@task(cache_policy=NO_CACHE)
def resume_run(trainer: Trainer, recorder: Recorder, resume: bool) -> int:
    """The step the run continues at (0 for a fresh run); the run's row set to running."""
    if resume and ckpt.list_steps(recorder.run.root):
        recorder.step = trainer.resume()
        recorder.register_missing()
    recorder.start()
    return recorder.step


def build(
    ledger: Ledger,
    run: TrainPlan,
    home: str | Path | None,
    rollouts: tuple[str, EngineOptions | None, Sequence[str]],
    reward: RewardFn | None,
    progress: Progress | None,
    engine_sampler: Any = None,
) -> tuple[Trainer, Recorder]:
    """Trainee, sampler, evaluator, recorder, trainer: each built once, around one model
    (`engine_sampler`: a started in-process vLLM engine on the same weights, reused)."""
    backend, engine, base_urls = rollouts
    trainee = load_trainee(run.model_dir, run.cfg)
    model, tokenizer, fmt = trainee
    prompts = render(run.frame["question"].to_list(), fmt, tokenizer)
    batches = CurriculumBatches(
        run.frame, prompts, run.settings.rollouts_per_step, run.cfg.total_steps, run.cfg.seed
    )
    sampler = make_group_sampler(
        backend, model, tokenizer, str(run.model_dir), engine=engine, base_urls=base_urls,
        sampler=engine_sampler,
    )  # fmt: skip
    evaluator = eval_sampler(sampler, backend, model, tokenizer, str(run.model_dir))
    recorder = recorder_for(ledger, run, trainee, evaluator, batches.stage_of, progress, home)
    reward = recorder.judging(reward or partial(verifier_reward, marker_required=fmt == "chat"))
    seed_torch(run.cfg.seed, run.cfg.deterministic)  # the flow owns the process's torch state
    collect = collector_for(
        ledger, run, tokenizer, recorder.skipped, batches
    )  # replay/skip/posterior
    trainer = Trainer(
        model, tokenizer, sampler, reward, batches, run.cfg, run.root,
        hooks=recorder, crash_point=crash_point, collector=collect,
    )  # fmt: skip
    if run.settings.carry_over:  # before a resume, which then restores the run's own state
        print(carry_lineage(ledger, run, trainer, resolve_home(home)))
    return trainer, recorder


# ---------------------------------------------------------------------- the sequence


def train(
    ledger: Ledger,
    curriculum_id: str,
    model_dir: Path,
    settings: TrainSettings | None = None,
    home: str | Path | None = None,
    *,
    resume: bool = False,
    max_steps: int | None = None,
    progress: Progress | None = None,
    reward: RewardFn | None = None,
    backend: str = "hf",
    engine: EngineOptions | None = None,
    base_urls: Sequence[str] = (),
    engine_sampler: Any = None,
) -> TrainResult:
    """Train on a curriculum; see the module docstring. Errors are one-line SieveErrors.

    `settings` None: the recipe for the model. `backend`, `engine`, `base_urls` choose how
    rollouts are sampled (`pipeline.sampling.group_sampler.make_group_sampler`; `engine_sampler`: a
    started vllm engine on `model_dir`'s weights to use instead of a new one). Inside
    `train_flow` each step is a Prefect task; called directly, the same steps run as plain
    functions."""
    settings = settings or train_recipe(model_dir)[1]
    run = step(plan_run, ledger, curriculum_id, model_dir, settings, home, backend, resume)
    rollouts = (backend, engine, base_urls)
    trainer, recorder = build(ledger, run, home, rollouts, reward, progress, engine_sampler)
    try:
        resumed_from = step(resume_run, trainer, recorder, resume)
        before = step(evaluate_base, recorder, resumed_from)
        started = time.perf_counter()
        history = step(train_steps, trainer, max_steps)
        done = trainer.step >= run.cfg.total_steps
        after = step(evaluate_live, recorder, trainer.step) if done else before
        seconds = time.perf_counter() - started
        recorder.finish("finished" if done else "running")
    except (TrainerError, ckpt.CheckpointError) as exc:
        recorder.finish("failed")
        raise SieveError(str(exc)) from None
    except BaseException:
        recorder.finish("failed")
        raise
    return result_of(run, trainer, seconds, (before, after), resumed_from, history)


def resolve(ledger: Ledger, params: TrainParams) -> TrainJob:
    """The job the parameters name (`resolve_train_job`), each default it took named in one
    printed line, and its sampling checked against the curation's (`check_sampling`: a warning
    line, or an error under `strict_sampling`); `params.job` as it is when the caller resolved
    (and checked) it already."""
    if params.job is not None:
        return params.job
    model = Path(params.model) if params.model else None
    job = resolve_train_job(ledger, params.curriculum, model, params.home, params.settings)
    if model is None:
        print(f"model {job.model} ({job.model_why})")
    if job.recipe is not None:
        print(job.recipe)
    line = check_sampling(job, params.strict_sampling)
    if line is not None:
        print(line)
    return job


@flow(name="sieve-train", log_prints=True)
def train_flow(params: TrainParams, runtime: Runtime | None = None) -> dict[str, Any]:
    """Train on a curriculum; returns a summary with the before/after held-out tables."""
    rt = runtime or Runtime()
    home = params.job.home if params.job is not None else params.home
    ledger = rt.ledger or Ledger.open(home, transient=True)
    try:
        job = resolve(ledger, params)
        result = train(
            ledger, job.curriculum_id, job.model, job.settings, job.home,
            resume=params.resume, max_steps=params.max_steps, progress=rt.progress,
            reward=rt.reward, backend=params.backend, engine=params.engine,
            base_urls=params.base_urls, engine_sampler=rt.engine,
        )  # fmt: skip
    finally:
        if rt.ledger is None:
            ledger.close()
    out = {**summary(result), "before": result.before.to_dicts(), "after": result.after.to_dicts()}
    print(
        f"trained {out['train_id']} for {out['steps']} steps ({out['rollouts']} rollouts): "
        f"held-out sampled {out['heldout_before']['sampled']} -> {out['heldout_after']['sampled']}"
    )
    return out


__all__ = ["TrainParams", "summary", "train", "train_flow"]
