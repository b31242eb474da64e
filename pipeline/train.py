"""Train a policy on a curated curriculum with `grpo_core`, recording everything in the ledger.

`train(ledger, curriculum_id, model_dir, settings, home)`:

1. reads the curriculum's items with their problems (question, answer, verifier);
2. derives a deterministic `train_id` from (curriculum, base revision, settings, and the sampling
   backend when it is not hf), so a re-run of the same training finds its own checkpoints
   (`--resume`) under `<home>/checkpoints/<train_id>`;
3. evaluates the starting weights on the held-out set (ledger runs with purpose `eval`), then
   trains stage by stage — each stage gets a share of the steps proportional to what one pass over
   it costs in rollouts, and each step draws items (weighted by their curriculum weight, without
   replacement, seeded by (seed, step)) until the step's rollout budget is filled;
4. writes metrics per step to `train_metrics` and to TensorBoard, registers every checkpoint in
   `checkpoints` with its `model_revision` (so the next curation samples from it), evaluates every
   `eval_every` steps and at the end, and marks the run finished.

Which settings: a recipe file, `data/configs/tiny_train.toml` for raw-prompt models (the built-in
tiny policy) and `data/configs/real_train.toml` for chat models (`recipe_for`), unless a file is
given; a file is read alone on top of GRPOConfig's documented defaults — nothing is merged in.
Which model: the one the curriculum was curated with (`curriculum_model`); the nightly loop
continues from the newest checkpoint of its model's lineage (`nightly_model`, `lineage_head`).

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
from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set, overall, revision_table
from pipeline.policy.model import (
    SIEVE_META,
    folder_revision,
    load_policy,
    model_revision,
    read_meta,
)
from pipeline.policy.prompts import PromptFormat, prompt_format, render
from pipeline.sampling import EngineOptions, Sampler
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.training import HFGroupSampler as HFGroupSampler  # benchmarks import it here
from pipeline.sampling.training import make_group_sampler
from pipeline.scoring import verify_batch
from pipeline.store import Ledger, load_query

GRPO_FIELDS = {f.name for f in dataclasses.fields(GRPOConfig)}


class TrainSettings(BaseModel):
    """`sieve train --config FILE`: top-level keys here, GRPO knobs in a `[grpo]` table; a knob
    the table leaves out takes GRPOConfig's default."""

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
        grpo_config(value)  # type and range checks, one line each
        return value

    def grpo_config(self, **overrides: Any) -> GRPOConfig:
        return grpo_config({**self.grpo, **overrides})

    def with_steps(self, total_steps: int | None) -> TrainSettings:
        """These settings with `total_steps` replaced (`--steps`); unchanged for None."""
        if total_steps is None:
            return self
        if total_steps < 1:
            raise SieveError(f"--steps must be >= 1, got {total_steps}")
        return self.model_copy(update={"grpo": {**self.grpo, "total_steps": total_steps}})


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


# ---------------------------------------------------------------------- recipes

# The built-in tiny policy's recipe; data/configs/tiny_train.toml holds the same values (tests
# compare them). At 128 rollouts per step lr 1e-4 was the largest that did not lose held-out
# accuracy (issue 5 trials, 3e-4 and above drift); with 512 rollouts per step (64 prompts × G = 8;
# 16 prompts per step was too noisy in benchmarks/grpo_headroom.py) it trains at 2e-4 after a
# 20-step warm-up (benchmarks/curriculum.py). 16 new tokens, checkpoints every 20 steps and a
# fixed β of 0.02 were merged silently under every run before recipes were files; they are
# written out here so the demo's and the benchmark's numbers do not move.
TINY_RECIPE_GRPO: dict[str, Any] = {"lr": 2e-4, "lr_warmup_steps": 20}
TINY_RECIPE_ROLLOUTS_PER_STEP = 512
TINY_GRPO: dict[str, Any] = {
    **TINY_RECIPE_GRPO,
    "total_steps": 30,  # per night: about twice the rollouts an 800-candidate curation spends
    "max_new_tokens": 16,
    "checkpoint_every": 20,
    "beta_schedule": "fixed",
    "beta": 0.02,
}
TINY_RECIPE = TrainSettings(grpo=TINY_GRPO, rollouts_per_step=TINY_RECIPE_ROLLOUTS_PER_STEP)
RECIPES = Path(__file__).resolve().parents[1] / "data" / "configs"


@dataclass(frozen=True)
class Recipe:
    path: Path
    settings: TrainSettings
    why: str  # why this file: "--config", or the model's prompt format

    def line(self) -> str:
        return f"recipe {_shown(self.path)} ({self.why})"


