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
    from pipeline.jobs.backtest import run_backtest

    run = run_backtest(
        home, policy, pool=pool, revision=revision, config=config, raw_answers=raw_answers, png=png
    )
    if format is Output.csv:
        print(run.table.write_csv(), end="")
    elif format is Output.json:
        print(json.dumps(run.table.to_dicts(), indent=1))
    else:
        title = f"backtest over {run.source} ({run.prompts} prompts, {run.samples} samples; "
        show(run.table, title + f"{run.band})")
        if run.png is not None:
            out.print(f"figure: {run.png}")
