"""`sieve train`: GRPO on a curated curriculum, with the recipe for the model.

Everything is decided before Prefect starts, once, into a `pipeline.jobs.lineage.TrainJob`: the home
(by `--home`'s own check), the curriculum, the starting model (by default the one the curriculum
was curated with) and the recipe (`--config FILE`, read once, else the recipe file for that
model's prompt format; `--steps` replaces its total). `--print-config` shows the result as TOML
and stops. The call into the job is `run_train` (`flows.train.train_flow`), which is handed the
resolved job.

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
from pipeline.core.errors import SieveError

if TYPE_CHECKING:
    from rich.progress import Progress

    from pipeline.core.hooks import ProgressEvent
    from pipeline.jobs.lineage import TrainJob
    from pipeline.jobs.recipes import Recipe
    from pipeline.sampling import EngineOptions

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
    from pipeline.core.home import resolve_home
    from pipeline.core.runlog import quiet_prefect
    from pipeline.jobs.recipes import settings_toml

    root = home if home is not None else resolve_home()  # --home's check decided it
    given = _check_args(max_steps, steps, config, backend, base_url)  # before anything is written
    check_folders(root, "checkpoints", "tensorboard")
    if not print_config:  # --print-config touches nothing on disk (no <home>/.prefect)
        quiet_prefect(root)  # before Prefect is imported: this home's own state
    options = engine.options()
    if model is not None and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    ledgerless = print_config and model is not None  # no ledger needed to show settings
    job = train_job(curriculum, model, root, given, steps, read_ledger=not ledgerless)
    if print_config:
        header = [f"sieve train: effective settings for {job.model} ({job.model_why})"]
        header += [job.recipe or "", f"backend {backend}"]
        sys.stdout.write(settings_toml(job.settings, header))
        return
    check_sampling(job, strict)
    if resume:
        check_resumable(job, backend)
    out.print(
        f"train {job.curriculum_id}: model {job.model} ({job.model_why}); {job.recipe}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    summary = run_train(
        job=job,
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
) -> Recipe | None:
    """The checks that need neither a model nor the ledger, in the order they report; the
    `--config` file, read here once (None when not given)."""
    from grpo_core.validate import MAX_COUNT
    from pipeline.jobs.recipes import given_recipe

    if max_steps is not None and max_steps < 1:
        raise SieveError(f"--max-steps must be >= 1, got {max_steps}")
    if steps is not None and not 1 <= steps <= MAX_COUNT:
        raise SieveError(f"--steps must be an integer in [1, {MAX_COUNT}], got {steps}")
    given = given_recipe(config) if config is not None else None  # a bad file fails first
    check_backend(backend, base_url)
    return given


def train_job(
    curriculum: str,
    model: Path | None,
    home: Path,
    given: Recipe | None,
    steps: int | None,
    *,
    read_ledger: bool = True,
) -> TrainJob:
    """The job (`pipeline.jobs.lineage.resolve_train_job`), checked before Prefect starts, from one
    read-only open of the ledger (none when `read_ledger` is off: `--print-config --model`)."""
    from pipeline.core.home import LEDGER_NAME
    from pipeline.jobs.lineage import resolve_train_job
    from pipeline.store import Ledger

    if not read_ledger:
        return resolve_train_job(None, curriculum, model, home, recipe=given, steps=steps)
    path = home / LEDGER_NAME
    if not path.exists():
        raise SieveError(f"no ledger at {path}: run `sieve curate` first")
    with Ledger.open(home, read_only=True) as ledger:
        return resolve_train_job(ledger, curriculum, model, home, recipe=given, steps=steps)


def check_resumable(job: TrainJob, backend: str) -> None:
    """SieveError when `--resume` finds no checkpoint of this run (the curriculum, model,
    settings and backend name it): it used to train a fresh run without a word."""
    from grpo_core import checkpoint as ckpt
    from pipeline.jobs.trainee import train_id_for
    from pipeline.policy.model import folder_revision

    cid, folder = job.curriculum_id, job.model
    train_id = train_id_for(cid, folder_revision(folder), job.settings, backend)
    root = job.home / "checkpoints" / train_id
    if not ckpt.list_steps(root):
        raise SieveError(
            f"--resume: training {train_id} (curriculum {cid}, model {folder}, these settings) "
            f"has no checkpoint in {root}, so there is nothing to resume; drop --resume to "
            "start it"
        )


def check_sampling(job: TrainJob, strict: bool) -> None:
    """`pipeline.jobs.lineage.check_sampling` before Prefect starts: its warning line on
    stderr, or its one-line error with --strict."""
    from pipeline.jobs.lineage import check_sampling as check

    line = check(job, strict)
    if line is not None:
        err.print(line, soft_wrap=True)


def run_train(
    *,
    job: TrainJob,
    backend: str,
    base_urls: list[str],
    engine: EngineOptions,
    max_steps: int | None,
    resume: bool,
) -> dict[str, Any]:
    """The training job: the Prefect flow `flows.train.train_flow`, handed the resolved job,
    with a per-step bar."""
    start_flows(job.home)
    from flows.runtime import Runtime
    from flows.train import TrainParams, train_flow

    params = TrainParams(
        job=job,
        backend=backend,
        base_urls=base_urls,
        engine=engine,
        max_steps=max_steps,
        resume=resume,
    )
    total = job.settings.grpo_config().total_steps
    with progress("train") as bar:
        return train_flow(params, Runtime(progress=_train_progress(bar, total)))


def _train_progress(bar: Progress, total: int) -> Callable[[ProgressEvent], None]:
    """The per-step bar: one event per training step (`pipeline.core.hooks`)."""
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
