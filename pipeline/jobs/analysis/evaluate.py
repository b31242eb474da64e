"""Held-out evaluation by family x level: greedy pass@1 and pass@1 over k samples.

The held-out set is drawn from a fixed evaluation seed over the whole generator mix, keeping only
problems whose hash puts them in the held-out split, so every revision is measured on the same
problems and none of them is ever used for curation or training. Both runs are written to the
ledger (purpose `eval`); `prompt_stats` pools only the sampled one (greedy runs are excluded).

The numbers are read back from the ledger's `heldout_pass1` view (migration 0005), the one
definition of held-out pass@1 that the CLI, the flows, the report and the benchmarks share:
greedy means a run recorded at temperature 0, and a verifier error counts as a wrong answer
(shown again in `errors`). A temperature of 0 records only the greedy run (a "sampled" run at
temperature 0 would be a second greedy one).

Test: `pytest tests/policy/test_evaluate.py tests/store/test_heldout_view.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from pipeline.core.hooks import Progress, report
from pipeline.jobs.curate.rollouts import RunInfo, record_run
from pipeline.problems import FAMILIES, family_levels, generate, parse_levels
from pipeline.sampling.base import Sampler
from pipeline.sampling.budget import EvalConfig
from pipeline.store import Ledger

# what to evaluate: families (every level), or family -> levels ("1-2", or a list)
Cells = Sequence[str] | Mapping[str, str | Sequence[int]]

DEFAULT_EVAL = EvalConfig()
EVAL_SEED = 20_261_130  # fixed: every revision is evaluated on the same held-out problems


def heldout_set(per_level: int, families: Cells | None = None) -> pl.DataFrame:
    """Up to `per_level` held-out problems for every family x level: `families` a list (every
    level of each), a table family -> levels ("1-2" or a list: those levels alone; the same
    problems as the whole family's set filtered to them), or None (the whole mix).

    Each row is a distinct problem. Two levels of a family can draw the same one (at per_level
    12, reasoning-gym's rg:products levels 1 and 2 share 6 questions; at 16, word levels 5 and 8
    share one): it is held out once, in the lowest level that draws it, which is where the
    ledger (keyed by problem id, first row kept) stored it anyway, so the rows are the problems
    an evaluation scores. A cut selection leaves it out of the later level too, and a problem
    two families draw stays with the first family. Nothing else moves: no cell is refilled."""
    frames = []
    held: set[str] = set()  # ids of the rows taken so far
    for family, levels in cells(families):
        below = [lv for lv in family_levels(family) if lv < max(levels)]
        draws = {lv: _draw(family, lv, per_level) for lv in sorted({*below, *levels})}
        for level in levels:
            earlier = {pid for lv, d in draws.items() if lv < level for pid in d["problem_id"]}
            rows = draws[level].filter(~pl.col("problem_id").is_in(earlier | held))
            held.update(rows["problem_id"])
            frames.append(rows)
    return pl.concat(frames)


def _draw(family: str, level: int, per_level: int) -> pl.DataFrame:
    """The first `per_level` held-out problems of one family x level at the evaluation seed."""
    pool = generate(family, [level], per_level * 15, EVAL_SEED)
    return pool.filter(pl.col("split") == "heldout").head(per_level)


def cells(families: Cells | None) -> list[tuple[str, list[int]]]:
    """(family, levels) pairs of an eval selection (see `heldout_set`); SieveError on an unknown
    family or level."""
    if families is None:
        return [(f, list(family_levels(f))) for f in FAMILIES]
    if isinstance(families, Mapping):
        specs = {f: v if isinstance(v, str) else ",".join(map(str, v)) for f, v in families.items()}
        return [(f, parse_levels(spec, f)) for f, spec in specs.items()]
    return [(f, list(family_levels(f))) for f in families]


def overall(table: pl.DataFrame, column: str) -> float | None:
    """Pass@1 of a by-level column over all its problems (levels weighted by their problem
    count): the `pass1` that `heldout_runs` gives the run. None where the column is empty."""
    known = table.filter(pl.col(column).is_not_null()) if column in table.columns else table[:0]
    if known.is_empty():
        return None
    n = known["problems"].cast(pl.Float64)
    return float((known[column] * n).sum()) / float(n.sum())


def runs_table(ledger: Ledger, run_ids: list[str]) -> pl.DataFrame:
    """Held-out pass@1 by family x level of these eval runs (one greedy and/or one sampled):
    family, level, problems, greedy, sampled, errors (verifier errors, counted as wrong)."""
    return ledger.query("eval_by_level", runs=run_ids)


def revision_table(ledger: Ledger, revision: str) -> pl.DataFrame:
    """`runs_table` of a revision's newest greedy and newest sampled eval run."""
    rows = ledger.run(
        "SELECT run_id FROM heldout_runs WHERE model_revision = $r AND latest", {"r": revision}
    )
    return runs_table(ledger, [r for (r,) in rows])


def evaluate(
    sampler: Sampler,
    ledger: Ledger,
    model_revision: str,
    prompts_of: dict[str, str],
    cfg: EvalConfig = DEFAULT_EVAL,
    problems: pl.DataFrame | None = None,
    prompt_format: str = "raw",
    progress: Progress | None = None,
) -> pl.DataFrame:
    """Run greedy + sampled evaluation, record both runs; return `runs_table` of the two.

    `prompts_of` maps question -> rendered prompt in `prompt_format` (raw | chat), which also
    sets the default budget and whether answers need a marker. `progress` gets one event per
    recorded mode.
    """
    problems = problems if problems is not None else heldout_set(cfg.per_level)
    ledger.write("problems", problems)
    prompts = [prompts_of[q] for q in problems["question"]]
    sampling = cfg.sampling
    modes = [(1, True)] + ([(cfg.samples, False)] if sampling.sampling_temperature > 0 else [])
    run_ids = []
    for done, (n, greedy) in enumerate(modes, start=1):
        params = sampling.params(prompt_format, cfg.seed, greedy=greedy)
        groups = sampler.sample(prompts, n, params)
        info = RunInfo(
            "eval", sampler.model_name, model_revision, sampler.backend, n, params,
            prompt_format=prompt_format,
        )  # fmt: skip
        info, _ = record_run(ledger, info, problems, groups)
        run_ids.append(info.run_id)
        report(progress, "eval", "greedy" if greedy else "sampled", done, len(modes))
    return runs_table(ledger, run_ids)
