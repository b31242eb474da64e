"""`sieve schedule`, `sieve loop`, `sieve demo`: the nightly job, served or run back to back.

`schedule` serves `flows.nightly` as a Prefect deployment on a cron and `loop` runs N nights in
this process (`flows.commands.schedule` and `.loop`: the settings decided and checked there);
`demo` is the main job end to end on the embedded default (`pipeline.jobs.data.demo`'s foundation
check, then `flows.loop.demo`).

Test: `pytest tests/flows/test_schedule.py tests/cli/test_train_cli.py tests/flows/test_loop.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.rule import Rule

from flows.cli.common import committed, out, progress, show, stage_lines
from flows.cli.options import (
    ENGINE,
    SELECTION,
    BackendOpt,
    BaseUrlOpt,
    ConfigOpt,
    HomeOpt,
    OptionBlock,
    option_blocks,
)

# printed after the demo, with pipeline.jobs.data.demo.EXAMPLE_SQL (tests/cli/test_sql_sandbox.py
# runs them)
LOOP_SQL = [
    "SELECT stage, count(*), avg(group_size) FROM curriculum_items GROUP BY stage",
    "SELECT step, value FROM train_metrics WHERE name = 'pass_rate' ORDER BY step",
]

TrainConfigOpt = Annotated[
    Path | None, typer.Option(help="TrainSettings TOML file (sieve train --config).")
]
NightlyModelOpt = Annotated[
    Path | None,
    typer.Option(help="Model folder; each night continues from the newest checkpoint of it."),
]
LoopTrainConfigOpt = Annotated[
    Path | None,
    typer.Option(help="TrainSettings TOML file; default the recipe for the model."),
]
StartOpt = Annotated[str | None, typer.Option(help="First night, YYYY-MM-DD (default today, UTC).")]
LoopModelOpt = Annotated[
    Path | None,
    typer.Option(
        help="Model folder; each night continues from its newest checkpoint (default: the "
        "newest curriculum's model, the tiny policy on a fresh home)."
    ),
]


def schedule(
    cron: Annotated[str, typer.Option(help='Cron schedule, e.g. "0 2 * * *" (02:00 daily).')],
    config: ConfigOpt = None,
    train_config: TrainConfigOpt = None,
    model: NightlyModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    name: Annotated[str, typer.Option(help="Deployment name.")] = "nightly",
    home: HomeOpt = None,
) -> None:
    """Serve the nightly flow as a Prefect deployment on a cron schedule (blocks)."""
    from flows import commands

    commands.schedule(
        cron, name, config, train_config, model, backend, base_url or (), home, note=out.print
    )


def demo(
    bootstrap_steps: Annotated[
        int, typer.Option(help="Supervised steps when the tiny policy must be bootstrapped.")
    ] = 700,
    n: Annotated[int, typer.Option(help="Candidates to curate.")] = 1000,
    steps: Annotated[
        int | None, typer.Option(help="Training steps (default: the config's).")
    ] = None,
    home: HomeOpt = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="A built-in model (smollm2-135m, added if missing) or a model folder: the "
            "real-model demo, one night on vLLM (`make demo-real`, ~12 min on 2 cores); "
            "--n, --steps and --bootstrap-steps are the tiny policy's."
        ),
    ] = None,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            help="Also print held-out pass@1 before -> after for every family x level cell "
            "(default: only the cells that moved).",
        ),
    ] = False,
) -> None:
    """The main job end to end: bootstrap if missing -> curate -> train -> eval -> a summary led
    by what the night's curation bought (its own samples, Sieve against uniform draws)."""
    import time

    from flows import commands
    from flows.cli.summary import WIDTH, before_after, demo_summary, night_line
    from pipeline.jobs.data.demo import EXAMPLE_SQL

    started = time.perf_counter()

    def rule() -> None:  # once the options are checked: no rule above a usage error
        out.print(
            Rule("Sieve demo" + (f" on {model}" if model else "")), width=min(out.width, WIDTH)
        )

    def note(line: str) -> None:
        first = line.startswith("1. ")  # the foundation check's lines under its text
        say(line, rest="   " if first else "  ")

    with progress("night") as bar:
        ledger, run = commands.demo(
            home, model, n, bootstrap_steps, steps, note,
            on_night=lambda i, night: note(night_line(i, night)),
            progress=stage_lines(bar, time.monotonic()), on_start=rule,
        )  # fmt: skip
    out.print()
    for line in demo_summary(run):
        say(line)
    if wide:
        out.print()
        cells = "on the demo's cells " if model else ""
        samples = "mean over samples" if model else "mean over samples at T=1"
        title = f"held-out pass@1 before -> after {cells}({samples}; greedy)"
        show(before_after(run.night.get("train")), title, width=WIDTH)
    cur = run.night["curate"]
    train = run.night.get("train") or {}
    out.print()
    say(
        f"rollouts spent: curation {sum(cur['rollouts_spent'].values())}, "
        f"training {train.get('rollouts', 0)}; "
        f"wall time {(time.perf_counter() - started) / 60:.1f} min"
    )
    say(f"ledger: {shown_path(ledger)}")
    if run.report is not None:
        say(f"report: {shown_path(run.report)}")
    say("try (after `source .venv/bin/activate`):")
    for query in [*EXAMPLE_SQL, *LOOP_SQL]:
        for line in sql_lines(query):
            out.print(line, highlight=False)


