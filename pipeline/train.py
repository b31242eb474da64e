"""The recorder of a training run and the steps `flows/train.py` runs it with.

The sequence of a training run is written once, in `flows/train.py`; here are its parts:

- `plan` reads the curriculum's items with their problems (question, answer, verifier) and
  derives a deterministic `train_id` from (curriculum, base revision, settings, and the sampling
  backend when it is not hf), so a re-run of the same training finds its own checkpoints
  (`--resume`) under `<home>/checkpoints/<train_id>`;
- `load_trainee` loads the policy in fp32 master weights on the training device, LoRA-wrapped
  when the recipe trains adapters, before anything that holds the model is built;
- `Recorder` implements the trainer's hooks (`grpo_core.types.TrainerHooks`): metrics per step to
  `train_metrics` and TensorBoard (committed before each checkpoint is published), every
  checkpoint registered in `checkpoints` with its `model_revision` (so the next curation samples
  from it), held-out evaluation every `eval_every` steps and at the start and end, the run's
  status, and one progress event per step (`pipeline.hooks`);
- `Recorder.judging(reward)` wraps the reward function so that every completion a step sampled
  (its reward, verdict, finish reason, the engine's log-prob sum) is written to
  `train_rollouts`, one Arrow batch in the same transaction as that step's metrics (replace on
  (train_id, step, problem_id, sample_idx): a resumed run rewriting a step does not duplicate
  it). The policy column is the model revision of the sampling weights where the base or a
  checkpoint holds them, else `<train_id>@<step>`. Under torchrun rank 0 records what its reward
  function judged: the whole step with broadcast rollouts, its own slice under `shard`.

Which settings: `pipeline.recipes`. Which model: `pipeline.lineage`. Batches and reward:
`pipeline.batches`.

Training rollouts are not written to `rollouts` but to `train_rollouts` (migration 0010, views
`train_group_stats` and `train_prompt_trajectory`): their weights change every step, so they do not
belong to any one `model_revision` and would blur `prompt_stats`.

Test: `pytest tests/test_train.py tests/test_train_crash.py tests/test_train_rollouts.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from grpo_core.config import GRPOConfig
from grpo_core.history import ZeroVarSkip, replay_curation
from grpo_core.lora import merged, with_lora
from grpo_core.trainer import Item, RewardFn, Sample, Scores, Trainer
from grpo_core.types import Collector
from pipeline.batches import CurriculumBatches, curriculum_frame
from pipeline.crash import crash_point
from pipeline.errors import SieveError
from pipeline.home import from_home, resolve_home, to_home
from pipeline.hooks import Progress, report
from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set, overall, revision_table
from pipeline.policy.model import (
    SIEVE_META,
    folder_revision,
    load_policy,
    model_revision,
    read_meta,
)
from pipeline.policy.prompts import PromptFormat, prompt_format, render
from pipeline.recipes import TrainSettings
from pipeline.replay import stored_groups, zero_var_streaks
from pipeline.sampling import Sampler
from pipeline.sampling.budget import SamplingConfig
from pipeline.sampling.hf import HFSampler
from pipeline.selection.posterior import (
    Observations,
    PosteriorConfig,
    lineage_observations,
    posterior_screen,
    posterior_select,
)
from pipeline.store import Ledger
from pipeline.store.ids import curation_runs

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


@dataclass(frozen=True)
class TrainPlan:
    """What a run is, decided before any weights are loaded."""

    train_id: str
    curriculum_id: str
    model_dir: Path
    base_revision: str
    settings: TrainSettings
    cfg: GRPOConfig
    frame: pl.DataFrame  # the curriculum's items with their problems
    root: Path  # <home>/checkpoints/<train_id>


def train_id_for(
    curriculum_id: str, base_revision: str, settings: TrainSettings, backend: str = "hf"
) -> str:
    """The run's id. The backend is part of it when it is not hf (another engine samples other
    rollouts); hf runs keep the ids they had before backends were selectable."""
    # settings added later count only when set, so runs started before them keep their ids
    unset = {k for k in ("replay_curation", "skip_zero_variance") if not getattr(settings, k)}
    text = f"{curriculum_id}|{base_revision}|{settings.model_dump_json(exclude=unset)}"
    text += f"|{backend}" if backend != "hf" else ""
    return "train-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def plan(
    ledger: Ledger,
    curriculum_id: str,
    model_dir: Path,
    settings: TrainSettings,
    home: str | Path | None,
    backend: str,
    resume: bool,
) -> TrainPlan:
    """The run's identity and inputs; an error when it has checkpoints and `resume` is off."""
    frame = curriculum_frame(ledger, curriculum_id)
    base_revision = folder_revision(model_dir)  # the same identity curation records
    train_id = train_id_for(curriculum_id, base_revision, settings, backend)
    root = resolve_home(home) / "checkpoints" / train_id
    if ckpt.list_steps(root) and not resume:
        raise SieveError(
            f"training {train_id} already has checkpoints in {root}; "
            "pass --resume to continue it (or remove that folder)"
        )
    cfg = for_device(settings.grpo_config(), torch.device(train_device()))
    return TrainPlan(train_id, curriculum_id, model_dir, base_revision, settings, cfg, frame, root)


