"""The verifier audit: a second opinion on a sample of each curation's verdicts.

Sieve's math verifier reads one committed answer and decides most verdicts on its exact/numeric
fast path; math-verify reads the whole raw completion its own way. Where they disagree, one of
them is wrong, and a family whose verdicts disagree often has a verifier problem that curation
would otherwise bake into its curriculum. So while a screen or refine chunk is scored
(`pipeline.jobs.curate.curation.sample_rows`), `audit_rows` re-judges

* a seeded share of its rollouts (`CurateConfig.audit_share`, default 2 %; why = 'sample'):
  `selected` is a function of (seed, run, problem, sample index) only, so a resumed run or a
  chunk sampled again on another worker audits the same rollouts, and
* every rollout whose verdict rests on a guessed reading (`pipeline.scoring.is_guess`;
  why = 'guess'), whatever the share,

with `math_verify_only` (time-bounded in the killable worker; NULL on error or timeout). Only
"math" and "exact" verdicts are audited (code is judged by running it), and only curation runs:
eval and training are not. The rows (`verifier_audit`, migration 0007) are committed with the
chunk's rollouts in one transaction (or travel in its shard). The audit never changes a verdict
or a curation's outcome; `warning` names the families whose disagreement rate is above
`CurateConfig.audit_warn` in one line, and `sieve audit` shows the rates and examples.

Test: `.venv/bin/pytest tests/test_audit.py -q`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from grpo_core.seeds import derive_seed
from pipeline.core.errors import SieveError
from pipeline.jobs.curate.rollouts import Scored
from pipeline.scoring import VERIFIER_VERSION, Verdict, is_guess, math_verify_only
from pipeline.store import Ledger

AUDITED_PURPOSES = ("screen", "refine")  # curation only: never eval or training runs
AUDITED_VERIFIERS = ("math", "exact")  # not "code": its verdict comes from running the code
_SCALE = 1 << 56  # selection draws 56-bit uniforms (exact in a float)

AUDIT_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(),
    "problem_id": pl.String(),
    "sample_idx": pl.Int32(),
    "verifier_version": pl.String(),
    "sieve_correct": pl.Boolean(),
    "sieve_reason": pl.String(),
    "sieve_detail": pl.String(),
    "second_correct": pl.Boolean(),
    "disagree": pl.Boolean(),
    "why": pl.String(),
}


def selected(seed: int, run_id: str, problem_id: str, sample_idx: int, share: float) -> bool:
    """Whether the rollout is in the audit's seeded sample (a share of 0 selects none)."""
    draw = derive_seed("verifier-audit", seed, run_id, problem_id, sample_idx, bits=56)
    return draw < share * _SCALE


def why_audited(
    verdict: Verdict, seed: int, run_id: str, problem_id: str, sample_idx: int, share: float
) -> str | None:
    """'guess' for a guessed verdict, 'sample' for one in the seeded sample, else None."""
    if is_guess(verdict):
        return "guess"
    return "sample" if selected(seed, run_id, problem_id, sample_idx, share) else None


def audit_rows(
    problems: pl.DataFrame,
    scored: Scored,
    seed: int,
    share: float,
    timeout: float | None = None,
) -> pl.DataFrame:
    """`verifier_audit` rows for the scored rollouts of `problems` (a chunk: problem_id, answer,
    verifier): the guessed verdicts and the seeded `share` of the rest, each re-judged by
    math-verify on the raw completion."""
    gold = dict(zip(problems["problem_id"], problems["answer"], strict=True))
    verifier = dict(zip(problems["problem_id"], problems["verifier"], strict=True))
    r = scored.rollouts
    keys = zip(r["run_id"], r["problem_id"], r["sample_idx"], r["completion"], strict=True)
    rows = []
    for (run_id, pid, j, text), verdict in zip(keys, scored.verdicts, strict=True):
        if verifier[pid] not in AUDITED_VERIFIERS:
            continue
        why = why_audited(verdict, seed, run_id, pid, j, share)
        if why is None:
            continue
        second = math_verify_only(text or "", gold[pid], timeout)
        ours = verdict.correct
        disagree = None if ours is None or second is None else ours != second
        rows.append(
            (run_id, pid, j, VERIFIER_VERSION, ours, verdict.reason, verdict.detail, second,
             disagree, why)
        )  # fmt: skip
    return pl.DataFrame(rows, schema=AUDIT_SCHEMA, orient="row")


