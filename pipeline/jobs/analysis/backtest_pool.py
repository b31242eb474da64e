"""The pool a backtest replays, and the group statistics every policy reads from it.

A pool is, per prompt, its stored samples in draw order (`sample_idx` 0, 1, ...) with reward and
verdict. A policy that spends g samples on a prompt reads that prompt's next g stored samples, so
every policy sees the same answers, and no policy samples anything: one that would need more
samples of a prompt than the pool holds is refused (`require` raises `NotEnoughSamples`, naming
how many it needs, for how many prompts, and how many are stored).

Pools: `pool_samples` reads a Parquet file of completions (`benchmarks/results/
real_model_pool.parquet`; scored with Sieve's verifier when it has no `reward` column, `score`),
refusing in one line a pool it cannot replay (`_check_pool`); `ledger_samples` the screen and
refine rollouts of one model revision of a ledger (or of given runs). `groups` gives Sieve's
group statistics over given sample indices; "informative" is Sieve's one rule
(`pipeline.selection.group_stats`, i.e. `grpo_core.advantages.is_uninformative`).

The policies are `pipeline.jobs.analysis.backtest_arms`; the table and `sieve backtest` are
`pipeline.jobs.analysis.backtest`.

Test: `.venv/bin/pytest tests/test_backtest.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.selection import group_stats
from pipeline.store import Ledger


class NotEnoughSamples(SieveError):
    """A policy would read more samples of some prompt than the pool stores."""


# ------------------------------------------------------------------ pools


def score(pool: pl.DataFrame, marker_required: bool = True) -> pl.DataFrame:
    """The pool with Sieve's verdicts (chat models: an answer must come from a marker)."""
    from pipeline.jobs.curate.rollouts import cut_flags
    from pipeline.scoring import verify_batch

    verdicts = verify_batch(
        pool["completion"].to_list(),
        pool["answer"].to_list(),
        pool["verifier"].to_list(),
        marker_required=marker_required,
        truncated=cut_flags(pool),
    )
    return pool.with_columns(
        pl.Series("reward", [v.reward for v in verdicts], dtype=pl.Float64),
        pl.Series("correct", [v.correct for v in verdicts], dtype=pl.Boolean),
        pl.Series("reason", [v.reason for v in verdicts]),
    )


def pool_samples(path: Path, marker_required: bool = True) -> pl.DataFrame:
    """A Parquet pool of samples (problem_id, sample_idx, and reward + correct, or completion +
    answer + verifier to score them with)."""
    try:
        pool = pl.read_parquet(path)
    except (OSError, pl.exceptions.ComputeError) as exc:
        raise SieveError(f"cannot read pool {path}: {' '.join(str(exc).split())}") from None
    if pool.height == 0:  # every policy would replay nothing and the table say nothing
        raise SieveError(f"pool {path} holds no samples; a pool needs at least one prompt's")
    scored_already = {"reward", "correct"} <= set(pool.columns)
    need = ["problem_id", "sample_idx"] + (
        ["reward", "correct"] if scored_already else ["completion", "answer", "verifier"]
    )
    missing = [c for c in need if c not in pool.columns]
    if missing:
        raise SieveError(f"pool {path} lacks column(s) {', '.join(missing)}")
    _check_pool(pool, path, need)
    if not scored_already:
        return score(pool, marker_required)
    return pool.with_columns(pl.col("correct").cast(pl.Boolean))  # 0 / 1 as false / true


# raises the pool's one error line: (column, problem, the rows that have it)
Refuse = Callable[[str, str, "pl.Series | None"], NoReturn]


def _check_pool(pool: pl.DataFrame, path: Path, columns: list[str]) -> None:
    """One SieveError line naming the column and the first row a pool cannot be replayed with:
    a missing value, a `sample_idx` that is not a whole number >= 0, a (problem_id, sample_idx)
    stored twice (it would be counted twice), a prompt whose `sample_idx` skips a number (draw
    order runs 0, 1, 2, ...: a policy reading samples 0..g-1 would get fewer than g), a reward
    that is not a finite number (NaN has no variance to judge), a `correct` that is not true /
    false (0 / 1 is taken; the text "false" would count as true), a completion, answer or
    verifier that is not text, a verifier that does not exist, a `code` answer that is not a
    test spec (every verdict on it would be a verifier error)."""
    from pipeline.scoring import VERIFIERS

    def refuse(column: str, problem: str, bad: pl.Series | None = None) -> NoReturn:
        row = f" (row {int(bad.arg_true()[0])})" if bad is not None else ""
        raise SieveError(f"pool {path}: {column} {problem}{row}")

    for column in columns:
        if pool[column].null_count():
            refuse(column, "has a missing value", pool[column].is_null())
    index = pool["sample_idx"]
    if not index.dtype.is_integer():
        refuse("sample_idx", f"must be whole numbers, not {index.dtype}")
    low = int(index.min()) if pool.height else 0  # type: ignore[arg-type]
    if low < 0:
        refuse("sample_idx", f"must be >= 0, got {low}", index < 0)
    twice = pool.select("problem_id", "sample_idx").is_duplicated()
    if twice.any():
        pid, idx = pool.filter(twice).select("problem_id", "sample_idx").row(0)
        refuse("sample_idx", f"{idx} of prompt {pid!r} is stored more than once", twice)
    spans = pool.group_by("problem_id").agg(n=pl.len(), top=pl.col("sample_idx").max())
    gaps = spans.filter(pl.col("top") != pl.col("n") - 1).sort("problem_id")
    if gaps.height:
        pid = gaps["problem_id"][0]
        held = set(pool.filter(pl.col("problem_id") == pid)["sample_idx"].to_list())
        hole = min(i for i in range(len(held) + 1) if i not in held)
        refuse(
            "sample_idx",
            f"of prompt {pid!r} skips {hole} ({gaps.height} prompt(s) with gaps); each prompt's "
            "samples must be numbered 0, 1, 2, ... in draw order",
        )
    if "reward" in columns:
        _check_rewards(pool["reward"], refuse)
        _check_verdicts(pool["correct"], refuse)
    for column in ("completion", "answer", "verifier"):
        if column in columns and pool[column].dtype != pl.String:
            refuse(column, f"must be text, not {pool[column].dtype}")
    if "verifier" in columns:
        unknown = ~pool["verifier"].is_in(list(VERIFIERS))
        if unknown.any():
            name = pool["verifier"].filter(unknown)[0]
            valid = ", ".join(sorted(VERIFIERS))
            refuse("verifier", f"{name!r} is not a verifier (valid: {valid})", unknown)
        _check_code_answers(pool, refuse)


