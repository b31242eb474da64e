"""Re-judge stored completions with the current verifier, beside the verdicts they were given.

A rollout's reward and verdict are written once, by the verifier version its run row records
(`sampling_runs.verifier_version`). After the verifier changes (`VERIFIER_VERSION` bumped),
`rescore` judges the stored completions of one run, or of a curation's screen and refine runs,
again: each with its problem's verifier, gold answer and step context, and with the answer
marker required exactly when the run's prompt format is `chat` (as `pipeline.jobs.curate.rollouts`
scored them). The new verdicts go to `rescored_verdicts` (migration 0008) in one transaction, keyed
by (run, problem, sample index, verifier version): the `rollouts` rows are never modified, a second
rescore under the same version judges nothing again and adds nothing, and one under a newer
version adds a second set beside the first. The view `verdict_changes` lists each rescored
rollout whose verdict changed, with both versions.

Test: `.venv/bin/pytest tests/test_rescore.py tests/cli/test_rescore_cli.py -q`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.jobs.curate.audit import resolve
from pipeline.jobs.curate.rollouts import cut_flags, step_contexts
from pipeline.scoring import VERIFIER_VERSION, verify_batch
from pipeline.store import Ledger

KEY = ["run_id", "problem_id", "sample_idx"]


@dataclass(frozen=True)
class Rescore:
    """What one rescore did: `judged` verdicts written now under `version`, and per family of
    the runs (`changes`: rescored, changed, correct_to_wrong, wrong_to_correct, other) the
    whole set stored under that version, also rows of an earlier rescore."""

    label: str
    runs: list[str]
    version: str
    judged: int
    changes: pl.DataFrame


def pending(ledger: Ledger, runs: list[str], version: str) -> pl.DataFrame:
    """The runs' rollouts not yet rescored under `version`, with their problems' columns."""
    return ledger.query("rescore_pending", runs=runs, version=version)


def judge(rows: pl.DataFrame) -> pl.DataFrame:
    """`rescored_verdicts` rows for `rows` (from `pending`), judged by the current verifier."""
    verdicts = verify_batch(
        rows["completion"].to_list(),
        rows["answer"].to_list(),
        rows["verifier"].to_list(),
        marker_required=(rows["prompt_format"] == "chat").fill_null(False).to_list(),
        contexts=step_contexts(rows, [1] * rows.height),  # one rollout per row
        truncated=cut_flags(rows),
    )
    return rows.select(KEY).with_columns(
        pl.lit(VERIFIER_VERSION).alias("verifier_version"),
        pl.Series("reward", [v.reward for v in verdicts], dtype=pl.Float64),
        pl.Series("correct", [v.correct for v in verdicts], dtype=pl.Boolean),
        pl.Series("reason", [v.reason for v in verdicts], dtype=pl.String),
        pl.Series("detail", [v.detail for v in verdicts], dtype=pl.String),
        pl.lit(datetime.now(UTC)).alias("rescored_at"),
    )


def changes(ledger: Ledger, runs: list[str], version: str) -> pl.DataFrame:
    """Per family: rollouts rescored under `version` and how many verdicts changed, by way."""
    return ledger.query("rescore_changes", runs=runs, version=version)


def rescore(ledger: Ledger, target: str) -> Rescore:
    """Re-judge the stored completions of `target` (`latest`, a curriculum id or any sampling
    run id; `pipeline.jobs.curate.audit.resolve`) and write the verdicts in one transaction."""
    label, runs = resolve(ledger, target, purposes=None)
    rows = judge(pending(ledger, runs, VERIFIER_VERSION))
    judged = ledger.write("rescored_verdicts", rows)
    return Rescore(label, runs, VERIFIER_VERSION, judged, changes(ledger, runs, VERIFIER_VERSION))


def changed(ledger: Ledger, runs: list[str], limit: int = 5) -> pl.DataFrame:
    """A few changed verdicts of the runs under the current version (`verdict_changes`)."""
    return ledger.query("rescore_examples", runs=runs, version=VERIFIER_VERSION, limit=limit)


__all__ = ["Rescore", "changed", "changes", "judge", "pending", "rescore"]


def rescore_home(
    home: str | Path | None, target: str, examples: int
) -> tuple[Rescore, pl.DataFrame]:
    """`sieve rescore TARGET`: the stored completions of `target` judged again (`rescore`), and
    `examples` of the verdicts that changed. The ledger is opened transiently, so readers are not
    locked out meanwhile, and never created."""
    if examples < 0:
        raise SieveError("--examples must be >= 0")
    with Ledger.open(home, transient=True, create=False) as ledger:
        done = rescore(ledger, target)
        return done, changed(ledger, done.runs, examples)
