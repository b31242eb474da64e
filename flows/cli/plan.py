"""`sieve plan`: before any training rollout, per policy (uniform, DAPO, GRESO, the posterior
that selects before rollout, Sieve's curation) the informative share and the rollouts per
informative group this pool and model would give, replayed on samples already stored, and
whether curation pays on this data (`pipeline.jobs.plan`).

    sieve plan                                   # the home's newest screened revision
    sieve plan --model data/models/smollm2-135m  # that model's newest screened revision
    sieve plan --pool benchmarks/results/real_model_pool.parquet
    sieve plan --train-config my_train.toml      # the posterior with the model that recipe names

Nothing is sampled. A ledger without samples of the model is one `error:` line naming the
small screen to run first.

Test: `.venv/bin/pytest tests/test_plan.py -q`.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import out
from flows.cli.options import (
    SELECTION_MODEL,
    ConfigOpt,
    HomeOpt,
    OptionBlock,
    option_blocks,
    seed_option,
)

if TYPE_CHECKING:
    from pipeline.jobs.plan import Plan


@option_blocks
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
    seed: Annotated[int, seed_option("Seed of the DAPO, GRESO and posterior draws.")] = 0,
    config: ConfigOpt = None,
    train_config: Annotated[
        Path | None,
        typer.Option(
            help="TrainSettings TOML file (sieve train --config): the posterior picks with the "
            "difficulty model it names (default the recipe for a --model folder, else the "
            "static model)."
        ),
    ] = None,
    selection: OptionBlock = SELECTION_MODEL,
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
    from pipeline.jobs.plan import plan_for

    result = plan_for(
        home, pool, model, g=g, seed=seed, config=config, raw_answers=raw_answers,
        train_config=train_config, selection=selection.overrides(),
    )  # fmt: skip
    if as_json:
        rows = [r.as_dict() for r in result.rows]
        payload = {
            "source": result.source,
            "group_size": result.g,
            "selection_model": result.select.model,
            "selection_score": result.select.score,
            "rows": rows,
            "verdict": result.verdict,
        }
        print(json.dumps(payload, indent=1))
        return
    for line in plan_lines(result):
        out.print(line, highlight=False, markup=False)


WIDTH = 80  # every line `plan_lines` prints fits this many columns


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def plan_lines(p: Plan) -> list[str]:
    """The plan as `sieve plan` prints it: a header, one row per policy, the verdict; every line
    at most `WIDTH` columns."""
    head = (
        f"Plan over {p.source}: {p.prompts:,} prompts, {p.samples:,} samples ({p.depth} or more "
        f"a prompt); every policy trains groups of G = {p.g}; DAPO, GRESO and the posterior are "
        f"averaged over {p.replays} seeds. Rollouts per informative group count every rollout, "
        "those sampled only to decide too."
    )
    lines = textwrap.wrap(head, WIDTH, break_on_hyphens=False)
    lines += [
        "",
        f"{'policy':<30}{'training':>9}{'informative':>13}{'rollouts per':>14}{'rollouts':>11}",
        f"{'':<30}{'groups':>9}{'share':>13}{'informative':>14}{'deciding':>11}",
    ]
    for r in p.rows:
        label = r.label if len(r.label) <= 29 else r.label[:28] + "…"
        if r.note:
            lines += textwrap.wrap(
                f"{label:<30}{r.note}", WIDTH, subsequent_indent=" " * 30, break_on_hyphens=False
            )
            continue
        share = _num(None if r.share is None else 100 * r.share, ".1f")
        deciding = _num(None if r.deciding_share is None else 100 * r.deciding_share, ".0f")
        lines.append(
            f"{label:<30}{r.groups or 0:>9,.0f}{share + ' %':>13}"
            f"{_num(r.per_informative, ',.1f'):>14}{deciding + ' %':>11}"
        )
    return [*lines, "", *textwrap.wrap(p.verdict, WIDTH, break_on_hyphens=False)]
