"""The difficulty model's evidence in the ledger: the groups it observes (curation screens and
refines at T > 0, trained groups) each at its update on the lineage clock, a revision's start
prior per cell, and the model over the whole ledger (the Python twin of the views of migration
0016). The rows come from the ledger's methods (`pipeline.store.Ledger`: `train_run_bases`,
`checkpoint_revisions`, `curation_groups`, `training_groups`, `train_prompts`, `cell_prior`);
the model itself is `pipeline.selection.posterior`'s.

The lineage clock: a training run starts at the clock of the checkpoint its base revision is
(that checkpoint's run's start + its step; 0 for weights no checkpoint holds), and its step s
is at start + s; a curation group is at the clock of the revision that sampled it.

Test: `.venv/bin/pytest tests/selection/test_posterior_views.py
tests/selection/test_posterior_learning.py -q`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import polars as pl

from pipeline.selection.posterior import (
    OBSERVATION_SCHEMA,
    CellPrior,
    PosteriorConfig,
    cell_posterior,
    prompt_posterior,
)

DEFAULT = PosteriorConfig()  # the static model's defaults, as the views of migration 0016 use


class LedgerEvidence(Protocol):
    """The reads of `pipeline.store.Ledger` this module makes (selection sits below the store in
    pipeline's layers, so it names them here rather than importing the class)."""

    def train_run_bases(self) -> pl.DataFrame: ...
    def checkpoint_revisions(self) -> pl.DataFrame: ...
    def curation_groups(
        self, revisions: Sequence[str] | None = None, exclude: Sequence[str] = ()
    ) -> pl.DataFrame: ...
    def training_groups(self, runs: Sequence[str] | None = None) -> pl.DataFrame: ...
    def train_prompts(self) -> pl.DataFrame: ...
    def cell_prior(self, revision: str) -> pl.DataFrame: ...


def lineage_clock(runs: pl.DataFrame, checkpoints: pl.DataFrame) -> dict[str, int]:
    """The update clock each training run starts at (`train_id` → clock): the clock of the
    checkpoint its base revision is (its run's start + its step), 0 for weights no checkpoint
    holds. `runs`: train_id, base_revision; `checkpoints`: train_id, step, model_revision."""
    base = dict(zip(runs["train_id"], runs["base_revision"], strict=True))
    made: dict[str, list[tuple[str, int]]] = {}
    for tid, step, rev in checkpoints.select("train_id", "step", "model_revision").iter_rows():
        made.setdefault(rev, []).append((tid, int(step)))
    start: dict[str, int] = {}
    frontier = [t for t, b in base.items() if b is None or b not in made]
    for t in frontier:
        start[t] = 0
    for _ in range(1000):  # the lineage is a forest; depth bounds a malformed one
        nxt: dict[str, int] = {}
        for t, b in base.items():
            if b is None or b not in made:
                continue
            got = [start[p] + s for p, s in made[b] if p in start]
            if got and min(got) < start.get(t, 1 << 62):
                nxt[t] = min(got)
        if not nxt:
            break
        start.update(nxt)
    return start


def ledger_observations(ledger: LedgerEvidence) -> tuple[pl.DataFrame, int]:
    """(observations, now) of the whole ledger on the lineage clock (the Python twin of the
    views posterior_observations / posterior_clock of migration 0016)."""
    runs, ckpts = ledger.train_run_bases(), ledger.checkpoint_revisions()
    start = lineage_clock(runs, ckpts)
    clock: dict[str, int] = {}
    for tid, step, rev in ckpts.iter_rows():
        if tid in start:
            c = start[tid] + int(step)
            clock[rev] = min(c, clock.get(rev, c))
    cur, trn = ledger.curation_groups(), ledger.training_groups()
    rev_clock = pl.DataFrame(
        {"revision": list(clock), "update": list(clock.values())},
        schema={"revision": pl.String, "update": pl.Int64},
    )
    run_start = pl.DataFrame(
        {"train_id": list(start), "start": list(start.values())},
        schema={"train_id": pl.String, "start": pl.Int64},
    )
    obs = pl.concat(
        [
            cur.join(rev_clock, on="revision", how="left")
            .with_columns(pl.col("update").fill_null(0))
            .select(list(OBSERVATION_SCHEMA)),
            trn.join(run_start, on="train_id", how="left")
            .with_columns(update=pl.col("start").fill_null(0) + pl.col("step").cast(pl.Int64))
            .select(list(OBSERVATION_SCHEMA)),
        ]
    ).cast(OBSERVATION_SCHEMA)
    last = [int(obs.select(pl.col("update").max()).item())] if obs.height else []
    marks = [0, *clock.values(), *last]
    return obs, max(marks)


def lineage_observations(
    ledger: LedgerEvidence,
    base_revision: str,
    train_id: str | None = None,
    exclude: Sequence[str] = (),
    siblings: bool = True,
    apart: Sequence[str] = (),
) -> tuple[pl.DataFrame, int]:
    """(observations, clock of `base_revision`): the evidence a training run that starts from
    `base_revision` has about its prompts — every curation group (screen, refine, T > 0) sampled
    by those weights or by an ancestor of them, and every training group of the runs that led
    to them (up to the step whose checkpoint the lineage continued from) and of `train_id`
    itself (a resumed run), each at its update on the lineage clock (`lineage_clock`). With
    `siblings`, also what the runs trained from `base_revision` (or from a checkpoint descended
    from it) saw: an earlier run from the same weights, a sweep's other members — their
    training groups and the curation groups their checkpoints sampled, each at its own clock,
    so it counts once this run has trained as many updates (the posterior reads no group of a
    later update than now). Another model's lineage in the same home adds nothing. The run's
    step s is update clock + s. `exclude`: curation runs left out (a curation deciding from
    the evidence before its own); `apart`: training runs left out of the siblings (a caller
    that holds a run's own groups itself, step by step)."""
    runs, ckpts = ledger.train_run_bases(), ledger.checkpoint_revisions()
    start = lineage_clock(runs, ckpts)
    base_of = dict(zip(runs["train_id"], runs["base_revision"], strict=True))
    made: dict[str, tuple[str, int]] = {}
    for tid, step, rev in ckpts.select("train_id", "step", "model_revision").iter_rows():
        if tid not in start:
            continue
        if rev not in made or start[tid] + step < checkpoint_clock(made[rev], start):
            made[rev] = (tid, int(step))
    revs: dict[str, int] = {}
    upto: dict[str, int] = {}
    at: str | None = base_revision
    while at is not None and at not in revs:
        hop = made.get(at)
        revs[at] = checkpoint_clock(hop, start) if hop else 0
        if hop is None:
            break
        upto[hop[0]] = max(hop[1], upto.get(hop[0], -1))
        at = base_of.get(hop[0])
    now = revs[base_revision]
    if siblings:  # the runs descended from the base: every group, at its own clock
        skip = {train_id, *apart} - {None}
        _add_descendants(base_revision, skip, base_of, ckpts, made, start, revs, upto)
    if train_id is not None:
        upto[train_id] = 1 << 62
        start.setdefault(train_id, now)
    cur = ledger.curation_groups(list(revs), exclude)
    trn = ledger.training_groups(list(upto))
    limits = pl.DataFrame(
        {
            "train_id": list(upto),
            "_upto": list(upto.values()),
            "_start": [start.get(t, 0) for t in upto],
        },
        schema={"train_id": pl.String, "_upto": pl.Int64, "_start": pl.Int64},
    )
    rev_clock = pl.DataFrame(
        {"revision": list(revs), "update": list(revs.values())},
        schema={"revision": pl.String, "update": pl.Int64},
    )
    obs = pl.concat(
        [
            cur.join(rev_clock, on="revision", how="left").select(list(OBSERVATION_SCHEMA)),
            trn.join(limits, on="train_id", how="left")
            .filter(pl.col("step") <= pl.col("_upto"))
            .with_columns(update=pl.col("_start") + pl.col("step").cast(pl.Int64))
            .select(list(OBSERVATION_SCHEMA)),
        ]
    ).cast(OBSERVATION_SCHEMA)
    return obs.sort("update", "problem_id", maintain_order=True), now


def _add_descendants(
    base_revision: str,
    skip: set[str | None],
    base_of: Mapping[str, Any],
    ckpts: pl.DataFrame,
    made: Mapping[str, tuple[str, int]],
    start: Mapping[str, int],
    revs: dict[str, int],
    upto: dict[str, int],
) -> None:
    """Every run trained from `base_revision` or from a checkpoint descended from it (but those
    in `skip`) into `upto` with all its steps, and the revisions its checkpoints hold into
    `revs` at their clock (their curation groups count too)."""
    kids: dict[str, list[str]] = {}
    for tid, b in base_of.items():
        kids.setdefault(str(b), []).append(tid)
    made_by: dict[str, list[str]] = {}
    for tid, _step, rev in ckpts.select("train_id", "step", "model_revision").iter_rows():
        made_by.setdefault(tid, []).append(rev)
    frontier = [base_revision]
    while frontier:
        for tid in kids.get(frontier.pop(), []):
            if tid in skip or tid in upto or tid not in start:
                continue
            upto[tid] = 1 << 62
            for rev in made_by.get(tid, []):
                if rev not in revs and rev in made:
                    revs[rev] = checkpoint_clock(made[rev], start)
                    frontier.append(rev)


def ledger_cell_prior(
    ledger: LedgerEvidence, revision: str, samples: float | None = None, update: int = 0
) -> CellPrior | None:
    """The start prior of a training run from the weights `revision`: per cell, k of n samples
    those weights were sampled to pass in the ledger (`Ledger.cell_prior`: every
    sampled run of them, curation screens and held-out evaluations), as measured at `update`
    (the revision's clock); each cell's n capped at `samples` keeping its pass rate (a big
    screen need not outweigh the run's own groups). None when the ledger has no such sample.
    The curation groups of the lineage may already be prompt evidence (`lineage_observations`):
    a caller that adds both counts those samples twice in their cells."""
    rows = ledger.cell_prior(revision)
    if rows.height == 0:
        return None
    cells: dict[str, tuple[float, float]] = {}
    for cell, k, n in rows.select("cell", "k", "n").iter_rows():
        f = min(1.0, samples / n) if samples is not None else 1.0
        cells[str(cell)] = (f * float(k), f * float(n))
    return CellPrior(cells, update)


def checkpoint_clock(hop: tuple[str, int], start: Mapping[str, int]) -> int:
    """The update clock of the checkpoint (train_id, step) on the lineage."""
    return start[hop[0]] + hop[1]


def ledger_posterior(
    ledger: LedgerEvidence, cfg: PosteriorConfig = DEFAULT
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(per cell, per train-split prompt, now): the difficulty model over the whole ledger, as
    the views cell_posterior / prompt_posterior give it at the default config."""
    obs, now = ledger_observations(ledger)
    prompts = ledger.train_prompts()
    _, cells = cell_posterior(obs, cfg, now)
    return cells, prompt_posterior(obs, prompts, cfg, now), now