# ---------------------------------------------------------------------- reading the audit


def by_family(ledger: Ledger, runs: list[str]) -> pl.DataFrame:
    """Audited, compared, disagreements and the disagreement rate per family, worst first."""
    return ledger.query("audit_by_family", runs=runs)


def worst_cells(ledger: Ledger, runs: list[str], limit: int = 10) -> pl.DataFrame:
    """The family x level cells with disagreements, highest rate first."""
    return ledger.query("audit_cells", runs=runs, limit=limit)


def examples(ledger: Ledger, runs: list[str], limit: int = 5) -> pl.DataFrame:
    """A few disagreements (guessed verdicts first), from the `verifier_disagreements` view."""
    return ledger.query("audit_examples", runs=runs, limit=limit)


def warning(ledger: Ledger, runs: list[str], threshold: float, target: str) -> str | None:
    """One line naming every family whose disagreement rate is above `threshold` and how to
    inspect it (`sieve audit TARGET`); None when no family is."""
    rates = by_family(ledger, runs).filter(pl.col("disagreement_rate") > threshold)
    if rates.height == 0:
        return None
    cells = ", ".join(
        f"{family} {rate:.1%} ({n} of {m} compared)"
        for family, rate, n, m in rates.select(
            "family", "disagreement_rate", "disagreements", "compared"
        ).iter_rows()
    )
    return (
        f"verifier audit: math-verify disagrees with Sieve's verdicts on {cells}, above "
        f"audit_warn {threshold:.1%}; inspect with `sieve audit {target}`"
    )


def resolve(
    ledger: Ledger, target: str, purposes: tuple[str, ...] | None = AUDITED_PURPOSES
) -> tuple[str, list[str]]:
    """(label, run ids) of what `sieve audit TARGET` reads: `latest` (the screen and refine runs
    of the newest curriculum with items, `latest_curriculum`), a curriculum id (its runs), or
    one screen / refine run id. SieveError for an unknown id or a run that is not a curation
    run. `purposes=None` takes a run of any purpose (`sieve rescore`)."""
    from pipeline.store.ids import curation_runs, latest_curriculum

    if target == "latest":
        latest = latest_curriculum(ledger)
        if latest is None:
            raise SieveError(
                "no curation yet: run `sieve curate` first (a curation that kept nothing is "
                "never `latest`: name it by its id)"
            )
        target = latest
    if ledger.run("SELECT 1 FROM curricula WHERE curriculum_id = $c", {"c": target}):
        return f"curation {target}", curation_runs(target)
    found = ledger.run("SELECT purpose FROM sampling_runs WHERE run_id = $r", {"r": target})
    if not found:
        raise SieveError(
            f'no sampling run or curriculum {target!r} (see `sieve sql "SELECT run_id, purpose '
            'FROM sampling_runs"`)'
        )
    if purposes is not None and found[0][0] not in purposes:
        raise SieveError(
            f"run {target!r} is a {found[0][0]} run; the verifier audit covers curation runs "
            "(screen, refine)"
        )
    return f"run {target}", [target]


__all__ = [
    "AUDITED_PURPOSES",
    "AUDITED_VERIFIERS",
    "AUDIT_SCHEMA",
    "audit_rows",
    "by_family",
    "examples",
    "resolve",
    "selected",
    "warning",
    "why_audited",
]


@dataclass(frozen=True)
class AuditView:
    """`sieve audit TARGET`: what was audited (`label`, its `runs`), the disagreement rates by
    family, the worst family x level cells and example disagreements."""

    label: str
    runs: list[str]
    families: pl.DataFrame
    worst: pl.DataFrame
    examples: pl.DataFrame


def audit_view(home: str | Path | None, target: str, shown: int, cells: int) -> AuditView:
    """The audit of `target` (a curriculum id, a screen/refine run id or 'latest') read from the
    ledger of `home` in one read-only open: the `cells` worst cells and `shown` disagreements."""
    if shown < 0 or cells < 0:
        raise SieveError("--examples and --cells must be >= 0")
    with Ledger.open(home, read_only=True) as ledger:
        label, runs = resolve(ledger, target)
        families, worst = by_family(ledger, runs), worst_cells(ledger, runs, cells)
        return AuditView(label, runs, families, worst, examples(ledger, runs, shown))
