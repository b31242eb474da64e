"""`sieve plan`: before any training rollout, per policy (uniform, DAPO, GRESO, the posterior
that selects before rollout, Sieve's curation) the informative share and the rollouts per
informative group this pool and model would give, replayed on samples already stored, and
whether curation pays on this data (`pipeline.jobs.plan`).

    sieve plan                                   # the home's newest screened revision
    sieve plan --model data/models/smollm2-135m  # that model's newest screened revision
    sieve plan --pool benchmarks/results/real_model_pool.parquet

Nothing is sampled. A ledger without samples of the model is one `error:` line naming the
small screen to run first.

Test: `.venv/bin/pytest tests/test_plan.py -q`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import out
from flows.cli.options import ConfigOpt, HomeOpt
from pipeline.core.errors import SieveError


def plan(
    pool: Annotated[
        Path | None,
        typer.Option(
            help="A Parquet pool of samples (as sieve backtest reads) instead of the ledger."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Whose samples: a model revision, or a model folder or name as curation "
            "recorded it (its newest screened revision); in a --pool, its model_revision rows. "
            "Default: the newest screen run's revision (a pool: every row)."
        ),
    ] = None,
    g: Annotated[
        int | None,
        typer.Option(
            "--g",
            help="Training group size of every policy (default: half the fewest samples a "
            "prompt holds, 2 to 8).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the DAPO, GRESO and posterior draws.")] = 0,
    config: ConfigOpt = None,
    raw_answers: Annotated[
        bool, typer.Option(help="Score a pool's bare answers (no answer marker needed).")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    home: HomeOpt = None,
) -> None:
    """Predict, before any training rollout, what each way of choosing prompts gets from this
    pool and model: informative share and rollouts per informative group (every rollout
    counted) for uniform, DAPO, GRESO, the posterior and Sieve's curation, and whether curation
    pays here against uniform."""
    from pipeline.jobs import backtest as bt
    from pipeline.jobs import plan as pl_plan
    from pipeline.selection import CurateConfig, load_curate_config

    if g is not None and g < 2:
        raise SieveError(f"--g {g}: a group needs at least 2 samples to disagree")
    cfg = load_curate_config(config) if config else None
    if pool is not None:
        samples = bt.pool_samples(pool, marker_required=not raw_answers)
        samples = pl_plan.pool_for_model(samples, pool, model)
        source = f"pool {pool}" + (f" (model {model})" if model else "")
    else:
        from pipeline.store import Ledger

        with Ledger.open(home, read_only=True) as ledger:
            samples, source, stored = pl_plan.ledger_pool(ledger, model)
        cfg = cfg or stored
    result = pl_plan.plan(samples, cfg or CurateConfig(), g=g, seed=seed, source=source)
    if as_json:
        rows = [r.as_dict() for r in result.rows]
        print(
            json.dumps(
                {
                    "source": source,
                    "group_size": result.g,
                    "rows": rows,
                    "verdict": pl_plan.verdict(result.rows),
                },
                indent=1,
            )
        )
        return
    for line in pl_plan.plan_lines(result):
        out.print(line, highlight=False, markup=False)