def collector_for(
    ledger: Ledger,
    run: TrainPlan,
    tokenizer: Any,
    recorder: Recorder | None = None,
    batches: CurriculumBatches | None = None,
) -> Collector | None:
    """The batch source with `replay_curation` (the curriculum's stored screen/refine samples
    on each prompt's first visit) and/or `skip_zero_variance` (streaks read from the ledger's
    curation and training history, so a resumed run starts where it stopped; each skip told to
    `recorder`, which writes it with its step); with `selection = "posterior"`, Sieve's
    difficulty model picks each batch from `batches`' candidates (`posterior_collector`);
    None: plain."""
    settings = run.settings
    if settings.selection != "curriculum":
        if batches is None:
            raise SieveError(f"selection = {settings.selection!r} needs the curriculum's batches")
        return posterior_collector(ledger, run, batches, tokenizer)
    if not (settings.replay_curation or settings.skip_zero_variance):
        return None
    skip = None
    if settings.skip_zero_variance:
        on_skip = recorder.skipped if recorder is not None else None
        skip = ZeroVarSkip(streaks=zero_var_streaks(ledger), seed=run.cfg.seed, on_skip=on_skip)
    stored: dict[str, list[Any]] = {}
    if settings.replay_curation:
        stored = stored_groups(
            ledger, curation_runs(run.curriculum_id), tokenizer,
            temperature=run.cfg.temperature, max_new_tokens=run.cfg.max_new_tokens,
            revision=run.base_revision,
        ).groups  # fmt: skip
    return replay_curation(stored, skip=skip)


def posterior_evidence(ledger: Ledger, run: TrainPlan) -> tuple[Observations, int]:
    """(what the difficulty model starts from, the update clock of the run's start weights):
    every curation group sampled by those weights or their ancestors and every training group
    of the lineage that led to them (`lineage_observations`), this run's own at their step (a
    resumed run continues where it stopped). Earlier nights' evidence counts, decayed by the
    updates since; a first night reads its own curation."""
    obs, now = lineage_observations(ledger, run.base_revision, run.train_id)
    return Observations.load(obs.rows()), now


def posterior_collector(
    ledger: Ledger, run: TrainPlan, batches: CurriculumBatches, tokenizer: Any = None
) -> Collector:
    """`selection = "posterior"`: each step's batch (rollouts_per_step over the curriculum's most
    common G, in prompts) picked by Thompson-drawn learnability from 8x as many candidates of
    the whole curriculum (the model, not the stage order, decides what comes first: a night
    that refreshes the model puts most of its prompts in stage 2 by their cell's prior);
    every training group becomes evidence as it is scored (the recorder writes the same
    groups to train_rollouts). With `replay_curation`, a prompt's first pick trains on its
    stored screen/refine samples (the night's curation rollouts count twice)."""
    cfg = PosteriorConfig()
    cell_of = {
        pid: f"{fam} {lv}"
        for pid, fam, lv in zip(
            run.frame["problem_id"], run.frame["family"], run.frame["level"], strict=True
        )
    }
    evidence, clock = posterior_evidence(ledger, run)

    prompts = batches.batch_prompts()  # the whole curriculum: the model picks across stages

    def size(step: int) -> int:
        return prompts

    def source(step: int, _round: int) -> list[Item]:
        return batches.candidates_all(step, cfg.candidates * prompts)

    def update_of(step: int) -> int:
        return clock + step

    if run.settings.selection == "posterior-screen":
        return posterior_screen(
            source, cell_of, evidence, size, run.cfg.seed, cfg, update_of=update_of
        )
    stored: dict[str, list[Any]] = {}
    visited: set[str] = set()
    if run.settings.replay_curation:
        stored = stored_groups(
            ledger, curation_runs(run.curriculum_id), tokenizer,
            temperature=run.cfg.temperature, max_new_tokens=run.cfg.max_new_tokens,
            revision=run.base_revision,
        ).groups  # fmt: skip
        visited = set(
            ledger.sql(
                "SELECT DISTINCT problem_id FROM train_group_stats WHERE train_id = $t",
                {"t": run.train_id},
            )["problem_id"].to_list()
        )  # a resumed run replays only prompts it has not trained yet
    return posterior_select(
        source, cell_of, evidence, size, run.cfg.seed, cfg, update_of, stored, visited
    )


