"""`sieve train`: GRPO on a curated curriculum, with the recipe for the model.

One call into the job, `flows.commands.train`: everything is decided there before Prefect
starts, once, into a `pipeline.jobs.train.lineage.TrainJob` (the curriculum, the starting model, by
default the one the curriculum was curated with, and the recipe: `--config FILE`, read once,
else the recipe file for that model's prompt format; `--steps` replaces its total and the
`--selection*` options its selection fields), then the flow `flows.train.train_flow` runs on
it. `--print-config` shows the job's settings as TOML and stops. The home is decided by
`--home`'s own check. This module draws the bar and prints.

Test: `pytest tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.common import committed, err, out, progress, show
from flows.cli.options import (
    ENGINE,
    SELECTION,
    BackendOpt,
    BaseUrlOpt,
    HomeOpt,
    OptionBlock,
    option_blocks,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from pipeline.core.hooks import ProgressEvent

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
    selection: OptionBlock = SELECTION,
    resume: ResumeOpt = False,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    engine: OptionBlock = ENGINE,
    print_config: PrintConfigOpt = False,
    strict: StrictOpt = False,
    home: HomeOpt = None,
) -> None:
    """GRPO on a curated curriculum; checkpoints are registered for the next curation."""
    from flows import commands
    from pipeline.core.home import resolve_home

    request = commands.TrainRequest(
        curriculum=curriculum, config=config, model=model, steps=steps, max_steps=max_steps,
        resume=resume, strict=strict, backend=backend, base_urls=base_url or (),
        engine=engine.options(), options=selection.overrides(),
    )  # fmt: skip
    root = home if home is not None else resolve_home()  # --home's check decided it
    with progress("train") as bar:
        summary = commands.train(
            request,
            root,
            print_config=print_config,
            note=lambda line: out.print(line, markup=False, highlight=False, soft_wrap=True),
            warn=lambda line: err.print(line, soft_wrap=True),
            progress=_train_progress(bar),
        )
    if summary is None:  # --resume of a finished run: said so, nothing ran
        return
    if isinstance(summary, str):  # --print-config: the settings as a --config file
        sys.stdout.write(summary)
        return
    print_train(summary)


def _train_progress(bar: Progress) -> Callable[[ProgressEvent], None]:
    """The per-step bar: one event per training step (`pipeline.core.hooks`)."""
    task = bar.add_task("starting", total=None)  # shown from the start; the first step's total

    def update(e: ProgressEvent) -> None:
        m = e.metrics
        committed(
            f"trained {e.done} of {e.total} steps; the checkpoints written are kept "
            "(`sieve train --resume` continues from the newest)"
        )
        bar.update(
            task,
            total=e.total,
            completed=e.done,
            description=(
                f"step {e.done}/{e.total} reward {m['reward_mean']:.2f} "
                f"pass {m['pass_rate']:.2f} KL {m['kl']:.3f} zero-var {m['zero_var_share']:.2f}"
            ),
        )

    return update


def print_train(summary: dict[str, Any]) -> None:
    """A train flow's summary: held-out before -> after by cell, then one line of totals."""
    from flows.cli.summary import before_after, pct

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
