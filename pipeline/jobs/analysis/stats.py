"""What the ledger holds, as tables to read: `sieve stats` (its summary views, the next
curation's allocation, the difficulty model and its calibration on the runs it picked for,
curricula, held-out pass@1 by revision) and `sieve curriculum show` (one curriculum's stages,
rejections and top items). Each opens the ledger read-only once; the CLI prints the tables.

Test: `pytest tests/cli/test_cli.py tests/store/test_heldout_view.py
tests/store/test_selection_calibration.py`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.store import Ledger, load_query
from pipeline.store.ids import resolve_curriculum

Titled = list[tuple[pl.DataFrame, str]]  # tables in the order they are shown, with titles

DIFFICULTY_MODEL = (
    "SELECT c.cell, c.groups, round(c.weighted_samples, 1) AS weighted_samples, "
    "round(c.cell_yield, 3) AS cell_yield, count(p.problem_id) AS prompts, "
    "count(p.problem_id) FILTER (WHERE p.groups > 0) AS seen, "
    "round(avg(p.mean * (1 - p.mean)), 3) AS mean_learnability "
    "FROM cell_posterior c LEFT JOIN prompt_posterior p USING (cell) "
    "GROUP BY ALL ORDER BY c.cell"
)

CALIBRATION_RUNS = 3  # training runs picked by the difficulty model whose calibration is shown


def ledger_stats(home: str | Path | None) -> tuple[Path | None, Titled]:
    """The ledger's path and its summary tables; the allocation, evidence and difficulty model
    tables only where the ledger has data for them."""
    from pipeline.jobs.curate.curation import allocation, load_history
    from pipeline.selection import CurateConfig

    with Ledger.open(home, read_only=True) as ledger:
        tables: Titled = [
            (ledger.query("table_counts"), "tables"),
            (ledger.query("problem_counts"), "problems by family x level"),
            (
                ledger.query("difficulty_latest"),
                "measured pass rate by family x level, newest revisions",
            ),
            (ledger.query("runs_latest"), "latest sampling runs"),
        ]
        cells = allocation(CurateConfig(), load_history(ledger, []))
        if cells is not None:
            tables.append((
                cells,
                "informative groups by family x level (recent revisions) and where the next "
                "curation's candidates go (default config)",
            ))  # fmt: skip
        evidence = ledger.query("cell_evidence")
        if evidence.height:
            tables.append((
                evidence,
                "curation vs training evidence by family x level (groups informative, pass rate)",
            ))  # fmt: skip
        model = ledger.sql(DIFFICULTY_MODEL)
        if model.height:
            tables.append((
                model,
                "difficulty model by family x level (views cell_posterior, prompt_posterior: "
                "decayed evidence, yield, learnability p(1-p) at the posterior mean)",
            ))  # fmt: skip
        calibration = ledger.query("selection_calibration_recent", limit=CALIBRATION_RUNS)
        if calibration.height:
            tables.append((
                calibration,
                "difficulty model calibration by run and quarter (view selection_calibration: "
                "predicted vs realised informative share of the groups it picked)",
            ))  # fmt: skip
        tables += [
            (ledger.sql("SELECT * FROM curriculum_summary"), "curricula"),
            (ledger.sql("SELECT * FROM rejection_summary ORDER BY ALL"), "rejections by reason"),
            (heldout_by_revision(ledger), "held-out sampled pass@1 by revision (oldest first)"),
        ]
        return ledger.path, tables


def curriculum_tables(home: str | Path | None, curriculum: str, limit: int) -> Titled:
    """`curriculum` ('latest' or an id): its stages, rejections by reason and `limit` top items."""
    with Ledger.open(home, read_only=True) as ledger:
        cid = resolve_curriculum(ledger, curriculum)
        return [
            (ledger.query("curriculum_stages", curriculum_id=cid), f"curriculum {cid}"),
            (ledger.query("curriculum_rejections", curriculum_id=cid), "rejected by reason"),
            (ledger.query("curriculum_items_top", curriculum_id=cid, limit=limit), "items"),
        ]


def heldout_table(home: str | Path | None) -> pl.DataFrame:
    """`heldout_by_revision` of the ledger of `home`."""
    with Ledger.open(home, read_only=True) as ledger:
        return heldout_by_revision(ledger)


def heldout_by_revision(ledger: Ledger) -> pl.DataFrame:
    """Held-out sampled pass@1 by family × level, one column per evaluated revision (in the
    order they were first evaluated)."""
    frame = ledger.sql(load_query("heldout_by_revision"))
    if frame.is_empty():
        return frame
    order = (
        frame.group_by("model_revision")
        .agg(pl.col("first_eval").min())
        .sort("first_eval")["model_revision"]
        .to_list()
    )
    wide = frame.pivot(on="model_revision", index=["family", "level"], values="sampled").sort(
        "family", "level"
    )
    return wide.select("family", "level", *[c for c in order if c in wide.columns])
