"""`sieve backtest`: replay prompt-selection policies over the samples a ledger (or a Parquet pool)
already holds, and compare what each spends per informative group (`pipeline.jobs.backtest`).

    sieve backtest                                  # the home's newest screened revision
    sieve backtest --pool benchmarks/results/real_model_pool.parquet \\
        --policy uniform:g=8 --policy uniform:g=4 --policy dapo:g=8,batch=32 \\
        --policy sieve:screen_g=4,refine_g=8,stage1_g=4 --png backtest.png

Nothing is sampled: a policy that would need more samples of a prompt than are stored is refused
(one line naming how many; with the default policy list it is a row saying so instead).

Test: `.venv/bin/pytest tests/test_backtest.py -q`.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import out, show
from flows.cli.options import ConfigOpt, HomeOpt
from pipeline.core.errors import SieveError


class Output(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def backtest(
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help="NAME[:key=value,...] (repeat): uniform (g), dapo (g, batch, seed), greso (g, "
            "explore, seed), speed (init, cont), pilot (pilot, g), posterior (g, batch, steps, "
            "seed, and the difficulty model's decay, cap, strength, cell_strength, floor, "
            "candidates: selects before rollout), sieve (CurateConfig fields, train_g). Default: "
            "each once with its defaults.",
        ),
    ] = None,
    pool: Annotated[
        Path | None,
        typer.Option(help="A Parquet pool of samples instead of the ledger (scored if needed)."),
    ] = None,
    revision: Annotated[
        str | None, typer.Option(help="Model revision to replay (default: newest screen run's).")
    ] = None,
    config: ConfigOpt = None,
    raw_answers: Annotated[
        bool, typer.Option(help="Score a pool's bare answers (no answer marker needed).")
    ] = False,
    format: Annotated[Output, typer.Option("--format", help="Output format.")] = Output.table,
    png: Annotated[
        Path | None,
        typer.Option(help="Write the comparison figure to this PNG file."),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Replay selection policies (uniform G, DAPO dynamic sampling, GRESO skip, SPEED-RL,
    pilot-then-commit, the posterior that selects before rollout, Sieve's two stages with
    --config) over stored samples: rollouts spent,
    informative groups, rollouts per informative group, and recall / precision of the prompts
    each trains on against those whose pass rate over all samples is in the config's band."""
    from pipeline.core.home import ledger_path
    from pipeline.core.outputs import check_output
    from pipeline.jobs import backtest as bt
    from pipeline.selection import CurateConfig, load_curate_config

    if png is not None:  # before the work: a PNG file, never the ledger nor any DuckDB database
        if str(png) == "-":
            raise SieveError("--png -: stdout carries the table; give a file for the figure")
        if png.suffix and png.suffix.lower() != ".png":
            raise SieveError(f"--png {png}: the figure is a PNG; give a file name ending in .png")
        check_output(png, ledger=ledger_path(home), label="--png ")
    cfg = load_curate_config(config) if config else CurateConfig()
    specs = [bt.Spec.parse(p) for p in policy] if policy else [bt.Spec(n, {}) for n in bt.POLICIES]
    if pool is not None:
        samples, source = bt.pool_samples(pool, marker_required=not raw_answers), str(pool)
    else:
        from pipeline.store import Ledger

        with Ledger.open(home, read_only=True) as ledger:
            samples, rev = bt.ledger_samples(ledger, revision)
        source = f"ledger revision {rev}"
    table = bt.backtest(samples, specs, cfg, strict=bool(policy))
    band = f"band [{cfg.band_low}, {cfg.band_high}]"
    prompts = samples["problem_id"].n_unique()
    if png is not None:
        title = f"{source}: {prompts} prompts, {samples.height} samples, {band}"
        bt.plot(table, png, title, ledger=ledger_path(home))
    if format is Output.csv:
        print(table.write_csv(), end="")
    elif format is Output.json:
        print(json.dumps(table.to_dicts(), indent=1))
    else:
        title = f"backtest over {source} ({prompts} prompts, {samples.height} samples; {band})"
        show(table, title)
        if png is not None:
            out.print(f"figure: {png}")