def carry_lineage(ledger: Ledger, run: TrainPlan, trainer: Trainer, home: Path | None) -> str:
    """`carry_over`: when the run's weights are a checkpoint of an earlier training run in this
    ledger, continue that run (`Trainer.carry`): its moments and schedule state, the schedules
    offset by the lineage's updates so far (`lineage_clock`), and the lineage's first weights
    as the KL reference. Returns one line saying what carried over (or why nothing did)."""
    from pipeline.selection.posterior import lineage_clock

    runs = ledger.sql("SELECT train_id, base_revision, base_model FROM train_runs")
    ckpts = ledger.sql("SELECT train_id, step, model_revision FROM checkpoints")
    made = ckpts.filter(pl.col("model_revision") == run.base_revision).sort("step")
    if made.height == 0:
        return "carry_over: the start weights are no checkpoint of this ledger (a first night)"
    tid, step = str(made["train_id"][0]), int(made["step"][0])
    offset = lineage_clock(runs.select("train_id", "base_revision"), ckpts).get(tid, 0) + step
    base_of = {r["train_id"]: r for r in runs.iter_rows(named=True)}
    by_rev = {r: t for t, r in zip(ckpts["train_id"], ckpts["model_revision"], strict=True)}
    root, hops = tid, 0
    while base_of[root]["base_revision"] in by_rev and hops < 1000:  # up to the first weights
        root, hops = by_rev[base_of[root]["base_revision"]], hops + 1
    reference = None
    if run.cfg.reference == "frozen" and base_of[root]["base_model"]:
        first = from_home(base_of[root]["base_model"], home)
        if (first / "config.json").is_file():
            ref_model, _ = load_policy(first, train_device())
            reference = {k: v.float() for k, v in ref_model.state_dict().items()}
    if not trainer.carry(run.model_dir, offset, reference):
        return (
            f"carry_over: {run.model_dir} kept no optimiser state (only a run's newest "
            "checkpoint does): a fresh start"
        )
    ref = "the lineage's first weights" if reference is not None else "this run's start"
    return f"carry_over: continues {tid} at update {offset} (moments, schedules; reference {ref})"


def load_trainee(model_dir: Path, cfg: GRPOConfig) -> tuple[torch.nn.Module, Any, PromptFormat]:
    """(model, tokenizer, prompt format): fp32 master weights on the training device (a
    bf16-saved checkpoint continues at full precision; the recipe's `autocast` decides what the
    forward passes compute in), LoRA-wrapped when the recipe trains adapters."""
    model, tokenizer = load_policy(model_dir, train_device())
    if next(model.parameters()).dtype != torch.float32:
        model = model.float()
    return with_lora(model, cfg), tokenizer, prompt_format(model_dir, tokenizer)


def train_device() -> str:
    """Where the policy trains: the first CUDA GPU when there is one, else the CPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def for_device(cfg: GRPOConfig, device: torch.device) -> GRPOConfig:
    """`autocast = "bf16"` where the device computes in bf16 natively (a CUDA GPU with bf16, a
    CPU with AVX512-BF16 or AMX); elsewhere emulated bf16 is slower than fp32, so it is turned
    off, with a warning line."""
    if getattr(cfg, "autocast", "off") != "bf16" or bf16_native(device):
        return cfg
    print(f"warning: {device} has no native bf16: autocast off (fp32)", file=sys.stderr)
    return dataclasses.replace(cfg, autocast="off")


def bf16_native(device: torch.device) -> bool:
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        from pipeline.sampling.vllm import cpu_bf16_native

        return cpu_bf16_native()
    return False


def eval_sampler(
    group_sampler: Any, backend: str, model: Any, tokenizer: Any, name: str
) -> Sampler:
    """What held-out evaluation samples with: the training sampler's own engine where it holds
    the trained weights (hf; vllm, synced after every update), else hf over the live model (an
    openai server keeps serving the weights it started with)."""
    inner = getattr(group_sampler, "sampler", None)
    if backend != "openai" and inner is not None and hasattr(inner, "sample"):
        return inner
    return HFSampler(model=model, tokenizer=tokenizer, model_name=name)


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


def result_of(
    run: TrainPlan,
    trainer: Trainer,
    seconds: float,
    tables: tuple[pl.DataFrame, pl.DataFrame],
    resumed_from: int,
    history: list[dict[str, float]],
) -> TrainResult:
    """The run's summary once training stopped (finished, or at `max_steps`)."""
    final = ckpt.list_steps(run.root)[-1][1]
    before, after = tables
    return TrainResult(
        run.train_id,
        run.curriculum_id,
        run.base_revision,
        read_meta(final).get("model_revision", ""),
        final,
        trainer.step,
        trainer.counters.rollouts,
        seconds,
        before,
        after,
        resumed_from,
        history,
    )


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
