"""What the long commands print from the summaries their jobs return: a night's line
(`sieve loop`), held-out pass@1 before -> after (`sieve train`, `sieve demo --wide`) and the
demo's summary, led by what the night's curation bought. The jobs (`flows.loop`, `flows.train`)
return data; the words are chosen here.

Test: `pytest tests/test_demo.py tests/cli/test_fit.py tests/flows/test_loop.py`.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from flows.loop import DemoRun
    from pipeline.jobs.analysis.backtest_arms import CurationBacktest

WIDTH = 80  # every line the demo's summary prints fits this many columns
MOVED_SHOWN = 12  # cells listed by name; the rest are counted (all: `sieve demo --wide`)


def night_line(index: int, result: dict[str, Any]) -> str:
    """One line for a night `flows.loop.loop` ran (or skipped as done already)."""
    done = result.get("done")
    if done is not None:
        trained = f"training {done['train_id']}" if done["train_id"] else "nothing trained"
        return (
            f"night {index} ({result['night']}): done already (curriculum "
            f"{done['curriculum_id']}, {trained}, weights {done['final_revision']}): not "
            "run again; --again runs it again from the newest weights"
        )
    cur = result["curate"]
    kept = sum(cur["kept"].values())
    spent = sum(cur["rollouts_spent"].values())
    text = f"night {index} ({result['night']}): curated {kept} prompts for {spent} rollouts"
    train = result.get("train")
    if train is None:
        return text + "; nothing to train on"
    b, a = train["heldout_before"]["sampled"], train["heldout_after"]["sampled"]
    return (
        f"{text}; trained {train['steps']} steps ({train['rollouts']} rollouts); "
        f"held-out sampled pass@1 {pct(b)} -> {pct(a)}; new revision {train['final_revision']}"
    )


def pct(x: float | None) -> str:
    """A pass rate as a percentage, `n/a` when there is none."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def before_after(train: dict[str, Any] | None) -> pl.DataFrame:
    """Held-out pass@1 before and after, by family × level, from a train flow's summary (its
    tables come from the `heldout_pass1` view; `errors_*`: verifier errors, counted as wrong)."""
    if train is None:
        return pl.DataFrame()
    before = pl.DataFrame(train["before"])
    after = pl.DataFrame(train["after"])
    if before.is_empty() or after.is_empty():
        return pl.DataFrame()
    names = [c for c in ("greedy", "sampled", "errors") if c in before.columns and c in after]
    cells = ["family", "level"] + (["problems"] if "problems" in before.columns else [])
    return (
        before.select(*cells, *names)
        .join(after.select("family", "level", *names), on=["family", "level"], suffix="_after")
        .rename({c: f"{c}_before" for c in names})
        .with_columns((pl.col("sampled_after") - pl.col("sampled_before")).alias("sampled_gain"))
        .sort("family", "level")
    )


def bought_lines(replay: CurationBacktest | None, note: str | None = None) -> list[str]:
    """What the night's curation bought, as lines of at most `WIDTH` columns: the informative
    share of Sieve's training groups against uniform groups on every candidate, and rollouts
    per informative group (training only, and with the curation's rollouts charged)."""
    head = "What the night's curation bought, on its own stored samples:"
    if replay is None:
        return [head, *wrap(f"not replayed: {note or 'no curation'}", "  ", "    ")]
    s, u, g = replay.sieve, replay.uniform, replay.group_size
    share_s, share_u = s.report["informative_share"], u.report["informative_share"]
    kept, curation = s.report["kept"], s.report["curation_rollouts"]
    train_per = s.report["rollouts_per_informative_group_training"]
    with_curation = s.report["rollouts_per_informative_group_with_curation"]
    uniform_per = u.report["rollouts_per_informative_group"]
    even = s.report[f"epochs_to_break_even_vs_uniform_g{g}"]
    intro = (
        f"Sieve kept {kept} of {replay.candidates} candidates (screened on "
        f"{s.report['screen_group_size']} samples each, survivors on {replay.selected_on}); its "
        f"groups of {g} are judged on samples selection never saw, uniform's on the first {g} "
        "of every candidate."
    )
    rows = [
        ("", "Sieve", "uniform"),
        ("informative groups (answers disagree)", pct(share_s), pct(share_u)),
        ("  informative / groups", f"{s.informative_groups}/{kept}",
         f"{u.informative_groups}/{replay.candidates}"),
        ("rollouts per informative group", number(train_per), number(uniform_per)),
        (f"  counting curation ({curation} replayed)", number(with_curation), ""),
    ]  # fmt: skip
    lines = [head, *wrap(intro, "  ", "  ")]
    lines += [f"  {a:<40}{b:>9}{c:>9}".rstrip() for a, b, c in rows]
    if even is not None:
        verdict = (
            f"With curation paid once, Sieve is the cheaper per informative group after "
            f"{even:.1f} epochs over its {kept} kept prompts."
        )
    elif not s.informative_groups:
        verdict = "Sieve's training groups found no informative group on these samples."
    elif uniform_per is None:
        verdict = "Uniform draws found no informative group on these samples."
    else:
        verdict = "Sieve's training groups cost no less per informative group than uniform's."
    return [*lines, *wrap(verdict, "  ", "  ")]