def recipe_for(model_dir: str | Path) -> Recipe:
    """The recipe file for a model: raw prompts (the built-in tiny policy) -> tiny_train.toml;
    a chat model -> real_train.toml (small instruct models)."""
    fmt = folder_prompt_format(model_dir)
    if fmt == "raw":
        path, why = RECIPES / "tiny_train.toml", "raw prompts: the built-in tiny policy's recipe"
    else:
        path, why = RECIPES / "real_train.toml", "chat model: the small instruct model recipe"
    if not path.is_file():
        raise SieveError(f"recipe {path} is missing: pass --config FILE")
    return Recipe(path, load_settings(path), f"{why}; --config FILE picks another")


def given_recipe(path: Path) -> Recipe:
    return Recipe(path, load_settings(path), "--config")


def folder_prompt_format(model_dir: str | Path) -> PromptFormat:
    """The prompt format of a model folder without loading its weights; a name that is not a
    local folder (a served model) counts as chat."""
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        return "chat"
    declared = read_meta(folder).get("prompt_format")
    if declared in ("raw", "chat"):
        return "raw" if declared == "raw" else "chat"
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # transformers raises many types for broken folders
        raise SieveError(f"cannot load the tokenizer of {folder}: {_one_line(exc)}") from exc
    return prompt_format(folder, tokenizer)


def settings_toml(settings: TrainSettings, header: Sequence[str] = ()) -> str:
    """The effective settings as a file `--config` reads back: TrainSettings at the top level and
    the resolved GRPOConfig, every field, in `[grpo]` (`sieve train --print-config`)."""
    lines = [f"# {h}" for h in header]
    lines += [_toml_line(k, v) for k, v in settings.model_dump(exclude={"grpo"}).items()]
    lines += ["", "[grpo]"]
    lines += [_toml_line(k, v) for k, v in dataclasses.asdict(settings.grpo_config()).items()]
    return "\n".join(lines) + "\n"


def _toml_line(key: str, value: Any) -> str:
    return f"# {key}: unset" if value is None else f"{key} = {_toml_value(value)}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # TOML reads Python's float repr (2e-06, inf, nan) as it is
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


# ---------------------------------------------------------------------- which model


def curriculum_model(
    ledger: Ledger, curriculum_id: str, home: str | Path | None = None
) -> tuple[Path, str]:
    """The model folder a curriculum was curated with, and a note saying how it was chosen.

    Curricula record the model (`curricula.model`, `model_revision`); ledgers from before that
    fall back to the newest registered checkpoint, else the tiny policy. One SieveError line when
    the folder is gone or was a served model."""
    rows = ledger.run(
        "SELECT model, model_revision FROM curricula WHERE curriculum_id = $c", {"c": curriculum_id}
    )
    model, revision = rows[0] if rows else (None, None)
    if not model:
        path = latest_model(ledger, home)
        if not (path / "config.json").is_file():
            raise SieveError(
                f"curriculum {curriculum_id} records no model and there is no tiny policy at "
                f"{path}: pass --model FOLDER"
            )
        what = "the tiny policy" if path == _tiny(home) else "the newest registered checkpoint"
        return path, f"curriculum {curriculum_id} records no model: using {what}"
    if str(revision or "").startswith("served:"):
        raise SieveError(
            f"curriculum {curriculum_id} was curated with the served model {model!r} (openai "
            "backend): pass --model FOLDER holding its weights"
        )
    folder = Path(model)
    if not (folder / "config.json").is_file():
        raise SieveError(
            f"curriculum {curriculum_id} was curated with model folder {folder}, which is not a "
            "model folder here (moved, deleted, or relative to another directory): "
            "pass --model FOLDER"
        )
    note = f"the model curriculum {curriculum_id} was curated with"
    if revision and folder_revision(folder) != revision:
        note += f"; warning: its weights changed since (curated with revision {revision})"
    return folder, note


def lineage_head(ledger: Ledger, revision: str) -> Path | None:
    """The newest checkpoint (of a finished run, still on disk) descended from `revision`:
    trained from it, or from a checkpoint trained from it, and so on; None when there is none."""
    for path, _ in ledger.run(load_query("lineage_checkpoints"), {"revision": revision}):
        if (Path(path) / "config.json").is_file():
            return Path(path)
    return None


