"""Train a policy on a curated curriculum with `grpo_core`, recording everything in the ledger.

`train(ledger, curriculum_id, model_dir, settings, home)`:

1. reads the curriculum's items with their problems (question, answer, verifier);
2. derives a deterministic `train_id` from (curriculum, base revision, settings), so a re-run of
   the same training finds its own checkpoints (`--resume`) under `<home>/checkpoints/<train_id>`;
3. evaluates the starting weights on the held-out set (ledger runs with purpose `eval`), then
   trains stage by stage — each stage gets a share of the steps proportional to what one pass over
   it costs in rollouts, and each step draws items (weighted by their curriculum weight, without
   replacement, seeded by (seed, step)) until the step's rollout budget is filled;
4. writes metrics per step to `train_metrics` and to TensorBoard, registers every checkpoint in
   `checkpoints` with its `model_revision` (so the next curation samples from it), evaluates every
   `eval_every` steps and at the end, and marks the run finished.

Training rollouts are not written to `rollouts`: their weights change every step, so they do not
belong to any one `model_revision` and would blur `prompt_stats`.

Test: `pytest tests/test_train.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, RewardFn, Sample, Scores, Trainer, TrainerError
from pipeline.crash import crash_point
from pipeline.errors import SieveError
from pipeline.home import resolve_home
from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set, overall
from pipeline.policy.model import (
    SIEVE_META,
    folder_revision,
    load_policy,
    model_revision,
    read_meta,
)
from pipeline.policy.prompts import prompt_format, render
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.training import make_group_sampler
from pipeline.scoring import verify_batch
from pipeline.store import Ledger, load_query

GRPO_FIELDS = {f.name for f in dataclasses.fields(GRPOConfig)}
# Defaults for the built-in tiny policy (issue 5 trials on 2 CPU cores, see README "Training"):
# at 128 rollouts per step lr 1e-4 was the largest that did not lose held-out accuracy — at 3e-4
# and above the policy drifts (KL rises, reward does not); with 512 rollouts per step the tiny
# recipe below trains at 2e-4. A `[grpo]` table in the config file overrides any of them, and
# the remaining GRPOConfig defaults apply.
TINY_GRPO: dict[str, Any] = {
    "lr": 1e-4,
    "total_steps": 60,
    "max_new_tokens": 16,
    "checkpoint_every": 20,
    "beta_schedule": "fixed",
    "beta": 0.02,
}


# What the tiny policy learns with on a curated curriculum (benchmarks/curriculum.py): lr 2e-4
# after a 20-step warm-up, 512 rollouts (64 prompts × G = 8) per step. 16 prompts per step was too
# noisy to learn from in benchmarks/grpo_headroom.py. `sieve demo` uses it; as a file:
# data/configs/tiny_train.toml.
TINY_RECIPE_GRPO: dict[str, Any] = {"lr": 2e-4, "lr_warmup_steps": 20}
TINY_RECIPE_ROLLOUTS_PER_STEP = 512


class TrainSettings(BaseModel):
    """`sieve train --config FILE`: top-level keys here, GRPO knobs in a `[grpo]` table."""

    model_config = ConfigDict(extra="forbid")

    grpo: dict[str, Any] = Field(default_factory=dict, description="GRPOConfig fields.")
    rollouts_per_step: int = Field(
        default=128, ge=2, description="Completions per step; items are drawn until it is met."
    )
    eval_every: int = Field(default=0, ge=0, description="Held-out eval every N steps; 0: end.")
    eval_per_level: int = Field(default=10, ge=1, description="Held-out problems per level.")
    eval_samples: int = Field(default=4, ge=1, description="Samples per held-out problem.")
    eval_families: list[str] | None = Field(
        default=None, description="Families to evaluate; default every family (the whole mix)."
    )
    tensorboard: bool = Field(default=True, description="Also write TensorBoard event files.")

    @field_validator("grpo")
    @classmethod
    def _known_grpo_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - GRPO_FIELDS)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r}; GRPOConfig has {sorted(GRPO_FIELDS)}")
        grpo_config({**TINY_GRPO, **value})  # type and range checks, one line each
        return value

    def grpo_config(self, **overrides: Any) -> GRPOConfig:
        return grpo_config({**TINY_GRPO, **self.grpo, **overrides})


def grpo_config(values: dict[str, Any]) -> GRPOConfig:
    """GRPOConfig from plain values with type checks; errors are one line naming the field."""
    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    defaults = GRPOConfig()
    for name, value in values.items():
        want = type(getattr(defaults, name))
        ok = isinstance(value, want) or (want is float and isinstance(value, int))
        if not ok or (want is not bool and isinstance(value, bool)):
            raise ValueError(f"grpo.{name} must be {want.__name__}, got {value!r}")
    try:
        return GRPOConfig(**{k: v for k, v in values.items() if k in fields})
    except ValueError as exc:
        raise ValueError(f"grpo: {exc}") from None


def load_settings(path: str | Path) -> TrainSettings:
    from pipeline.tomlconfig import load_toml

    return load_toml(path, TrainSettings)


# ---------------------------------------------------------------------- curriculum → batches


def curriculum_frame(ledger: Ledger, curriculum_id: str) -> pl.DataFrame:
    """The curriculum's items joined with their problems, in stage and position order."""
    frame = ledger.sql(load_query("train_items"), {"curriculum_id": curriculum_id})
    if frame.is_empty():
        raise SieveError(f"curriculum {curriculum_id} has no items to train on")
    return frame