def moved_lines(table: pl.DataFrame, shown: int = MOVED_SHOWN) -> list[str]:
    """The held-out cells whose pass@1 (sampled or greedy) moved, before -> after, the largest
    change of sampled pass@1 first, as lines of at most `WIDTH` columns."""
    if table.is_empty():
        return ["Held-out pass@1: not evaluated (nothing was trained)."]
    measures = [m for m in ("sampled", "greedy") if f"{m}_before" in table.columns]
    changed = pl.any_horizontal(
        (pl.col(f"{m}_after") - pl.col(f"{m}_before")).abs().fill_null(0) > 1e-12 for m in measures
    )
    moved = table.filter(changed).sort(
        pl.col("sampled_gain").abs(),
        "family",
        "level",
        descending=[True, False, False],
        nulls_last=True,
    )
    head = f"Held-out cells whose pass@1 moved: {moved.height} of {table.height}"
    if moved.is_empty():
        return [head + " (sieve demo --wide shows every cell)."]
    cells = [f"{f} {lv}" for f, lv in zip(moved["family"], moved["level"], strict=True)]
    w = min(max(len("cell"), *map(len, cells)), 24)
    has_n = "problems" in table.columns
    header = f"  {'cell':<{w}}" + ("     n" if has_n else "")
    header += "".join(f"  {m:<17}" for m in measures)
    lines = [head + ", before -> after:", header.rstrip()]
    for i, row in enumerate(moved.head(shown).iter_rows(named=True)):
        line = f"  {cells[i][:w]:<{w}}" + (f"{row['problems']:>6}" if has_n else "")
        line += "".join(
            f"  {pct(row[f'{m}_before']) + ' -> ' + pct(row[f'{m}_after']):<17}" for m in measures
        )
        lines.append(line.rstrip())
    if moved.height > shown:
        lines.append(f"  and {moved.height - shown} more (sieve demo --wide shows every cell)")
    return lines


def headline_line(night: dict[str, Any]) -> str | None:
    """All held-out cells together, before -> after (the night's own line says it too)."""
    train = night.get("train")
    if not train:
        return None
    b, a = train["heldout_before"]["sampled"], train["heldout_after"]["sampled"]
    return f"All held-out cells together: sampled pass@1 {pct(b)} -> {pct(a)}."


def demo_summary(run: DemoRun) -> list[str]:
    """The demo's summary, led by what the night's curation bought: the replay, then the cells
    whose held-out pass@1 moved, then all cells together. Every line fits `WIDTH` columns."""
    lines = bought_lines(run.bought, run.bought_note)
    lines += ["", *moved_lines(before_after(run.night.get("train")))]
    headline = headline_line(run.night)
    return lines + ([headline] if headline else [])


def wrap(text: str, first: str = "", rest: str = "  ", width: int = WIDTH) -> list[str]:
    """`text` as lines of at most `width` columns (words longer than a line are cut)."""
    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    ) or [first.rstrip()]


def number(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f}"
