"""`sieve rescore`, `sieve backtest`, `sieve plan`: the samples a home already holds, replayed;
nothing is sampled.

- `rescore` judges a run's stored completions again with the current verifier. The new verdicts
  are added to `rescored_verdicts` beside the stored ones (`pipeline.jobs.curate.rescore`); the
  rollouts are never rewritten. It prints how many verdicts were re-judged, how many changed per
  family (right to wrong, wrong to right) under the current verifier version, and a few changed
  verdicts; ledger text in them prints as it is, never as Rich markup.
- `backtest` replays prompt-selection policies over the samples a ledger (or a Parquet pool)
  already holds, and compares what each spends per informative group
  (`pipeline.jobs.analysis.backtest`). A policy that would need more samples of a prompt than
  are stored is refused (one line naming how many; with the default policy list it is a row
  saying so instead).
- `plan` gives, before any training rollout, per policy (uniform, DAPO, GRESO, the posterior
  that selects before rollout, Sieve's curation) the informative share and the rollouts per
  informative group this pool and model would give, replayed on samples already stored, and
  whether curation pays on this data (`pipeline.jobs.analysis.policy_forecast`). A ledger
  without samples of the model is one `error:` line naming the small screen to run first.

    sieve backtest                                  # the home's newest screened revision
    sieve backtest --pool benchmarks/results/real_model_pool.parquet \\
        --policy uniform:g=8 --policy uniform:g=4 --policy dapo:g=8,batch=32 \\
        --policy sieve:screen_g=4,refine_g=8,stage1_g=4 --png backtest.png
    sieve plan                                   # the home's newest screened revision
    sieve plan --model data/models/smollm2-135m  # that model's newest screened revision
    sieve plan --pool benchmarks/results/real_model_pool.parquet
    sieve plan --train-config my_train.toml      # the posterior with the model that recipe names

Test: `.venv/bin/pytest tests/cli/test_rescore_cli.py tests/test_backtest.py tests/test_plan.py -q`.
"""

from __future__ import annotations

import json
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import out, show
from flows.cli.options import (
    SELECTION_MODEL,
    ConfigOpt,
    HomeOpt,
    OptionBlock,
    option_blocks,
    seed_option,
)

if TYPE_CHECKING:
    from pipeline.jobs.analysis.policy_forecast import Plan


def rescore(
    target: Annotated[
        str, typer.Argument(help="A sampling run id, a curriculum id, or 'latest'.")
    ] = "latest",
    examples: Annotated[int, typer.Option(help="Changed verdicts to list.")] = 5,
    home: HomeOpt = None,
) -> None:
    """Judge the stored completions of a run again with the current verifier and keep the new
    verdicts beside the old ones (`latest`: the newest curriculum's screen and refine runs;
    table rescored_verdicts, view verdict_changes). The rollouts are never rewritten; a second
    rescore under the same verifier version adds nothing."""
    from pipeline.jobs.curate.rescore import rescore_home

    done, shown = rescore_home(home, target, examples)
    columns = ("rescored", "changed", "correct_to_wrong", "wrong_to_correct", "other")
    stored, changed, worse, better, other = (int(n) for n in done.changes[columns].sum().row(0))
    errors = f", {other} to or from a verifier error" if other else ""
    out.print(
        f"{done.label} ({', '.join(done.runs)}): {done.judged} verdicts "
        f"re-judged under verifier {done.version} ({stored - done.judged} rescored "
        f"under it before); {changed} of {stored} changed: {worse} correct -> wrong, "
        f"{better} wrong -> correct{errors}"
    )
    show(done.changes, f"verdict changes by family under {done.version}")
    if examples:
        show(shown, "example changed verdicts (first 200 characters of the completion)")


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
    from pipeline.jobs.analysis.backtest import run_backtest

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
    from pipeline.jobs.analysis.policy_forecast import plan_for

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