def say(text: str, first: str = "", rest: str = "  ") -> None:
    """Print `text` as lines of at most `summary.WIDTH` columns (the demo's output)."""
    from flows.cli.summary import wrap

    for line in wrap(text, first, rest):
        out.print(line, highlight=False)


def sql_lines(query: str, width: int | None = None) -> list[str]:
    """`  sieve sql "QUERY"` in lines of at most `width` (default `summary.WIDTH`) columns,
    broken before a clause (FROM, WHERE, GROUP BY, ORDER BY, LIMIT) where it must be: inside
    the quotes a line break is a space to SQL, and a shell keeps it, so the lines paste as
    one command."""
    import re

    from flows.cli.summary import WIDTH, wrap

    width = width or WIDTH
    clauses = re.split(r" (?=(?:FROM|WHERE|GROUP BY|ORDER BY|LIMIT)\b)", query)
    lines = ['  sieve sql "' + clauses[0]]
    for clause in clauses[1:]:
        if len(lines[-1]) + 1 + len(clause) + 1 <= width:  # + 1: the closing quote, at worst
            lines[-1] += " " + clause
        else:
            lines.append("    " + clause)
    lines[-1] += '"'
    return [part for line in lines for part in wrap(line, "", "    ", width)]


def shown_path(path: Path | str | None) -> str:
    """`path` relative to the current folder when it lies under it (shorter lines), else as is."""
    if path is None:
        return "none"
    full = Path(path).absolute()
    try:
        return str(full.relative_to(Path.cwd()))
    except ValueError:
        return str(full)


@option_blocks
def loop(
    nights: Annotated[int, typer.Option(help="Nights to run back to back.")] = 2,
    config: ConfigOpt = None,
    train_config: LoopTrainConfigOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates per night.")] = None,
    steps: Annotated[int | None, typer.Option(help="Training steps per night.")] = None,
    selection: OptionBlock = SELECTION,
    start: StartOpt = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Run again a night the ledger records as finished on this lineage (from "
            "the newest weights); without it such a night is skipped.",
        ),
    ] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Start from --model's folder itself, not the newest checkpoint trained from "
            "it: a second run or a sweep member, reading the groups the ledger holds of the "
            "runs from the same weights.",
        ),
    ] = False,
    model: LoopModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    engine: OptionBlock = ENGINE,
    home: HomeOpt = None,
) -> None:
    """N nights of curate -> train -> eval, each starting from the previous night's checkpoint.

    A night already finished on this lineage (a --start date run before) is skipped.
    """
    from flows import commands
    from flows.cli.summary import night_line

    def night_done(index: int, night: dict[str, Any]) -> None:  # once committed
        out.print(night_line(index, night))
        committed(f"{index} of {nights} nights done (the night under way keeps what it committed)")

    table = commands.loop(
        nights, config, train_config, n, steps, start, model, backend, base_url or (),
        engine.options(), home, again,
        note=lambda line: out.print(line, markup=False, highlight=False, soft_wrap=True),
        on_night=night_done, train_options=selection.overrides(), fresh=fresh,
    )  # fmt: skip
    show(table, "held-out sampled pass@1 by revision (oldest first)")