class CurriculumBatches:
    """`step -> items`: stages in order, weighted draws seeded by (seed, step)."""

    def __init__(
        self,
        frame: pl.DataFrame,
        prompts: Sequence[str],
        rollouts_per_step: int,
        total_steps: int,
        seed: int,
    ):
        self.seed, self.budget = seed, rollouts_per_step
        self.stages: list[tuple[int, list[Item], np.ndarray]] = []
        costs = []
        for stage in sorted(frame["stage"].unique().to_list()):
            rows = frame.with_row_index("_i").filter(pl.col("stage") == stage)
            items = [
                Item(prompts[i], a, int(g), key=p, weight=float(w), verifier=v)
                for i, a, g, p, w, v in zip(
                    rows["_i"], rows["answer"], rows["group_size"], rows["problem_id"],
                    rows["weight"], rows["verifier"], strict=True,
                )
            ]  # fmt: skip
            weights = np.clip(rows["weight"].to_numpy().astype(float), 1e-9, None)
            self.stages.append((int(stage), items, weights))
            costs.append(float(rows["group_size"].sum()))
        self.ends = _stage_ends(costs, total_steps)

    def stage_of(self, step: int) -> int:
        for (stage, _, _), end in zip(self.stages, self.ends, strict=True):
            if step < end:
                return stage
        return self.stages[-1][0]

    def __call__(self, step: int) -> list[Item]:
        index = next((i for i, end in enumerate(self.ends) if step < end), len(self.ends) - 1)
        _, items, weights = self.stages[index]
        rng = np.random.default_rng([self.seed, step])
        keys = rng.random(len(items)) ** (1.0 / weights)  # Efraimidis–Spirakis weighted order
        picked, total = [], 0
        for i in np.argsort(-keys, kind="stable"):
            picked.append(items[int(i)])
            total += items[int(i)].group_size
            if total >= self.budget:
                break
        return picked


def _stage_ends(costs: list[float], total_steps: int) -> list[int]:
    """Cumulative last step (exclusive) of each stage; shares ∝ cost, at least one step each."""
    total = sum(costs)
    shares = [max(1, round(total_steps * c / total)) for c in costs]
    ends = np.cumsum(shares).tolist()
    ends[-1] = max(ends[-1], total_steps)
    return [int(e) for e in ends]


# ---------------------------------------------------------------------- sampler and reward


def verifier_reward(
    items: Sequence[Item], samples: Sequence[Sample], *, marker_required: bool = False
) -> Scores:
    """Score with Sieve's verifiers (the problem's own verifier, e.g. math); chat models
    (`marker_required`) are judged only on a marked answer, as in curation."""
    verdicts = verify_batch(
        [s.text for s in samples],
        [it.answer for it in items],
        [it.verifier for it in items],
        marker_required=marker_required,
    )
    return Scores([v.reward for v in verdicts], [v.correct for v in verdicts])


# ---------------------------------------------------------------------- the run


@dataclass
class TrainResult:
    train_id: str
    curriculum_id: str
    base_revision: str
    final_revision: str
    final_checkpoint: Path
    steps: int
    rollouts: int
    seconds: float
    before: pl.DataFrame
    after: pl.DataFrame
    resumed_from: int = 0
    history: list[dict[str, float]] = field(default_factory=list)


Progress = Callable[[int, int, dict[str, float]], None]  # (step done, total, metrics)


