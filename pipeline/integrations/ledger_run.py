"""A training run of another trainer (TRL, verl) kept in Sieve's ledger: which prompts of its
dataset to train next, picked by the difficulty model before any rollout is spent, and every
group it trains written back as a training run of the model's lineage.

`LedgerRun(ledger, problem_ids, base_revision, train_id)` holds:
- the pool: the dataset's rows by problem id (a problem on several rows is picked as its first
  row), each in its cell ("family level") as the ledger's `problems` table has it; a problem the
  ledger lacks, or holds out for evaluation, is refused (its groups could be no evidence);
- the evidence: what `lineage_observations` gives a run from `base_revision` (curation groups of
  those weights and their ancestors, training groups of the lineage and of every other run from
  the same weights, each at its clock), this run's own groups
  already in the ledger (a resumed run), and every group `record` adds while it trains;
- `pick(step, size, upto)`: the step's `size` rows as `sieve train --selection posterior` picks
  them (the same seeded candidate draw, `_candidates` and `select_batch`), from this run's groups
  of steps ≤ `upto` only. A pick is a function of (seed, step, that evidence), not of how far the
  trainer's loader has run ahead, so every process of a data-parallel run picks the same rows;
- `record(step, groups)`: the groups' samples into `train_rollouts` (one transaction, replace on
  the natural key: a rewritten step is not doubled) and into the evidence;
- `start`, `checkpoint`, `finish`: the `train_runs` row, a `checkpoints` row per saved weights
  (a run from those weights, or the next night's curation, reads this run's groups through it),
  and the run's status.

Step s of the run is update clock(base_revision) + s of the difficulty model, as in
`lineage_observations`. Groups are "correct" by their verdicts; a sample whose verifier failed
(reward and verdict None) counts in no group's n.

Test: `.venv/bin/pytest tests/integrations/test_ledger_run.py -q`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from grpo_core.seeds import derive_seed
from grpo_core.types import Item
from pipeline.core.errors import SieveError
from pipeline.core.home import to_home
from pipeline.selection.evidence import lineage_observations
from pipeline.selection.posterior import (
    Observations,
    PosteriorConfig,
    SelectionConfig,
    _candidates,
    difficulty_model,
    select_batch,
)
from pipeline.store import Ledger

# one judged completion, as a trainer integration hands it to `record`
SAMPLE_SCHEMA = pl.Schema(
    {
        "problem_id": pl.Utf8,
        "completion": pl.Utf8,
        "n_tokens": pl.Int32,
        "finish_reason": pl.Utf8,  # stop | length | None (the trainer does not say)
        "reward": pl.Float64,
        "correct": pl.Boolean,
    }
)


class LedgerRun:
    """One training run's pool, evidence and ledger rows (see the module docstring)."""

    def __init__(
        self,
        ledger: Ledger,
        problem_ids: Sequence[str],
        base_revision: str,
        train_id: str,
        *,
        seed: int = 0,
        posterior: PosteriorConfig | None = None,
        select: SelectionConfig | None = None,
    ) -> None:
        self.ledger, self.base_revision, self.train_id = ledger, base_revision, train_id
        self.seed = seed
        self.posterior = posterior or PosteriorConfig()  # the difficulty model's settings
        self.select = select or SelectionConfig()  # and how a batch is picked from it
        self.keys, self.row_of = _pool(problem_ids)
        self.cell_of = _cells(ledger, self.keys)
        # the lineage and every other run from the same weights; this run's own groups are
        # `own`, read step by step below
        prior, self.clock = lineage_observations(ledger, base_revision, apart=(train_id,))
        self.prior = Observations.load(prior.rows()).rows  # (key, cell, k, n, update)
        self.own = _own_groups(ledger, train_id, self.cell_of)  # (step, key, cell, k, n)
        self.steps = _own_steps(ledger, train_id)  # the steps judged (evidence or not)
        self.model = difficulty_model(self.posterior, self.select)
        self.policy: dict[int, str] = {0: base_revision}  # step → the weights that sampled it

    # -------------------------------------------------------------- picking

    def evidence(self, upto: int) -> Observations:
        """The lineage's groups and this run's of steps ≤ `upto`, on the lineage clock."""
        own = [(key, c, k, n, self.clock + s) for s, key, c, k, n in self.own if s <= upto]
        return Observations([*self.prior, *own])

    def pick(self, step: int, size: int, upto: int) -> list[int]:
        """Dataset rows of the `size` prompts step `step` trains, distinct unless the pool is
        smaller than `size` (then the best-ranked take a second group, as in `sieve train`)."""
        n = min(len(self.keys), self.posterior.candidates * size)

        def source(step_: int, _round: int) -> list[Item]:
            rng = np.random.default_rng(derive_seed(self.seed, "candidates", step_))
            drawn = rng.choice(len(self.keys), size=n, replace=False)
            return [Item("", "", 1, key=self.keys[int(i)]) for i in drawn]

        distinct = min(size, len(self.keys))
        at = _candidates(source, self.cell_of, self.evidence(upto), self.model, self.select,
                         self.seed, step, distinct, self.clock + step)  # fmt: skip
        idx = select_batch(at.alpha, at.beta, distinct, at.rng, self.select, at.visits)
        return [self.row_of[at.cands[int(i)].key] for i in np.resize(idx, size)]

    # -------------------------------------------------------------- recording

    def observe(self, step: int, samples: pl.DataFrame) -> None:
        """Step `step`'s groups (one per problem) as evidence, in place of any the step had (a
        resumed run samples its steps again)."""
        judged = samples.filter(pl.col("correct").is_not_null())
        groups = judged.group_by("problem_id", maintain_order=True).agg(
            k=pl.col("correct").cast(pl.Float64).sum(), n=pl.len().cast(pl.Float64)
        )
        new = [(step, key, self.cell_of[key], k, n) for key, k, n in groups.iter_rows()]
        self.steps.add(step)
        # in step order: the learning model reads rows in update order
        self.own = sorted([r for r in self.own if r[0] != step] + new, key=lambda r: r[0])

    def write(self, step: int, samples: pl.DataFrame) -> int:
        """Step `step`'s samples (`SAMPLE_SCHEMA`) as `train_rollouts` rows; how many."""
        unknown = set(samples["problem_id"].unique()) - set(self.cell_of)
        if unknown:
            raise SieveError(f"step {step}: {len(unknown)} problem ids outside the run's pool")
        policy = self.policy.get(step, f"{self.train_id}@{step}")
        rows = (
            samples.select(list(SAMPLE_SCHEMA))
            .cast(SAMPLE_SCHEMA)
            .with_columns(
                pl.lit(self.train_id).alias("train_id"),
                pl.lit(step, pl.Int32).alias("step"),
                pl.int_range(pl.len(), dtype=pl.Int32).over("problem_id").alias("sample_idx"),
                pl.lit(policy).alias("policy"),
            )
        )
        self.ledger.write("train_rollouts", rows, on_conflict="replace")
        return rows.height

    def record(self, step: int, samples: pl.DataFrame) -> int:
        """`observe` and `write` at once."""
        self.observe(step, samples)
        return self.write(step, samples)

    def start(
        self,
        trainer: str,
        config: Mapping[str, Any],
        base_model: str | None = None,
        curriculum_id: str | None = None,
    ) -> None:
        """The `train_runs` row, status running (a resumed run keeps its id and rows)."""
        settings = {"trainer": trainer, "seed": self.seed, **config}
        row = pl.DataFrame(
            {"train_id": [self.train_id], "curriculum_id": [curriculum_id],
             "base_model": [base_model], "base_revision": [self.base_revision],
             "config": [json.dumps(settings, default=str)], "started_at": [datetime.now(UTC)],
             "finished_at": [None], "status": ["running"]},
            schema_overrides={"curriculum_id": pl.Utf8, "base_model": pl.Utf8,
                              "finished_at": pl.Datetime(time_zone="UTC")},
        )  # fmt: skip
        self.ledger.write("train_runs", row, on_conflict="replace")

    def checkpoint(self, step: int, revision: str, path: str | Path) -> None:
        """Weights after `step` updates: a `checkpoints` row, so runs and curations from them
        continue this run's lineage (and its later groups name them as their policy). Weights
        equal to the start's (no update moved them) are not registered: a run would descend
        from itself."""
        self.policy[step] = revision
        if revision == self.base_revision:
            return
        row = pl.DataFrame(
            {"train_id": [self.train_id], "step": [step],
             "path": [to_home(path, self.ledger.home)], "model_revision": [revision],
             "metrics": [None], "created_at": [datetime.now(UTC)]},
            schema_overrides={"step": pl.Int32, "metrics": pl.Utf8},
        )  # fmt: skip
        self.ledger.write("checkpoints", row, on_conflict="replace")

    def finish(self, status: str = "finished") -> None:
        self.ledger.run(
            "UPDATE train_runs SET status = $s, finished_at = now() WHERE train_id = $t",
            {"s": status, "t": self.train_id},
        )


