"""What a training run is and what it trains: the steps `flows/train.py` runs before and after
the trainer, around the recorder (`pipeline.jobs.train.recorder`).

The sequence of a training run is written once, in `flows/train.py`; here are its parts:

- `plan` reads the curriculum's items with their problems (question, answer, verifier) and
  derives a deterministic `train_id` from (curriculum, base revision, settings, and the sampling
  backend when it is not hf), so a re-run of the same training finds its own checkpoints
  (`--resume`) under `<home>/checkpoints/<train_id>`;
- `load_trainee` loads the policy in fp32 master weights on the training device, LoRA-wrapped
  when the recipe trains adapters, before anything that holds the model is built;
- `collector_for` picks the batch source (curation replay, the zero-variance skip, or the
  difficulty model's selection), `carry_lineage` continues an earlier run's optimiser state,
  `eval_sampler` says what held-out evaluation samples with, and `result_of` sums the run up.

Which settings: `pipeline.jobs.train.settings`. Which model: `pipeline.jobs.train.lineage`. Batches
and reward: `pipeline.jobs.train.curriculum_batches`.

Test: `pytest tests/test_train.py tests/test_train_crash.py tests/test_train_rollouts.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import torch

from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.history import ZeroVarSkip, replay_curation
from grpo_core.lora import with_lora
from grpo_core.trainer import Item, Trainer
from grpo_core.types import Collector
from pipeline.core.errors import SieveError
from pipeline.core.home import from_home, resolve_home
from pipeline.jobs.train.curriculum_batches import CurriculumBatches, curriculum_frame
from pipeline.jobs.train.replay import stored_groups, zero_var_streaks
from pipeline.jobs.train.selection_settings import MODEL_DEFAULTS, PRIOR_SAMPLES, selection_config
from pipeline.jobs.train.settings import TrainSettings
from pipeline.policy.model import (
    folder_revision,
    load_policy,
    read_meta,
)
from pipeline.policy.prompts import PromptFormat, prompt_format
from pipeline.sampling import Sampler
from pipeline.sampling.hf import HFSampler
from pipeline.selection.evidence import ledger_cell_prior, lineage_observations
from pipeline.selection.posterior import (
    CellPrior,
    Observations,
    PosteriorConfig,
    posterior_screen,
    posterior_select,
)
from pipeline.store import Ledger
from pipeline.store.ids import curation_runs

# the settings added after runs had ids, with their defaults: a run's id leaves them out when they
# are at their defaults (`train_id_for`)
LATER_SETTINGS: dict[str, object] = {
    "replay_curation": False,
    "skip_zero_variance": False,
    **MODEL_DEFAULTS,
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
    unset = {k for k in LATER_SETTINGS if getattr(settings, k) == LATER_SETTINGS[k]}
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
    on_skip: Callable[[int, str, float, float], None] | None = None,
    batches: CurriculumBatches | None = None,
) -> Collector | None:
    """The batch source with `replay_curation` (the curriculum's stored screen/refine samples
    on each prompt's first visit) and/or `skip_zero_variance` (streaks read from the ledger's
    curation and training history, so a resumed run starts where it stopped; each skip told to
    `on_skip`: the recorder's `skipped`, which writes it with its step); with `selection =
    "posterior"`, Sieve's difficulty model picks each batch from `batches`' candidates
    (`posterior_collector`); None: plain."""
    settings = run.settings
    if settings.selection != "curriculum":
        if batches is None:
            raise SieveError(f"selection = {settings.selection!r} needs the curriculum's batches")
        return posterior_collector(ledger, run, batches, tokenizer)
    if not (settings.replay_curation or settings.skip_zero_variance):
        return None
    skip = None
    if settings.skip_zero_variance:
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


def start_prior(ledger: Ledger, run: TrainPlan, clock: int) -> CellPrior | None:
    """`selection_prior = "ledger"`: what the ledger measured of the run's start weights per
    cell (`ledger_cell_prior`, at most `PRIOR_SAMPLES` samples a cell), at their update clock;
    None for "none", or where the ledger holds no sample of those weights."""
    if run.settings.selection_prior == "none":
        return None
    return ledger_cell_prior(ledger, run.base_revision, samples=PRIOR_SAMPLES, update=clock)


def posterior_collector(
    ledger: Ledger, run: TrainPlan, batches: CurriculumBatches, tokenizer: Any = None
) -> Collector:
    """`selection = "posterior"`: each step's batch (rollouts_per_step over the curriculum's most
    common G, in prompts) picked by the largest learnability score (`selection_score`) under the
    difficulty model `selection_model` names from 8x as many candidates of the whole
    curriculum (the model, not the stage order, decides what comes first: a night that
    refreshes the model puts most of its prompts in stage 2 by their cell's prior), starting
    from the cells' prior `selection_prior` names (`start_prior`); every training group becomes
    evidence as it is scored (the recorder writes the same groups to train_rollouts). With
    `replay_curation`, a prompt's first pick trains on its stored screen/refine samples (the
    night's curation rollouts count twice)."""
    cfg = PosteriorConfig()
    select = selection_config(run.settings)
    cell_of = {
        pid: f"{fam} {lv}"
        for pid, fam, lv in zip(
            run.frame["problem_id"], run.frame["family"], run.frame["level"], strict=True
        )
    }
    evidence, clock = posterior_evidence(ledger, run)
    prior = start_prior(ledger, run, clock)

    prompts = batches.batch_prompts()  # the whole curriculum: the model picks across stages

    def size(step: int) -> int:
        return prompts

    def source(step: int, _round: int) -> list[Item]:
        return batches.candidates_all(step, cfg.candidates * prompts)

    def update_of(step: int) -> int:
        return clock + step

    if run.settings.selection == "posterior-screen":
        return posterior_screen(
            source, cell_of, evidence, size, run.cfg.seed, cfg,
            update_of=update_of, select=select, prior=prior,
        )  # fmt: skip
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
    shares = None
    if select.target_share is not None:  # a resumed run steers on the shares its steps had
        shares = ledger.step_shares(run.train_id)["share"].to_list()
    return posterior_select(
        source, cell_of, evidence, size, run.cfg.seed, cfg, update_of, stored, visited,
        select=select, prior=prior, shares=shares,
    )  # fmt: skip


def carry_lineage(ledger: Ledger, run: TrainPlan, trainer: Trainer, home: Path | None) -> str:
    """`carry_over`: when the run's weights are a checkpoint of an earlier training run in this
    ledger, continue that run (`Trainer.carry`): its moments and schedule state, the schedules
    offset by the lineage's updates so far (`lineage_clock`), and the lineage's first weights
    as the KL reference. Returns one line saying what carried over (or why nothing did)."""
    from pipeline.selection.evidence import lineage_clock

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