def _check_rewards(reward: pl.Series, refuse: Refuse) -> None:
    """`reward` must be finite numbers."""
    if not reward.dtype.is_numeric():
        refuse("reward", f"must be numbers, not {reward.dtype}", None)
    values = reward.cast(pl.Float64)
    bad = values.is_nan() | values.is_infinite()
    if bad.any():
        refuse("reward", f"must be a finite number, got {values.filter(bad)[0]}", bad)


def _check_verdicts(correct: pl.Series, refuse: Refuse) -> None:
    """`correct` must be booleans, or whole numbers 0 / 1."""
    if correct.dtype == pl.Boolean:
        return
    if not correct.dtype.is_integer():
        refuse("correct", f"must be true/false (booleans), not {correct.dtype}", None)
    bad = ~correct.is_in([0, 1])
    if bad.any():
        refuse("correct", f"must be true/false or 0/1, got {correct.filter(bad)[0]}", bad)


def _check_code_answers(pool: pl.DataFrame, refuse: Refuse) -> None:
    """Each distinct answer of a `code` row must be a test spec (`decode_spec`)."""
    from pipeline.scoring.code import decode_spec

    code = pool["verifier"] == "code"
    for answer in pool.filter(code)["answer"].unique(maintain_order=True):
        try:
            decode_spec(answer)
        except ValueError as exc:
            bad = code & (pool["answer"] == answer)
            pid = pool.filter(bad)["problem_id"][0]
            problem = f"{answer!r} of prompt {pid!r} is not a code test spec ({exc})"
            refuse("answer", problem, bad)


def ledger_samples(
    ledger: Ledger, revision: str | None = None, runs: Sequence[str] = ()
) -> tuple[pl.DataFrame, str]:
    """(samples, revision): the screen and refine rollouts of `revision` (default: that of the
    newest screen run), renumbered per problem in draw order; `runs`: only those runs."""
    if revision is None:
        newest = ledger.query("backtest_revision")
        if newest.is_empty():
            raise SieveError("the ledger holds no screen runs to backtest (run sieve curate)")
        revision = str(newest["model_revision"][0])
    samples = ledger.query("backtest_samples", revision=revision, runs=list(runs))
    if samples.is_empty():
        raise SieveError(f"the ledger holds no screen or refine rollouts of revision {revision}")
    return samples, revision


# ------------------------------------------------------------------ groups over a pool


def groups(scored: pl.DataFrame, samples: range) -> pl.DataFrame:
    """Sieve's group statistics over the given sample indices of every prompt."""
    rows = scored.filter(pl.col("sample_idx").is_in(list(samples)))
    return group_stats(rows.select("problem_id", "reward", "correct"))


def informative_share(stats: pl.DataFrame) -> float:
    return float(_informative(stats).mean()) if stats.height else 0.0  # type: ignore[arg-type]


def informative(stats: pl.DataFrame) -> int:
    return int(_informative(stats).sum())


def _informative(stats: pl.DataFrame) -> pl.Series:
    """Per group, whether it is informative; a group of verifier errors only (no scored sample,
    so no variance: `zero_variance` null) is not."""
    return ~stats["zero_variance"].fill_null(True)


def require(scored: pl.DataFrame, prompts: pl.Series, n: int, policy: str) -> None:
    """Refuse `policy` when one of `prompts` has fewer than `n` stored samples."""
    if prompts.is_empty():
        return
    stored = scored.group_by("problem_id").agg(pl.len().alias("stored"))
    wanted = pl.DataFrame({"problem_id": prompts.unique()}).join(stored, "problem_id", "left")
    short = wanted.filter(pl.col("stored").fill_null(0) < n)
    if short.height:
        fewest = int(short["stored"].fill_null(0).min())  # type: ignore[arg-type]
        raise NotEnoughSamples(
            f"{policy} needs {n} samples of {wanted.height} prompts; {short.height} of them "
            f"have fewer stored (fewest {fewest}): lower its group sizes or sample more"
        )


def ids(stats: pl.DataFrame) -> pl.Series:
    return stats["problem_id"]


def all_prompts(scored: pl.DataFrame) -> pl.Series:
    return scored["problem_id"].unique().sort()