def _pool(problem_ids: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """The distinct problem ids in row order and the first row of each."""
    row_of: dict[str, int] = {}
    for row, key in enumerate(problem_ids):
        if key is None or key == "":
            raise SieveError(f"dataset row {row} has no problem_id (export with `sieve export`)")
        row_of.setdefault(str(key), row)
    if not row_of:
        raise SieveError("the dataset is empty")
    return list(row_of), row_of


def _cells(ledger: Ledger, keys: list[str]) -> dict[str, str]:
    """Each problem's cell; a SieveError naming what the ledger lacks or holds out."""
    known = ledger.sql(
        "SELECT problem_id, family || ' ' || level AS cell, split FROM problems "
        "WHERE list_contains($ids, problem_id)",
        {"ids": keys},
    )
    missing = sorted(set(keys) - set(known["problem_id"]))
    if missing:
        raise SieveError(
            f"{len(missing)} of the dataset's {len(keys)} problems are not in the ledger "
            f"(e.g. {missing[0]}): train on a `sieve export` of it, or `sieve ingest` them first"
        )
    heldout = known.filter(pl.col("split") != "train")["problem_id"].to_list()
    if heldout:
        raise SieveError(
            f"{len(heldout)} of the dataset's problems are held out for evaluation in the "
            f"ledger (e.g. {heldout[0]}): training on them leaks the evaluation; drop them"
        )
    return dict(zip(known["problem_id"], known["cell"], strict=True))


def _own_groups(
    ledger: Ledger, train_id: str, cell_of: Mapping[str, str]
) -> list[tuple[int, str, str, float, float]]:
    """This run's groups already in the ledger (a resumed run), by step."""
    rows = ledger.sql(
        "SELECT step, problem_id, k::DOUBLE AS k, n::DOUBLE AS n FROM train_group_stats "
        "WHERE train_id = $t AND n > 0 AND NOT skipped ORDER BY step, problem_id",
        {"t": train_id},
    )
    return [
        (int(s), key, cell_of[key], k, n) for s, key, k, n in rows.iter_rows() if key in cell_of
    ]


def _own_steps(ledger: Ledger, train_id: str) -> set[int]:
    """The steps of this run already in the ledger, a step whose verifiers all failed too."""
    rows = ledger.run(
        "SELECT DISTINCT step FROM train_rollouts WHERE train_id = $t", {"t": train_id}
    )
    return {int(s) for (s,) in rows}
