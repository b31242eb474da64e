"""The recorder of a training run: what the trainer's hooks write while it trains.

- `Recorder` implements the trainer's hooks (`grpo_core.types.TrainerHooks`): metrics per step to
  `train_metrics` and TensorBoard (committed before each checkpoint is published), every
  checkpoint registered in `checkpoints` with its `model_revision` (so the next curation samples
  from it), held-out evaluation every `eval_every` steps and at the start and end, the run's
  status, and one progress event per step (`pipeline.core.hooks`);
- `Recorder.judging(reward)` wraps the reward function so that every completion a step sampled
  (its reward, verdict, finish reason, the engine's log-prob sum) is written to
  `train_rollouts`, one Arrow batch in the same transaction as that step's metrics (replace on
  (train_id, step, problem_id, sample_idx): a resumed run rewriting a step does not duplicate
  it). The policy column is the model revision of the sampling weights where the base or a
  checkpoint holds them, else `<train_id>@<step>`. Under torchrun rank 0 records what its reward
  function judged: the whole step with broadcast rollouts, its own slice under `shard`;
- `Recorder.skipped` writes each prompt the zero-variance skip left out to `train_skips`.

Training rollouts are not written to `rollouts` but to `train_rollouts` (migration 0010, views
`train_group_stats` and `train_prompt_trajectory`): their weights change every step, so they do not
belong to any one `model_revision` and would blur `prompt_stats`.

Test: `pytest tests/test_train.py tests/test_train_crash.py tests/test_train_rollouts.py`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import torch

from grpo_core import checkpoint as ckpt
from grpo_core.lora import merged
from grpo_core.trainer import Item, RewardFn, Sample, Scores
from pipeline.core.crash import crash_point
from pipeline.core.home import resolve_home, to_home
from pipeline.core.hooks import Progress, report
from pipeline.jobs.analysis.evaluate import (
    EvalConfig,
    evaluate,
    heldout_set,
    overall,
    revision_table,
)
from pipeline.jobs.train.settings import TrainSettings
from pipeline.jobs.train.trainee import TrainPlan
from pipeline.policy.model import (
    SIEVE_META,
    model_revision,
    read_meta,
)
from pipeline.policy.prompts import PromptFormat, render
from pipeline.sampling import Sampler
from pipeline.sampling.budget import SamplingConfig
from pipeline.store import Ledger

ROLLOUT_SCHEMA = {
    "problem_id": pl.Utf8,
    "completion": pl.Utf8,
    "n_tokens": pl.Int32,
    "finish_reason": pl.Utf8,
    "reward": pl.Float64,
    "correct": pl.Boolean,
    "behaviour_logprob": pl.Float64,
}


SKIP_SCHEMA = {
    "train_id": pl.Utf8,
    "step": pl.Int32,
    "problem_id": pl.Utf8,
    "streak": pl.Float64,
    "p_skip": pl.Float64,
}


def _writer(settings: TrainSettings, home: str | Path | None, train_id: str) -> Any:
    if not settings.tensorboard:
        return None
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(resolve_home(home) / "tensorboard" / train_id))


@dataclass
class Recorder:
    """The trainer's hooks for one run (ledger, TensorBoard, progress) and its held-out
    evaluation. Built before the trainer, around the model the trainer will update."""

    ledger: Ledger
    run: TrainPlan
    fmt: PromptFormat
    tokenizer: Any
    model: torch.nn.Module  # the live model (under LoRA the peft-wrapped one)
    sampler: Sampler  # held-out evaluation
    stage_of: Callable[[int], int]
    progress: Progress | None = None
    writer: Any = None  # a TensorBoard SummaryWriter, or None
    step: int = 0  # the next step to run (what a checkpoint written now is at)
    rows: list[tuple[str, int, str, float | None]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    last: dict[str, float] = field(default_factory=dict)
    judged: list[tuple[Sequence[Item], Sequence[Sample], Scores]] = field(default_factory=list)
    rollouts: list[pl.DataFrame] = field(default_factory=list)  # steps not yet committed
    skips: list[tuple[str, int, str, float, float]] = field(default_factory=list)  # likewise

    # -------------------------------------------------------------- TrainerHooks

    def warn(self, message: str) -> None:
        """Trainer warnings (a refused checkpoint, a skipped step): kept and shown on stderr."""
        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr)

    def on_metrics(self, step: int, m: dict[str, float]) -> None:
        m["stage"] = float(self.stage_of(step))
        self.record(step, m)
        self.take_rollouts(step)
        every = self.run.settings.eval_every
        if every and (step + 1) % every == 0:
            self.evaluate_live(step + 1)
        report(self.progress, "train", "train", step + 1, self.run.cfg.total_steps, m)

    def write_extra(self, folder: Path, model: torch.nn.Module) -> None:
        """The checkpoint's `sieve.json`; the metrics so far are committed first, so a published
        checkpoint never lacks the metrics of the steps it holds."""
        self.flush()
        run = self.run
        meta = {
            "prompt_format": self.fmt,
            "source": "grpo",
            "base_revision": run.base_revision,
            "curriculum_id": run.curriculum_id,
            "train_id": run.train_id,
            "step": self.step,
            "model_revision": model_revision(model),
        }
        (folder / SIEVE_META).write_text(json.dumps(meta, indent=1))

    def on_checkpoint(self, step: int, path: Path) -> None:
        self.flush()
        revision = read_meta(path)["model_revision"]
        last = {k: v for k, v in self.last.items() if math.isfinite(v)}
        row = pl.DataFrame(
            {
                "train_id": [self.run.train_id],
                "step": [step],
                "path": [to_home(path, self.ledger.home)],  # relative: the home may move
                "model_revision": [revision],
                "metrics": [json.dumps(last)],
                "created_at": [datetime.now(UTC)],
            }
        )
        self.ledger.write("checkpoints", row, on_conflict="replace")

    # -------------------------------------------------------------- the run's rows

    def start(self) -> None:
        """The `train_runs` row, status running (a resumed run keeps its id)."""
        run = self.run
        config = {"settings": run.settings.model_dump(), "grpo": dataclasses.asdict(run.cfg)}
        row = pl.DataFrame(
            {
                "train_id": [run.train_id],
                "curriculum_id": [run.curriculum_id],
                "base_model": [to_home(run.model_dir, self.ledger.home)],
                "base_revision": [run.base_revision],
                "config": [json.dumps(config)],
                "started_at": [datetime.now(UTC)],
                "finished_at": [None],
                "status": ["running"],
            }
        )
        self.ledger.write("train_runs", row, on_conflict="replace")

    def finish(self, status: str) -> None:
        """Commit what is left and set the run's status (its config and start time stay)."""
        self.flush()
        self.ledger.run(
            "UPDATE train_runs SET status = $s, finished_at = now() WHERE train_id = $t",
            {"s": status, "t": self.run.train_id},
        )
        if self.writer is not None:
            self.writer.close()

    def record(self, step: int, metrics: dict[str, float]) -> None:
        self.last, self.step = metrics, step + 1
        for name, value in metrics.items():
            finite = value if math.isfinite(value) else None
            self.rows.append((self.run.train_id, step, name, finite))
            if self.writer is not None and finite is not None:
                self.writer.add_scalar(f"train/{name}", finite, step)

    def flush(self) -> None:
        """Commit the buffered metrics and training rollouts in one transaction."""
        batches: dict[str, pl.DataFrame] = {}
        if self.rows:
            schema = {"train_id": pl.Utf8, "step": pl.Int32, "name": pl.Utf8, "value": pl.Float64}
            batches["train_metrics"] = pl.DataFrame(self.rows, schema=schema, orient="row")
        if self.rollouts:
            batches["train_rollouts"] = self.with_policy(pl.concat(self.rollouts))
        if self.skips:
            batches["train_skips"] = pl.DataFrame(self.skips, schema=SKIP_SCHEMA, orient="row")
        if not batches:
            return
        crash_point("train.before_metrics_commit")
        self.ledger.write_batch(batches, on_conflict="replace")
        self.rows, self.rollouts, self.skips = [], [], []

    # -------------------------------------------------------------- training rollouts

    def judging(self, reward: RewardFn) -> RewardFn:
        """`reward`, keeping what it judges for the step's `train_rollouts` rows (on rank 0
        alone: other ranks report nothing)."""
        if os.environ.get("RANK", "0") != "0":
            return reward

        def judge(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
            scores = reward(items, samples)
            self.judged.append((items, samples, scores))
            return scores

        return judge

    def skipped(self, step: int, key: str, streak: float, p_skip: float) -> None:
        """A prompt the zero-variance skip left out of step `step`: a `train_skips` row,
        committed with the step's metrics (rank 0 alone, as the rollouts)."""
        if os.environ.get("RANK", "0") == "0":
            self.skips.append((self.run.train_id, step, key, streak, p_skip))

    def take_rollouts(self, step: int) -> None:
        """What the reward function judged since the last step, as step `step`'s rows."""
        if not self.judged:
            return
        items = [it for batch in self.judged for it in batch[0]]
        samples = [s for batch in self.judged for s in batch[1]]
        columns = {
            "problem_id": [it.key for it in items],
            "completion": [s.text for s in samples],
            "n_tokens": [len(s.token_ids) for s in samples],
            "finish_reason": ["length" if s.truncated else "stop" for s in samples],
            "reward": [r for batch in self.judged for r in batch[2].rewards],
            "correct": [c for batch in self.judged for c in batch[2].correct],
            "behaviour_logprob": [_logprob_sum(s) for s in samples],
        }
        self.judged = []
        frame = pl.DataFrame(columns, schema=ROLLOUT_SCHEMA)
        self.rollouts.append(
            frame.with_columns(
                pl.lit(self.run.train_id).alias("train_id"),
                pl.lit(step, pl.Int32).alias("step"),
                pl.int_range(pl.len(), dtype=pl.Int32).over("problem_id").alias("sample_idx"),
            )
        )

    def with_policy(self, frame: pl.DataFrame) -> pl.DataFrame:
        """`policy`: the revision of the weights that sampled step s (the base at step 0, the
        checkpoint of step s where there is one), else `<train_id>@<step>`."""
        known = self.ledger.sql(
            "SELECT step, model_revision FROM checkpoints WHERE train_id = $t",
            {"t": self.run.train_id},
        )
        base = pl.DataFrame({"step": [0], "model_revision": [self.run.base_revision]})
        revisions = pl.concat([base, known.cast({"step": pl.Int32})], how="vertical_relaxed")
        revisions = revisions.unique("step", keep="last").cast({"step": pl.Int32})
        own = pl.concat_str(pl.col("train_id"), pl.lit("@"), pl.col("step").cast(pl.Utf8))
        return (
            frame.join(revisions, on="step", how="left")
            .with_columns(pl.coalesce("model_revision", own).alias("policy"))
            .drop("model_revision")
        )

    def register_missing(self) -> None:
        """Register checkpoints on disk the ledger lacks (killed between a checkpoint's rename
        and its row)."""
        known = {s for (s,) in self.ledger.run(
            "SELECT step FROM checkpoints WHERE train_id = $t", {"t": self.run.train_id}
        )}  # fmt: skip
        for step, path in ckpt.list_steps(self.run.root):
            if step not in known:
                self.on_checkpoint(step, path)

    # -------------------------------------------------------------- held-out evaluation

    def _eval_cfg(self) -> EvalConfig:
        """The recipe's own sampling budget (temperature, max_new_tokens) for held-out eval."""
        s, cfg = self.run.settings, self.run.cfg
        return EvalConfig(
            per_level=s.eval_per_level,
            samples=s.eval_samples,
            sampling=SamplingConfig(temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens),
            seed=cfg.seed,
        )

    def _evaluate(self, revision: str, step: int) -> pl.DataFrame:
        cfg = self._eval_cfg()
        problems = heldout_set(cfg.per_level, self.run.settings.eval_families)
        questions = problems["question"].to_list()
        prompts_of = dict(zip(questions, render(questions, self.fmt, self.tokenizer), strict=True))
        table = evaluate(self.sampler, self.ledger, revision, prompts_of, cfg, problems, self.fmt)
        for name in ("greedy", "sampled"):
            mean = overall(table, name)
            if mean is None:  # no run of this mode (temperature 0 records no sampled run)
                continue
            self.rows.append((self.run.train_id, step, f"eval_{name}", mean))
            if self.writer is not None:
                self.writer.add_scalar(f"eval/{name}", mean, step)
        self.flush()
        return table

    def evaluate_base(self, resumed_from: int) -> pl.DataFrame:
        """Held-out table of the starting weights (read back from the ledger when resuming)."""
        if not resumed_from:
            return self._evaluate(self.run.base_revision, 0)
        return revision_table(self.ledger, self.run.base_revision)

    def evaluate_live(self, step: int) -> pl.DataFrame:
        return self._evaluate(model_revision(merged(self.model)), step)


def recorder_for(
    ledger: Ledger,
    run: TrainPlan,
    trainee: tuple[torch.nn.Module, Any, PromptFormat],
    evaluator: Sampler,
    stage_of: Callable[[int], int],
    progress: Progress | None,
    home: str | Path | None,
) -> Recorder:
    model, tokenizer, fmt = trainee
    writer = _writer(run.settings, home, run.train_id)
    return Recorder(ledger, run, fmt, tokenizer, model, evaluator, stage_of, progress, writer)


def _logprob_sum(s: Sample) -> float | None:
    """The engine's log-prob of the completion: its per-token values summed, else the sum it
    reported alone (hf), else None."""
    if s.logprobs is not None:
        return float(sum(s.logprobs))
    return s.logprob_sum


def heldout_table(ledger: Ledger, revision: str) -> pl.DataFrame:
    """Held-out pass@1 by family × level of one revision: its newest greedy and sampled eval
    runs, read from the `heldout_pass1` view."""
    return revision_table(ledger, revision)
