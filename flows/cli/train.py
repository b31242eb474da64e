"""`sieve train`: GRPO on a curated curriculum, with the recipe for the model.

Everything is decided before Prefect starts: the curriculum, the starting model (by default the
one the curriculum was curated with) and the recipe (`--config FILE`, else the recipe file for
that model's prompt format; `--steps` replaces its total). `--print-config` shows the result as
TOML and stops. The call into the job is `run_train` (`flows.train.train_flow`).

Test: `pytest tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.common import (
    check_backend,
    committed,
    err,
    out,
    progress,
    show,
    start_flows,
)
from flows.cli.options import (
    ENGINE,
    BackendOpt,
    BaseUrlOpt,
    HomeOpt,
    OptionBlock,
    check_folders,
    option_blocks,
)
from pipeline.errors import SieveError

if TYPE_CHECKING:
    from rich.progress import Progress

    from pipeline.hooks import ProgressEvent
    from pipeline.recipes import Recipe, TrainSettings
    from pipeline.sampling import EngineOptions
    from pipeline.sampling.budget import SamplingConfig

CurriculumOpt = Annotated[str, typer.Option(help="Curriculum id or 'latest'.")]
RecipeOpt = Annotated[
    Path | None,
    typer.Option(
        help="TrainSettings TOML file, alone on GRPOConfig's defaults; default the recipe "
        "for the model (data/configs/tiny_train.toml or real_train.toml)."
    ),
]
StartOpt = Annotated[
    Path | None,
    typer.Option(help="Starting model folder; default the model the curriculum was curated with."),
]
MaxStepsOpt = Annotated[int | None, typer.Option(help="Stop after this many steps (resume later).")]
StepsOpt = Annotated[int | None, typer.Option(help="Total steps (overrides the config).")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue from the newest checkpoint.")]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Refuse to train at other sampling settings (temperature, top-p, budget) than "
        "the curriculum was curated at; by default that is a one-line warning.",
    ),
]
PrintConfigOpt = Annotated[
    bool,
    typer.Option(
        "--print-config",
        help="Print the effective settings as TOML (a --config file) and exit.",
    ),
]


@option_blocks
def train(
    curriculum: CurriculumOpt = "latest",
    config: RecipeOpt = None,
    model: StartOpt = None,
    max_steps: MaxStepsOpt = None,
    steps: StepsOpt = None,
    resume: ResumeOpt = False,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    engine: OptionBlock = ENGINE,
    print_config: PrintConfigOpt = False,
    strict: StrictOpt = False,
    home: HomeOpt = None,
) -> None:
    """GRPO on a curated curriculum; checkpoints are registered for the next curation."""
    from pipeline.recipes import settings_toml
    from pipeline.runlog import quiet_prefect

    _check_args(max_steps, steps, config, backend, base_url)  # before anything is written
    check_folders(home, "checkpoints", "tensorboard")
    if not print_config:  # --print-config touches nothing on disk (no <home>/.prefect)
        quiet_prefect(home)  # before Prefect is imported: this home's own state
    options = engine.options()
    if model is not None and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    if print_config and model is not None:  # no ledger needed to show settings
        cid, folder, why, curated = curriculum, model, "given", None
    else:
        cid, folder, why, curated = _train_target(curriculum, model, home)
    recipe, settings = train_recipe(config, folder, steps)
    if print_config:
        header = [f"sieve train: effective settings for {folder} ({why})", recipe.line()]
        sys.stdout.write(settings_toml(settings, [*header, f"backend {backend}"]))
        return
    check_sampling(cid, curated, folder, settings, strict)
    if resume:
        check_resumable(cid, folder, settings, backend, home)
    out.print(
        f"train {cid}: model {folder} ({why}); {recipe.line()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    summary = run_train(
        curriculum=cid,
        model=str(folder),
        home=home,
        settings=settings,
        backend=backend,
        base_urls=base_url or [],
        engine=options,
        max_steps=max_steps,
        resume=resume,
    )
    print_train(summary)


def _check_args(
    max_steps: int | None,
    steps: int | None,
    config: Path | None,
    backend: str,
    base_url: list[str] | None,
) -> None:
    """The checks that need neither a model nor the ledger, in the order they report."""
    from grpo_core.validate import MAX_COUNT
    from pipeline.recipes import given_recipe

    if max_steps is not None and max_steps < 1:
        raise SieveError(f"--max-steps must be >= 1, got {max_steps}")
    if steps is not None and not 1 <= steps <= MAX_COUNT:
        raise SieveError(f"--steps must be an integer in [1, {MAX_COUNT}], got {steps}")
    if config is not None:
        given_recipe(config)  # a bad file fails first, whatever else is wrong
    check_backend(backend, base_url)


def train_recipe(
    config: Path | None, model: Path, steps: int | None
) -> tuple[Recipe, TrainSettings]:
    """(Recipe, TrainSettings): `--config FILE` alone on GRPOConfig's defaults, else the recipe
    file for the model; `--steps` replaces total_steps."""
    from pipeline.recipes import given_recipe, recipe_for

    recipe = given_recipe(config) if config is not None else recipe_for(model)
    settings = recipe.settings.with_steps(steps)
    try:
        settings.grpo_config()
    except ValueError as exc:  # `grpo.total_steps must be ...`: what --steps gave
        raise SieveError(f"--steps {steps}: {exc}" if steps is not None else str(exc)) from None
    return recipe, settings


def check_resumable(
    cid: str, folder: Path, settings: TrainSettings, backend: str, home: Path | None
) -> None:
    """SieveError when `--resume` finds no checkpoint of this run (the curriculum, model,
    settings and backend name it): it used to train a fresh run without a word."""
    from grpo_core import checkpoint as ckpt
    from pipeline.home import resolve_home
    from pipeline.policy.model import folder_revision
    from pipeline.train import train_id_for

    train_id = train_id_for(cid, folder_revision(folder), settings, backend)
    root = resolve_home(home) / "checkpoints" / train_id
    if not ckpt.list_steps(root):
        raise SieveError(
            f"--resume: training {train_id} (curriculum {cid}, model {folder}, these settings) "
            f"has no checkpoint in {root}, so there is nothing to resume; drop --resume to "
            "start it"
        )


def check_sampling(
    cid: str, curated: SamplingConfig | None, folder: Path, settings: TrainSettings, strict: bool
) -> None:
    """One warning line (an error with --strict) when the run samples at other settings than
    the curriculum was curated at (`curated`: `pipeline.lineage.curated_sampling`, None when
    not recorded): its pass rates, and which groups are informative, were measured there."""
    from pipeline.recipes import folder_prompt_format
    from pipeline.sampling.budget import training_mismatch

    if curated is None:
        return
    cfg = settings.grpo_config()
    fmt = folder_prompt_format(folder)
    differences = training_mismatch(curated, fmt, cfg.temperature, cfg.max_new_tokens)
    if not differences:
        return
    line = (
        f"curriculum {cid} was curated at other sampling settings than this run trains at: "
        f"{'; '.join(differences)} (its pass rates were measured there"
    )
    if strict:
        raise SieveError(f"{line}; set them alike in the recipe, or drop --strict)")
    err.print(f"warning: {line}; --strict refuses)", soft_wrap=True)


def _train_target(
    curriculum: str, model: Path | None, home: Path | None
) -> tuple[str, Path, str, SamplingConfig | None]:
    """(curriculum id, model folder, why that folder, the sampling it was curated at), checked
    before Prefect starts, from one read-only open of the ledger."""
    from pipeline.export import resolve_curriculum
    from pipeline.home import ledger_path
    from pipeline.lineage import curated_sampling, curriculum_model
    from pipeline.store import Ledger

    if not ledger_path(home).exists():
        raise SieveError(f"no ledger at {ledger_path(home)}: run `sieve curate` first")
    with Ledger.open(home, read_only=True) as ledger:
        cid = resolve_curriculum(ledger, curriculum)
        curated = curated_sampling(ledger, cid)
        if model is not None:
            return cid, model, "given", curated
        folder, why = curriculum_model(ledger, cid, home)
    return cid, folder, why, curated


def run_train(
    *,
    curriculum: str,
    model: str,
    home: Path | None,
    settings: TrainSettings,
    backend: str,
    base_urls: list[str],
    engine: EngineOptions,
    max_steps: int | None,
    resume: bool,
) -> dict[str, Any]:
    """The training job: the Prefect flow `flows.train.train_flow`, with a per-step bar."""
    start_flows(home)
    from flows.runtime import Runtime
    from flows.train import TrainParams, train_flow

    params = TrainParams(
        curriculum=curriculum,
        model=model,
        home=str(home) if home is not None else None,
        settings=settings,
        backend=backend,
        base_urls=base_urls,
        engine=engine,
        max_steps=max_steps,
        resume=resume,
    )
    total = settings.grpo_config().total_steps
    with progress("train") as bar:
        return train_flow(params, Runtime(progress=_train_progress(bar, total)))


def _train_progress(bar: Progress, total: int) -> Callable[[ProgressEvent], None]:
    """The per-step bar: one event per training step (`pipeline.hooks`)."""
    task = bar.add_task("starting", total=total)

    def update(e: ProgressEvent) -> None:
        m = e.metrics
        committed(
            f"trained {e.done} of {e.total} steps; the checkpoints written are kept "
            "(`sieve train --resume` continues from the newest)"
        )
        bar.update(
            task,
            completed=e.done,
            description=(
                f"step {e.done}/{e.total} reward {m['reward_mean']:.2f} "
                f"pass {m['pass_rate']:.2f} KL {m['kl']:.3f} zero-var {m['zero_var_share']:.2f}"
            ),
        )

    return update


def print_train(summary: dict[str, Any]) -> None:
    """A train flow's summary: held-out before -> after by cell, then one line of totals."""
    from flows.loop import before_after, pct

    table = before_after(summary)
    if not table.is_empty():
        show(table, "held-out pass@1 before -> after")
    b, a = summary["heldout_before"], summary["heldout_after"]
    out.print(
        f"train {summary['train_id']}: {summary['steps']} steps, {summary['rollouts']} rollouts, "
        f"{summary['seconds']} s; held-out sampled {pct(b['sampled'])} -> {pct(a['sampled'])}, "
        f"greedy {pct(b['greedy'])} -> {pct(a['greedy'])}"
    )
    out.print(f"checkpoint {summary['checkpoint']} (revision {summary['final_revision']})")