def train_id_for(curriculum_id: str, base_revision: str, settings: TrainSettings) -> str:
    text = f"{curriculum_id}|{base_revision}|{settings.model_dump_json()}"
    return "train-" + hashlib.sha256(text.encode()).hexdigest()[:12]


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
) -> TrainResult:
    """Train on a curriculum; see the module docstring. Errors are one-line SieveErrors.

    `reward` replaces the problems' verifiers (tests; custom rewards); held-out evaluation always
    uses the verifiers.
    """
    settings = settings or TrainSettings()
    cfg = settings.grpo_config()
    frame = curriculum_frame(ledger, curriculum_id)
    model, tokenizer = load_policy(model_dir)
    meta = read_meta(model_dir)
    fmt = prompt_format(model_dir, tokenizer)
    base_revision = folder_revision(model_dir)  # the same identity curation records
    train_id = train_id_for(curriculum_id, base_revision, settings)
    root = resolve_home(home) / "checkpoints" / train_id
    if ckpt.list_steps(root) and not resume:
        raise SieveError(
            f"training {train_id} already has checkpoints in {root}; "
            "pass --resume to continue it (or remove that folder)"
        )
    prompts = render(frame["question"].to_list(), fmt, tokenizer)
    batches = CurriculumBatches(
        frame, prompts, settings.rollouts_per_step, cfg.total_steps, cfg.seed
    )
    group_sampler = make_group_sampler("hf", model, tokenizer, str(model_dir))
    hf = group_sampler.sampler
    run = _Run(ledger, train_id, settings, home, fmt, meta, base_revision, curriculum_id)
    trainer = Trainer(
        model,
        tokenizer,
        group_sampler,
        reward or partial(verifier_reward, marker_required=fmt == "chat"),
        batches,
        cfg,
        root,
        on_checkpoint=run.checkpointed,
        write_extra=run.write_meta,
        crash_point=crash_point,
        warn=run.warn,
    )
    hf.model = trainer.model  # under LoRA the wrapped one samples
    run.trainer, run.hf = trainer, hf
    resumed_from = 0
    try:
        if resume and ckpt.list_steps(root):
            resumed_from = trainer.resume()
            run.register_missing(root)  # killed between a checkpoint's rename and its row
        run.start(str(model_dir), dataclasses.asdict(cfg))
        before = run.evaluate_base(resumed_from)
        started = time.perf_counter()

        every = cfg.checkpoint_every

        def on_metrics(step: int, m: dict[str, float]) -> None:
            m["stage"] = float(batches.stage_of(step))
            run.record(step, m)
            if (every and (step + 1) % every == 0) or step + 1 == cfg.total_steps:
                run.flush()  # metrics land before the checkpoint that follows them
            if settings.eval_every and (step + 1) % settings.eval_every == 0:
                run.evaluate_live(step + 1)
            if progress is not None:
                progress(step + 1, cfg.total_steps, m)

        trainer.on_metrics = on_metrics
        history = trainer.train(max_steps)
        after = run.evaluate_live(trainer.step) if trainer.step >= cfg.total_steps else before
        final = ckpt.list_steps(root)[-1][1]
        run.finish("finished" if trainer.step >= cfg.total_steps else "running")
    except (TrainerError, ckpt.CheckpointError) as exc:
        run.finish("failed")
        raise SieveError(str(exc)) from None
    except BaseException:
        run.finish("failed")
        raise
    return TrainResult(
        train_id,
        curriculum_id,
        base_revision,
        read_meta(final).get("model_revision", ""),
        final,
        trainer.step,
        trainer.counters.rollouts,
        time.perf_counter() - started,
        before,
        after,
        resumed_from,
        history,
    )