def nightly_model(
    ledger: Ledger | None, model: str | None, home: str | Path | None = None
) -> tuple[Path, str]:
    """What a night curates and trains from, and a note saying why.

    Given a model folder: the newest checkpoint of its lineage, else the folder itself. Without
    one: the newest checkpoint of the lineage of the model the newest curriculum was curated
    with (else that model), so nights continue what the last one curated; on a fresh home (or a
    ledger whose curricula record no model) the newest registered checkpoint, else the tiny
    policy."""
    if ledger is None:  # a fresh home: nothing curated or trained yet
        if model is not None:
            return Path(model), "nothing trained from it yet"
        return _tiny(home), "a fresh home: the tiny policy"
    if model is not None:
        folder = Path(model)
        if not (folder / "config.json").is_file():
            return folder, "not a local folder (a served model): no lineage to follow"
        head = lineage_head(ledger, folder_revision(folder))
        if head is not None:
            return head, f"the newest checkpoint trained from {folder}"
        return folder, "nothing trained from it yet"
    rows = ledger.run(load_query("newest_curriculum_model"))
    if rows and rows[0][1] and not str(rows[0][2] or "").startswith("served:"):
        cid, name, revision = rows[0]
        head = lineage_head(ledger, str(revision)) if revision else None
        if head is not None:
            return head, f"the newest checkpoint trained from {name} (curriculum {cid}'s model)"
        if (Path(name) / "config.json").is_file():
            return Path(name), f"the model of the newest curriculum {cid}"
    path = latest_model(ledger, home)
    if path == _tiny(home):
        return path, "nothing curated from a local model yet: the tiny policy"
    return path, "no curriculum names its model: the newest registered checkpoint"


def latest_model(ledger: Ledger, home: str | Path | None = None) -> Path:
    """The newest registered checkpoint that still exists, else the bootstrapped tiny policy."""
    for (path,) in ledger.run(load_query("latest_checkpoints")):
        if (Path(path) / "config.json").is_file():
            return Path(path)
    return _tiny(home)


def _tiny(home: str | Path | None) -> Path:
    return resolve_home(home) / "models" / "tiny"


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


