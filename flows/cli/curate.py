"""`sieve bootstrap`, `sieve eval`, `sieve curate`: a policy, its held-out score, its curriculum.

Each command calls one job of `flows.commands` (`bootstrap`, `evaluate`, `curate`), which
decides what its options leave open (without `--model`, eval and curate take what the nightly
flow would: the newest checkpoint of the newest curriculum's model), checks them and runs the
Prefect flows; this module draws the bars and prints the result.

Test: `pytest tests/cli/test_cli.py tests/cli/test_train_cli.py tests/cli/test_bad_inputs.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from flows.cli.common import bold, committed, err, out, progress, show
from flows.cli.options import (
    BOOTSTRAP,
    ENGINE,
    EVAL,
    SAMPLING,
    BackendOpt,
    BaseUrlOpt,
    ConfigOpt,
    HomeOpt,
    ModelOpt,
    OptionBlock,
    eval_block,
    option_blocks,
    seed_option,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from pipeline.core.hooks import ProgressEvent
    from pipeline.sampling.budget import EvalConfig

# bootstrap's own evaluation: its --seed seeds the data, the weights and the evaluation
BOOTSTRAP_EVAL = eval_block("per_level", prefix="Evaluation after training: ")


@option_blocks
def bootstrap(
    settings: OptionBlock = BOOTSTRAP,
    evaluation: OptionBlock = BOOTSTRAP_EVAL,
    home: HomeOpt = None,
) -> None:
    """Train the built-in tiny policy from scratch, save it, evaluate it on held-out problems."""
    from flows import commands

    training, evaluating = progress("bootstrap: training"), progress("evaluating")
    task = training.add_task("training", total=1.0)

    def trained(e: ProgressEvent) -> None:
        description = f"step {e.done} loss {e.metrics['loss']:.3f}"
        training.update(task, completed=e.metrics["fraction"], description=description)

    def saved(line: str) -> None:  # training is over: its bar gives way to the evaluation's
        training.stop()
        out.print(line)
        evaluating.start()

    training.start()
    try:
        result, cfg = commands.bootstrap(
            settings.overrides(), evaluation.overrides(), home,
            note=saved, train_progress=trained, progress=eval_updates(evaluating),
        )  # fmt: skip
    finally:
        training.stop()
        evaluating.stop()
    show_eval(result, cfg)


@option_blocks
def eval_cmd(
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    evaluation: OptionBlock = EVAL,
    sampling: OptionBlock = SAMPLING,
    engine: OptionBlock = ENGINE,
    home: HomeOpt = None,
) -> None:
    """Held-out pass@1 by family x level (greedy and sampled), recorded in the ledger."""
    from flows import commands

    with progress("evaluating") as bar:
        result, cfg = commands.evaluate(
            model, home, evaluation.overrides(), sampling.overrides(), backend, base_url or (),
            engine.options(), note=out.print, progress=eval_updates(bar),
        )  # fmt: skip
    show_eval(result, cfg)


@option_blocks
def curate(
    config: ConfigOpt = None,
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates (overrides the config).")] = None,
    seed: Annotated[int | None, seed_option("Seed (overrides the config).")] = None,
    ingested: Annotated[
        list[str] | None,
        typer.Option(
            "--ingested",
            help="Curate the problems `sieve ingest` stored under this family (repeatable) "
            "instead of generating the config's mix.",
        ),
    ] = None,
    sampling: OptionBlock = SAMPLING,
    engine: OptionBlock = ENGINE,
    home: HomeOpt = None,
    runner: Annotated[
        str, typer.Option(help="Where chunks run: local, dask or ray (needs '.[scale]').")
    ] = "local",
    runner_address: Annotated[
        str | None, typer.Option(help="An existing dask/ray cluster; default: a local one.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Workers of a local dask/ray cluster.")] = 2,
) -> None:
    """Screen, refine and select a two-stage curriculum for the model (a Prefect flow)."""
    from flows import commands

    request = commands.CurateRequest(
        config=config,
        overrides={"n_candidates": n, "seed": seed, "ingested": ingested or None},
        sampling=sampling.overrides(),
        model=model,
        backend=backend,
        base_urls=base_url or (),
        engine=engine.options(),
        scale={"runner": runner, "runner_address": runner_address, "workers": workers},
    )
    started = time.monotonic()
    with progress("curate") as bar:
        summary = commands.curate(request, home, note=out.print, progress=curate_bar(bar, started))
    if not err.is_terminal:
        out.print(f"write: curriculum written ({(time.monotonic() - started) / 60:.1f} min in)")
    _print_summary(summary)


def curate_bar(bar: Progress, started: float) -> Callable[[ProgressEvent], None]:
    """A bar per curation stage, one event per committed chunk; without a terminal, one line
    per finished stage."""
    tasks: dict[str, Any] = {}
    done: dict[str, str] = {}

    def update(e: ProgressEvent) -> None:
        if e.stage not in tasks:
            tasks[e.stage] = bar.add_task(e.stage, total=e.total)
        bar.update(tasks[e.stage], completed=e.done, description=f"{e.stage} chunks")
        done[e.stage] = f"{e.stage} {e.done} of {e.total} chunks"
        committed(f"{', '.join(done.values())} committed; rerun the same command to resume")
        if e.done == e.total and not err.is_terminal:  # the bar is off: one line per stage
            minutes = (time.monotonic() - started) / 60
            chunks = f"{e.total} chunk{'s' if e.total > 1 else ''}"
            out.print(f"{e.stage}: {chunks} done ({minutes:.1f} min in)")

    return update


def eval_updates(bar: Progress) -> Callable[[ProgressEvent], None]:
    """The held-out evaluation on `bar`, shown from the start: one event per mode recorded
    (greedy, then sampled), the first of which gives the total."""
    task = bar.add_task("greedy", total=None)

    def update(e: ProgressEvent) -> None:
        bar.update(task, total=e.total, completed=e.done, description=f"{e.stage} recorded")
        committed(f"held-out {e.stage} results recorded")

    return update


def show_eval(result: dict[str, Any], cfg: EvalConfig) -> None:
    """The held-out table an evaluation recorded."""
    import polars as pl

    show(
        pl.DataFrame(result["table"]),
        f"held-out pass@1 by family x level (greedy: T=0; sampled: {cfg.samples} per problem at "
        f"T={cfg.sampling.sampling_temperature:g}; errors: verifier errors, counted as wrong)",
    )


def _print_summary(summary: dict[str, Any]) -> None:
    import polars as pl

    out.print(Text.assemble("curriculum ", bold(summary["curriculum_id"])))
    kept = summary["kept"]
    out.print(
        "kept: "
        + ", ".join(f"{k} {v}" for k, v in kept.items())
        + f" (of which replay {summary['replay']})"
        if kept
        else "kept: nothing (no informative prompts)"
    )
    rejected = pl.DataFrame(
        {"reason": list(summary["rejected"]), "prompts": list(summary["rejected"].values())}
    )
    show(rejected, "rejected by reason")
    hist = summary["screen_pass_rate_histogram"]
    bars = " ".join(f"{i / 10:.1f}:{c}" for i, c in enumerate(hist))
    out.print(f"screen pass-rate histogram (bin start: prompts): {bars}")
    spent = summary["rollouts_spent"]
    out.print(f"rollouts spent: {sum(spent.values())} ({spent})")
    for line in summary.get("warnings", []):  # the flow's went to its log: said here as well
        err.print(f"warning: {line}", soft_wrap=True)
