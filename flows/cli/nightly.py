"""`sieve schedule`, `sieve loop`, `sieve demo`: the nightly job, served or run back to back.

`schedule` serves `flows.nightly` as a Prefect deployment on a cron (`run_schedule`); `loop` runs
N nights in this process (`run_loop`, over `flows.loop.loop`); `demo` is the main job end to end
on the embedded default (`pipeline.jobs.demo`'s foundation check, then `flows.loop.demo`).

Test: `pytest tests/flows/test_schedule.py tests/cli/test_train_cli.py tests/flows/test_loop.py`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.rule import Rule

from flows.cli.common import (
    check_backend,
    committed,
    out,
    progress,
    show,
    stage_lines,
    start_flows,
)
from flows.cli.curate import check_curate_config
from flows.cli.options import (
    ENGINE,
    BackendOpt,
    BaseUrlOpt,
    ConfigOpt,
    HomeOpt,
    OptionBlock,
    check_folders,
    option_blocks,
)
from pipeline.core.errors import SieveError

if TYPE_CHECKING:
    from pipeline.jobs.recipes import TrainSettings
    from pipeline.sampling import EngineOptions
    from pipeline.selection import CurateConfig

# printed after the demo, with pipeline.jobs.demo.EXAMPLE_SQL (tests/cli/test_sql_sandbox.py runs
# them)
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
    from pipeline.selection import CurateConfig, load_curate_config

    if not os.environ.get("PREFECT_API_URL"):
        raise SieveError(
            "sieve schedule needs a Prefect server: run `prefect server start`, then "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except Exception as exc:
        raise SieveError(f"invalid --cron {cron!r}: {' '.join(str(exc).split())[:160]}") from exc
    from pipeline.jobs.recipes import load_settings

    check_backend(backend, base_url)
    cfg = load_curate_config(config) if config is not None else CurateConfig()
    settings = load_settings(train_config) if train_config is not None else None  # per model
    run_schedule(
        cron,
        name,
        model=str(model.resolve()) if model is not None else None,
        backend=backend,
        base_urls=base_url or [],
        home=str(Path(home).resolve()) if home is not None else None,
        config=cfg,
        train=settings,
        keep_sampling=sorted(cfg.sampling.model_fields_set) if config is not None else [],
    )


def run_schedule(
    cron: str,
    name: str,
    *,
    model: str | None,
    backend: str,
    base_urls: list[str],
    home: str | None,
    config: CurateConfig,
    train: TrainSettings | None,
    keep_sampling: Sequence[str] = (),
) -> None:
    """The nightly job as a deployment: `flows.nightly.serve` on `cron` (blocks until Ctrl-C)."""
    from flows.nightly import NightlyParams, serve

    params = NightlyParams(
        model=model, backend=backend, base_urls=base_urls, home=home, config=config,
        train=train, keep_sampling=list(keep_sampling),
    )  # fmt: skip
    out.print(f"serving deployment sieve-nightly/{name} on cron {cron!r}; Ctrl-C stops it")
    serve(cron, params, name)


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

    from flows.loop import DEMO_CURATE, DEMO_TRAIN, WIDTH, demo_real, demo_summary
    from flows.loop import demo as run_demo_night
    from pipeline.jobs.demo import EXAMPLE_SQL

    if n < 10 or bootstrap_steps < 1:
        raise SieveError("--n must be >= 10 and --bootstrap-steps >= 1")
    started = time.perf_counter()
    out.print(Rule("Sieve demo" + (f" on {model}" if model else "")), width=min(out.width, WIDTH))
    ledger = _demo_problems(home)
    start_flows(home)
    if model is not None:
        say(f"2. {model} -> curate -> train -> eval (one night of the nightly flow, vLLM)")
        with progress("night") as bar:
            hook = stage_lines(bar, time.monotonic())
            run = demo_real(home, model, say=say, progress=hook)
        title = "held-out pass@1 before -> after on the demo's cells (mean over samples; greedy)"
    else:
        settings = DEMO_TRAIN.with_steps(steps)
        config = DEMO_CURATE.model_copy(update={"n_candidates": n})
        say("2. policy -> curate -> train -> eval (one night of the nightly flow)")
        run = run_demo_night(home, bootstrap_steps, config, settings, say=say)
        title = "held-out pass@1 before -> after (mean over samples at T=1; greedy)"
    out.print()
    for line in demo_summary(run):
        say(line)
    if wide:
        out.print()
        show(run.table, title, width=WIDTH)
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
    """Print `text` as lines of at most `flows.loop.WIDTH` columns (the demo's output)."""
    from flows.loop import wrap

    for line in wrap(text, first, rest):
        out.print(line, highlight=False)


def sql_lines(query: str, width: int | None = None) -> list[str]:
    """`  sieve sql "QUERY"` in lines of at most `width` (default `flows.loop.WIDTH`) columns,
    broken before a clause (FROM, WHERE, GROUP BY, ORDER BY, LIMIT) where it must be: inside
    the quotes a line break is a space to SQL, and a shell keeps it, so the lines paste as
    one command."""
    import re

    from flows.loop import WIDTH, wrap

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


def _demo_problems(home: Path | None) -> Path | None:
    """Step 1 of the demo: the embedded problems in the ledger and the verifier's self-check,
    printed; returns the ledger's path."""
    from pipeline.jobs.demo import run_demo

    found = run_demo(home, n=2000, seed=0)
    c = found.check
    say(
        f"1. problems: {int(found.counts['problems'].sum())} in the ledger ({found.new_problems} "
        f"new); verifier self-check: {c.own_correct}/{c.problems} own answers accepted, "
        f"{c.perturbed_rejected}/{c.problems} perturbed rejected",
        rest="   ",
    )
    if c.own_correct != c.problems or c.perturbed_rejected != c.problems:
        raise SieveError("verifier self-check failed: see the counts above")
    return found.ledger


@option_blocks
def loop(
    nights: Annotated[int, typer.Option(help="Nights to run back to back.")] = 2,
    config: ConfigOpt = None,
    train_config: LoopTrainConfigOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates per night.")] = None,
    steps: Annotated[int | None, typer.Option(help="Training steps per night.")] = None,
    start: StartOpt = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Run again a night the ledger records as finished on this lineage (from "
            "the newest weights); without it such a night is skipped.",
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
    from pipeline.jobs.recipes import given_recipe, train_recipe
    from pipeline.store import Ledger

    if nights < 1:
        raise SieveError(f"--nights must be >= 1, got {nights}")
    check_folders(home, "checkpoints", "tensorboard")
    cfg = _loop_config(config, n)
    try:
        first = date.fromisoformat(start) if start else None
    except ValueError:
        raise SieveError(f"--start {start!r} is not a YYYY-MM-DD date") from None
    check_backend(backend, base_url)
    options = engine.options()
    folder, why = _loop_start(model, backend, home)
    given = given_recipe(train_config) if train_config is not None else None
    recipe, settings = train_recipe(folder, given, steps)
    out.print(
        f"loop: night 1 starts from {folder} ({why}); {recipe.line()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    name = str(model) if model is not None else None
    keep = sorted(cfg.sampling.model_fields_set) if config is not None else []
    run_loop(
        home, nights, cfg, settings, first, name, backend, base_url or [], options, keep, again
    )
    from flows.loop import heldout_by_revision

    with Ledger.open(home, read_only=True) as ledger:
        show(heldout_by_revision(ledger), "held-out sampled pass@1 by revision (oldest first)")


def _loop_config(config: Path | None, n: int | None) -> CurateConfig:
    """`--config FILE` (else the defaults) with `--n` as its candidates."""
    from pipeline.selection import CurateConfig, load_curate_config

    cfg = load_curate_config(config) if config is not None else CurateConfig()
    check_curate_config(cfg, config)
    if n is not None:
        if n < 1:
            raise SieveError(f"--n must be >= 1, got {n}")
        cfg = cfg.model_copy(update={"n_candidates": n})
    return cfg


def _loop_start(model: Path | None, backend: str, home: Path | None) -> tuple[Path, str]:
    """The model the first night starts from, and why; one error line when there is none."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.lineage import nightly_model
    from pipeline.store import Ledger

    local = backend != "openai"  # openai: --model may be a served name
    if model is not None and local and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    name = str(model) if model is not None else None
    if ledger_path(home).exists():
        with Ledger.open(home, read_only=True) as ledger:
            folder, why = nightly_model(ledger, name, home)
    else:
        folder, why = nightly_model(None, name, home)
    if local and not (folder / "config.json").is_file():
        raise SieveError(f"no model at {folder}: run `sieve bootstrap` first, or pass --model")
    return folder, why


def run_loop(
    home: Path | None,
    nights: int,
    config: CurateConfig,
    settings: TrainSettings,
    first: date | None,
    model: str | None,
    backend: str,
    base_urls: Sequence[str],
    engine: EngineOptions,
    keep_sampling: Sequence[str] = (),
    again: bool = False,
) -> None:
    """The nightly job `nights` times in this process: `flows.loop.loop` (one line a night);
    `keep_sampling`: the [sampling] fields the config file set (the rest follow training)."""
    from flows.loop import loop as run_nights

    start_flows(home)
    done = 0

    def say(line: str) -> None:  # once a night, when it is committed
        nonlocal done
        done += 1
        out.print(line)
        committed(f"{done} of {nights} nights done (the night under way keeps what it committed)")

    run_nights(
        home,
        nights,
        config,
        settings,
        first,
        say=say,
        model=model,
        backend=backend,
        base_urls=base_urls,
        engine=engine,
        keep_sampling=keep_sampling,
        again=again,
    )