def train_id_for(
    curriculum_id: str, base_revision: str, settings: TrainSettings, backend: str = "hf"
) -> str:
    """The run's id. The backend is part of it when it is not hf (another engine samples other
    rollouts); hf runs keep the ids they had before backends were selectable."""
    text = f"{curriculum_id}|{base_revision}|{settings.model_dump_json()}"
    text += f"|{backend}" if backend != "hf" else ""
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
    backend: str = "hf",
    engine: EngineOptions | None = None,
    base_urls: Sequence[str] = (),
) -> TrainResult:
    """Train on a curriculum; see the module docstring. Errors are one-line SieveErrors.

    `settings` None: the recipe for the model (`recipe_for`). `backend`, `engine`, `base_urls`
    choose how rollouts are sampled (`pipeline.sampling.training.make_group_sampler`). `reward`
    replaces the problems' verifiers (tests; custom rewards); held-out evaluation always uses the
    verifiers.
    """
    settings = settings or recipe_for(model_dir).settings
    cfg = settings.grpo_config()
    frame = curriculum_frame(ledger, curriculum_id)
    model, tokenizer = load_policy(model_dir, train_device())
    if next(model.parameters()).dtype != torch.float32:
        # fp32 master weights: a bf16-saved checkpoint continues at full precision (the recipe's
        # `autocast` decides what the forward passes compute in)
        model = model.float()
    cfg = for_device(cfg, next(model.parameters()).device)
    fmt = prompt_format(model_dir, tokenizer)
    base_revision = folder_revision(model_dir)  # the same identity curation records
    train_id = train_id_for(curriculum_id, base_revision, settings, backend)
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
    sampler = make_group_sampler(
        backend, model, tokenizer, str(model_dir), engine=engine, base_urls=base_urls
    )
    evaluator = eval_sampler(sampler, backend, model, tokenizer, str(model_dir))
    run = _Run(
        ledger, train_id, curriculum_id, base_revision, settings, cfg, fmt, tokenizer, evaluator,
        batches.stage_of, progress, _writer(settings, home, train_id),
    )  # fmt: skip
    trainer = Trainer(
        model,
        tokenizer,
        sampler,
        reward or partial(verifier_reward, marker_required=fmt == "chat"),
        batches,
        cfg,
        root,
        on_metrics=run.on_metrics,
        on_checkpoint=run.checkpointed,
        write_extra=run.write_meta,
        crash_point=crash_point,
        warn=run.warn,
    )
    run.follow(trainer.model)  # under LoRA the trainer wraps the model: that one is live
    try:
        if resume and ckpt.list_steps(root):
            run.step = trainer.resume()
            run.register_missing(root)  # killed between a checkpoint's rename and its row
        resumed_from = run.step
        run.start(str(model_dir))
        before = run.evaluate_base(resumed_from)
        started = time.perf_counter()
        history = trainer.train(max_steps)
        done = trainer.step >= cfg.total_steps
        after = run.evaluate_live(trainer.step) if done else before
        final = ckpt.list_steps(root)[-1][1]
        run.finish("finished" if done else "running")
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
        checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)
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
class _Run:
    """The recorder of one training run: the trainer's hooks (metrics, checkpoints, warnings)
    written to the ledger and TensorBoard, and held-out evaluation. Built before the trainer."""

    ledger: Ledger
    train_id: str
    curriculum_id: str
    base_revision: str
    settings: TrainSettings
    cfg: GRPOConfig
    fmt: PromptFormat
    tokenizer: Any
    sampler: Sampler  # held-out evaluation
    stage_of: Callable[[int], int]
    progress: Progress | None = None
    writer: Any = None  # a TensorBoard SummaryWriter, or None
    model: torch.nn.Module | None = None  # the live model, from `follow`
    step: int = 0  # the next step to run (what a checkpoint written now is at)
    rows: list[tuple[str, int, str, float | None]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    last: dict[str, float] = field(default_factory=dict)
    model_name: str = ""

    def follow(self, model: torch.nn.Module) -> None:
        """The module the trainer updates (under LoRA its wrapped model): hashed for the live
        revision, and what an hf evaluation sampler samples from."""
        self.model = model
        if isinstance(self.sampler, HFSampler):
            self.sampler.model = model  # type: ignore[assignment]

    def warn(self, message: str) -> None:
        """Trainer warnings (a refused checkpoint, a skipped step): kept and shown on stderr."""
        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr)

    def on_metrics(self, step: int, m: dict[str, float]) -> None:
        m["stage"] = float(self.stage_of(step))
        self.record(step, m)
        every, total = self.cfg.checkpoint_every, self.cfg.total_steps
        if (every and (step + 1) % every == 0) or step + 1 == total:
            self.flush()  # metrics land before the checkpoint that follows them
        if self.settings.eval_every and (step + 1) % self.settings.eval_every == 0:
            self.evaluate_live(step + 1)
        if self.progress is not None:
            self.progress(step + 1, total, m)

    def start(self, model: str) -> None:
        self.model_name = model
        self._status("running", model, dataclasses.asdict(self.cfg))

    def _status(self, status: str, model: str = "", config: dict[str, Any] | None = None) -> None:
        if config is None:  # keep config and start time of the stored row
            self.ledger.run(
                "UPDATE train_runs SET status = $s, finished_at = now() WHERE train_id = $t",
                {"s": status, "t": self.train_id},
            )
            return
        row = pl.DataFrame(
            {
                "train_id": [self.train_id],
                "curriculum_id": [self.curriculum_id],
                "base_model": [model or self.model_name],
                "base_revision": [self.base_revision],
                "config": [json.dumps({"settings": self.settings.model_dump(), "grpo": config})],
                "started_at": [datetime.now(UTC)],
                "finished_at": [None],
                "status": [status],
            }
        )
        self.ledger.write("train_runs", row, on_conflict="replace")

    def finish(self, status: str) -> None:
        self.flush()
        self._status(status)
        if self.writer is not None:
            self.writer.close()

    def record(self, step: int, metrics: dict[str, float]) -> None:
        self.last, self.step = metrics, step + 1
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
        meta = {
            "prompt_format": self.fmt,
            "source": "grpo",
            "base_revision": self.base_revision,
            "curriculum_id": self.curriculum_id,
            "train_id": self.train_id,
            "step": self.step,
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
        """The recipe's own sampling budget (temperature, max_new_tokens) for held-out eval."""
        s = self.settings
        return EvalConfig(
            per_level=s.eval_per_level,
            samples=s.eval_samples,
            temperature=self.cfg.temperature,
            max_new_tokens=self.cfg.max_new_tokens,
            seed=self.cfg.seed,
        )

    def _evaluate(self, revision: str, step: int) -> pl.DataFrame:
        cfg = self._eval_cfg()
        problems = heldout_set(cfg.per_level, self.settings.eval_families)
        questions = problems["question"].to_list()
        prompts_of = dict(zip(questions, render(questions, self.fmt, self.tokenizer), strict=True))
        table = evaluate(self.sampler, self.ledger, revision, prompts_of, cfg, problems, self.fmt)
        for name in ("greedy", "sampled"):
            mean = overall(table, name)
            if mean is None:  # no run of this mode (temperature 0 records no sampled run)
                continue
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
        assert self.model is not None, "follow(trainer.model) before training"
        model = self.model
        if self.cfg.reference == "lora_base":
            import copy

            model = copy.deepcopy(model).merge_and_unload()  # type: ignore[operator]
        return model_revision(model)


def heldout_table(ledger: Ledger, revision: str) -> pl.DataFrame:
    """Held-out pass@1 by family × level of one revision: its newest greedy and sampled eval
    runs, read from the `heldout_pass1` view."""
    return revision_table(ledger, revision)
