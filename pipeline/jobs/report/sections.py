"""The report's sections: each reads the ledger and returns figures, tables and a note.

Why one function per section: each is small, independent and testable, and an empty table gives
a "no data yet" note in its own section instead of breaking the page.

Test: `.venv/bin/pytest tests/test_report.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.jobs.curate.audit import by_family
from pipeline.jobs.report import plots
from pipeline.store import Ledger
from pipeline.store.ids import curation_runs, latest_curriculum

# Training curves drawn when the trainer wrote them: (panel title, train_metrics name).
CURVES = (
    ("reward (mean)", "reward_mean"),
    ("pass rate", "pass_rate"),
    ("KL to reference", "kl"),
    ("zero-variance group share", "zero_var_share"),
    ("completion length (tokens)", "completion_len"),
)
MAX_RUNS = 12  # sampling runs with a histogram panel (most recent)
MAX_TRAIN_RUNS = 5  # training runs drawn per curve (most recent)


@dataclass
class Section:
    key: str  # anchor and figure file stem
    title: str
    intro: str = ""
    figures: list[tuple[str, bytes]] = field(default_factory=list)  # (caption, png)
    tables: list[tuple[str, pl.DataFrame]] = field(default_factory=list)  # (caption, frame)
    note: str = ""  # shown instead of content when there is nothing yet

    def empty(self, why: str) -> Section:
        self.note = f"No data yet: {why}"
        return self


def _short(revision: str | None) -> str:
    return "?" if revision is None else str(revision)[:10]


def overview(ledger: Ledger) -> Section:
    section = Section("overview", "Ledger overview", f"Ledger: {ledger.path or 'in memory'}")
    section.tables.append(("rows per table", ledger.query("table_counts")))
    return section


def pass_rate_histograms(ledger: Ledger) -> Section:
    section = Section(
        "histograms",
        "Pass-rate histograms per sampling run",
        "Prompts per pass-rate bin, one panel per run (screen = small G, refine = large G, "
        "eval = held-out). Mass at 0.0 and 0.9 (all wrong / all right) carries no GRPO signal.",
    )
    runs = ledger.query("report_run_histograms", limit=MAX_RUNS)
    if runs.height == 0:
        return section.empty("no sampling runs with rollouts (run `sieve curate` or `sieve eval`)")
    panels = [
        (f"{r['purpose']} G={r['group_size']} rev {_short(r['model_revision'])}\n{r['run_id']}",
         list(r["pass_rate_histogram"]))
        for r in runs.iter_rows(named=True)
    ]  # fmt: skip
    section.figures.append(("pass-rate histograms", plots.histograms(panels)))
    return section


def difficulty_heatmap(ledger: Ledger) -> Section:
    section = Section(
        "difficulty",
        "Measured pass rate by family × level across model revisions",
        "Pooled over every sampled (temperature > 0) run of each revision; columns in the order "
        "the revisions were first sampled.",
    )
    frame = ledger.query("report_difficulty")
    if frame.height == 0:
        return section.empty("no sampled rollouts yet")
    frame = frame.with_columns(
        pl.format("{} L{}", "family", "level").alias("row"),
        pl.format("{}. {}", "revision_order", pl.col("model_revision").str.slice(0, 10)).alias(
            "col"
        ),
    )
    rows = frame.select("family", "level", "row").unique().sort("family", "level")["row"]
    cols = frame.select("revision_order", "col").unique().sort("revision_order")["col"]
    wide = frame.pivot(on="col", index="row", values="pass_rate")
    wide = pl.DataFrame({"row": rows}).join(wide, on="row", how="left")
    values = wide.select([pl.col(c).cast(pl.Float64) for c in cols]).to_numpy()
    image = plots.heatmap(np.asarray(values, dtype=float), rows.to_list(), cols.to_list(),
                          "pass rate")  # fmt: skip
    section.figures.append(("pass rate heat map", image))
    return section


def curriculum_composition(ledger: Ledger) -> Section:
    cid = latest_curriculum(ledger)
    section = Section(
        "curriculum",
        "Curriculum composition",
        f"Latest curriculum {cid}: items per family × level, stacked by stage "
        "(stage 1 = mid-band prompts at small G, stage 2 = hard prompts at a per-prompt G).",
    )
    if cid is None:
        return section.empty("no curriculum (run `sieve curate`)")
    frame = ledger.query("report_curriculum_composition", curriculum_id=cid)
    section.tables.append(("stages", ledger.query("curriculum_stages", curriculum_id=cid)))
    if frame.height == 0:
        return section.empty(f"curriculum {cid} kept no prompts")
    frame = frame.with_columns(pl.format("{} L{}", "family", "level").alias("label"))
    labels = frame.select("family", "level", "label").unique().sort("family", "level")["label"]
    wide = frame.pivot(on="stage", index="label", values="n_items", sort_columns=True)
    wide = pl.DataFrame({"label": labels}).join(wide, on="label", how="left").fill_null(0)
    series = {f"stage {s}": wide[s].to_list() for s in wide.columns if s != "label"}
    image = plots.stacked_bars(labels.to_list(), series, "items")
    section.figures.append(("items by family × level and stage", image))
    return section


def rejections(ledger: Ledger) -> Section:
    cid = latest_curriculum(ledger)
    section = Section(
        "rejections",
        "Rejections by reason",
        f"Why candidate prompts of curriculum {cid} were left out (every one is recorded).",
    )
    if cid is None:
        return section.empty("no curriculum (run `sieve curate`)")
    frame = ledger.query("curriculum_rejections", curriculum_id=cid)
    if frame.height == 0:
        return section.empty(f"curriculum {cid} rejected nothing")
    image = plots.horizontal_bars(frame["reason"].to_list(), frame["prompts"].to_list(), "prompts")
    section.figures.append(("rejected prompts by reason", image))
    section.tables.append(("rejected prompts by reason", frame))
    return section


def verifier_audit(ledger: Ledger) -> Section:
    """math-verify's disagreement rate with Sieve's verdicts per family, latest curation."""
    cid = latest_curriculum(ledger)
    section = Section(
        "audit",
        "Verifier audit",
        f"Latest curation {cid}: a seeded sample of its screen and refine verdicts, and every "
        "verdict the fast path guessed, re-judged by math-verify on the raw completion; the rate "
        "is disagreements over the audited rollouts with both verdicts (`sieve audit latest` "
        "lists examples).",
    )
    if cid is None:
        return section.empty("no curriculum (run `sieve curate`)")
    frame = by_family(ledger, curation_runs(cid))
    if frame.height == 0:
        return section.empty(f"curation {cid} has no verifier audit rows")
    section.tables.append(("disagreement rate by family", frame))
    return section


def training_curves(ledger: Ledger) -> Section:
    section = Section(
        "training",
        "Training curves",
        f"Per-step metrics of the {MAX_TRAIN_RUNS} most recent training runs (`train_metrics`).",
    )
    names = [name for _, name in CURVES]
    frame = ledger.query("report_train_metrics", names=names, limit=MAX_TRAIN_RUNS)
    if frame.height == 0:
        return section.empty("no training metrics (run `sieve train`)")
    panels = []
    for title, name in CURVES:
        metric = frame.filter(pl.col("name") == name)
        lines = [
            (str(run), part["step"].to_list(), part["value"].to_list())
            for (run,), part in metric.group_by("train_id", maintain_order=True)
        ]
        if lines:
            panels.append((title, lines))
    section.figures.append(("training curves", plots.curves(panels)))
    return section


def selection_calibration(ledger: Ledger) -> Section:
    section = Section(
        "calibration",
        "Difficulty model calibration",
        'Training runs whose batches the difficulty model picked (selection = "posterior"), '
        "per quarter of their steps: the informative share of the picked groups it predicted "
        "(posterior predictive P(0 < k < G), metric predicted_informative) against the share "
        "that were informative (train_group_stats), and the gap (view selection_calibration; "
        f"the {MAX_TRAIN_RUNS} most recent runs).",
    )
    frame = ledger.query("selection_calibration_recent", limit=MAX_TRAIN_RUNS)
    if frame.height == 0:
        return section.empty(
            'no training run picked by the difficulty model (train with selection = "posterior")'
        )
    section.tables.append(("predicted vs realised informative share by run and quarter", frame))
    return section


def heldout_table(ledger: Ledger) -> Section:
    section = Section(
        "heldout",
        "Held-out pass@1, before and after",
        "Eval runs on held-out problems (never curated or trained on): before = the earliest "
        "evaluated model revision, after = the latest, each revision's newest run of a mode; "
        "greedy (temperature 0) and sampled runs kept apart. pass@1 as `sieve eval` prints it "
        "(the heldout_pass1 view): a verifier error counts as wrong and is counted in "
        "after_errors.",
    )
    frame = ledger.query("report_heldout")
    if frame.height == 0:
        return section.empty("no eval runs (run `sieve eval`)")
    first = frame.row(0, named=True)
    section.intro += (
        f" Before: {_short(first['before_revision'])}; after: {_short(first['after_revision'])}."
    )
    table = frame.select(
        "family", "level", "mode", "before", "after",
        (pl.col("after") - pl.col("before")).alias("change"), "after_samples", "after_errors",
    )  # fmt: skip
    section.tables.append(("held-out pass@1 by family × level", table))
    return section


SECTIONS: tuple[Callable[[Ledger], Section], ...] = (
    overview,
    pass_rate_histograms,
    difficulty_heatmap,
    curriculum_composition,
    rejections,
    verifier_audit,
    training_curves,
    selection_calibration,
    heldout_table,
)