class _Run:
    """The ledger / TensorBoard side of one training run."""

    def __init__(
        self,
        ledger: Ledger,
        train_id: str,
        settings: TrainSettings,
        home: str | Path | None,
        fmt: str,
        meta: dict[str, Any],
        base_revision: str,
        curriculum_id: str,
    ):
        self.ledger, self.train_id, self.settings = ledger, train_id, settings
        self.fmt, self.meta, self.base_revision = fmt, meta, base_revision
        self.curriculum_id = curriculum_id
        self.rows: list[tuple[str, int, str, float | None]] = []
        self.trainer: Trainer | None = None
        self.hf: HFSampler | None = None
        self.writer: Any = None
        if settings.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(resolve_home(home) / "tensorboard" / train_id))
        self.warnings: list[str] = []
        self.model_name = ""
        self.last: dict[str, float] = {}

    def warn(self, message: str) -> None:
        """Trainer warnings (a refused checkpoint, a skipped step): kept and shown on stderr."""
        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr)

    def start(self, model: str, config: dict[str, Any]) -> None:
        self.model_name = model
        self._status("running", model, config)

    def _status(self, status: str, model: str = "", config: dict[str, Any] | None = None) -> None:
        row = pl.DataFrame(
            {
                "train_id": [self.train_id],
                "curriculum_id": [self.curriculum_id],
                "base_model": [model or self.model_name],
                "base_revision": [self.base_revision],
                "config": [
                    json.dumps({"settings": self.settings.model_dump(), "grpo": config})
                    if config
                    else None
                ],
                "started_at": [datetime.now(UTC)],
                "finished_at": [datetime.now(UTC) if status != "running" else None],
                "status": [status],
            }
        )
        if config is None:  # keep config and start time of the stored row
            self.ledger.run(
                "UPDATE train_runs SET status = $s, finished_at = now() WHERE train_id = $t",
                {"s": status, "t": self.train_id},
            )
        else:
            self.ledger.write("train_runs", row, on_conflict="replace")

    def finish(self, status: str) -> None:
        self.flush()
        self._status(status)
        if self.writer is not None:
            self.writer.close()

    def record(self, step: int, metrics: dict[str, float]) -> None:
        self.last = metrics
        for name, value in metrics.items():
            finite = value if math.isfinite(value) else None
            self.rows.append((self.train_id, step, name, finite))
            if self.writer is not None and finite is not None:
                self.writer.add_scalar(f"train/{name}", finite, step)

    def flush(self) -> None:
        if not self.rows:
            return
        frame = pl.DataFrame(
            self.rows,
            schema={"train_id": pl.Utf8, "step": pl.Int32, "name": pl.Utf8, "value": pl.Float64},
            orient="row",
        )
        crash_point("train.before_metrics_commit")
        self.ledger.write("train_metrics", frame, on_conflict="replace")
        self.rows = []

    def write_meta(self, folder: Path, model: torch.nn.Module) -> None:
        assert self.trainer is not None
        meta = {
            "prompt_format": self.fmt,
            "source": "grpo",
            "base_revision": self.base_revision,
            "curriculum_id": self.curriculum_id,
            "train_id": self.train_id,
            "step": self.trainer.step,
            "model_revision": model_revision(model),
        }
        (folder / SIEVE_META).write_text(json.dumps(meta, indent=1))

    def register_missing(self, root: Path) -> None:
        known = {s for (s,) in self.ledger.run(
            "SELECT step FROM checkpoints WHERE train_id = $t", {"t": self.train_id}
        )}  # fmt: skip
        for step, path in ckpt.list_steps(root):
            if step not in known:
                self.checkpointed(step, path)

    def checkpointed(self, step: int, path: Path) -> None:
        self.flush()
        revision = read_meta(path)["model_revision"]
        last = {k: v for k, v in self.last.items() if math.isfinite(v)}
        row = pl.DataFrame(
            {
                "train_id": [self.train_id],
                "step": [step],
                "path": [str(path.resolve())],
                "model_revision": [revision],
                "metrics": [json.dumps(last)],
                "created_at": [datetime.now(UTC)],
            }
        )
        self.ledger.write("checkpoints", row, on_conflict="replace")

    # -------------------------------------------------------------- held-out evaluation

    def _eval_cfg(self) -> EvalConfig:
        s = self.settings
        assert self.trainer is not None
        return EvalConfig(
            per_level=s.eval_per_level,
            samples=s.eval_samples,
            temperature=self.trainer.cfg.temperature,
            max_new_tokens=self.trainer.cfg.max_new_tokens,
            seed=self.trainer.cfg.seed,
        )

    def _evaluate(self, revision: str, step: int) -> pl.DataFrame:
        assert self.hf is not None
        cfg = self._eval_cfg()
        problems = heldout_set(cfg.per_level, self.settings.eval_families)
        questions = problems["question"].to_list()
        tokenizer = self.hf.tokenizer
        prompts_of = dict(zip(questions, render(questions, self.fmt, tokenizer), strict=True))  # type: ignore[arg-type]
        table = evaluate(self.hf, self.ledger, revision, prompts_of, cfg, problems, self.fmt)
        for name in ("greedy", "sampled"):
            mean = overall(table, name) or 0.0
            self.rows.append((self.train_id, step, f"eval_{name}", mean))
            if self.writer is not None:
                self.writer.add_scalar(f"eval/{name}", mean, step)
        self.flush()
        return table

    def evaluate_base(self, resumed_from: int) -> pl.DataFrame:
        """Held-out table of the starting weights (read back from the ledger when resuming)."""
        if not resumed_from:
            return self._evaluate(self.base_revision, 0)
        return heldout_table(self.ledger, self.base_revision)

    def evaluate_live(self, step: int) -> pl.DataFrame:
        return self._evaluate(self._live(), step)

    def _live(self) -> str:
        assert self.trainer is not None
        model = self.trainer.model
        if self.trainer.cfg.reference == "lora_base":
            import copy

            model = copy.deepcopy(model).merge_and_unload()  # type: ignore[operator]
        return model_revision(model)


def heldout_table(ledger: Ledger, revision: str) -> pl.DataFrame:
    """Held-out pass@1 by family × level of one revision, from its stored eval runs."""
    return ledger.sql(load_query("eval_by_level"), {"revision": revision})


def latest_model(ledger: Ledger, home: str | Path | None = None) -> Path:
    """The newest registered checkpoint that still exists, else the bootstrapped tiny policy."""
    for (path,) in ledger.run(load_query("latest_checkpoints")):
        if (Path(path) / "config.json").is_file():
            return Path(path)
    return resolve_home(home) / "models" / "tiny"
