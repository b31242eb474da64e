"""Polars twins of the ledger views `group_stats` and `prompt_stats`, and the one Beta posterior.

`group_stats(rollouts)` computes per problem (and per run, when the frame has `run_id`) what the
SQL view computes; `posterior(frame)` adds the Beta(1 + k, 1 + n − k) posterior of the pass rate:
mean, 90 % interval and learnability E[p(1 − p)]. `beta_quantile`: exact closed forms when a = 1
(k = 0) or b = 1 (k = n), otherwise Abramowitz & Stegun 26.5.22 (absolute error < 0.005 against
an exact inversion). `alpha_beta`, `beta_summary` and `beta_quantile` are written once, on
operators that Polars expressions and `pipeline.selection.sqlexpr.Sql` share: the ledger's
`sieve_posterior` / `sieve_beta_q` macros are rendered from them (`pipeline.selection.sql_macros`,
migration 0009), so the SQL and the Polars posterior are one implementation.

Informative groups: `zero_variance` and `reward_informative()` apply
`grpo_core.advantages.is_uninformative` (max − min ≤ tol · max(1, |max|, |min|)) to the rewards
— the trainer's rule, which the screen and the curriculum use too; correctness (k of n) only
labels an uninformative group (all_correct / all_wrong) and feeds the pass-rate band.

Process signal: a rollouts frame with `step_correct` (each rollout's fragment verdicts in text
order, as the stored query `run_rollouts` reads them from `rollout_steps`; null when it has
none) also gets `process_stats`' columns in `group_stats`. A group is `process_informative`
when its rollouts' step accuracies differ (max − min > tol, the same `is_uninformative` test) or
some fragment position is right in one rollout and wrong in another: a fragment-level reward
still separates such a group when every final answer agrees.

The Beta-binomial predictive (numpy, for the selection before rollout): `flat_probability` and
`informative_probability` (the chance that a group of G is all alike, or not, when p ~ Beta(α,
β), exact rather than at the mean), `learnability` and `learnability_sd` (mean and spread of
p(1 − p), the selection's "ucb" score).

Departure in SQL: the macro `sieve_beta_q` knows the normal quantile only at u = 0.05 / 0.95 (the
90 % interval), the two levels it is called with; here y = Φ⁻¹(1 − u) for any u.

Test: `.venv/bin/pytest tests/selection/test_stats.py -q` (checked against the SQL views to 1e-9).
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from grpo_core.advantages import is_uninformative
from pipeline.core.errors import SieveError
from pipeline.selection.sqlexpr import when

Z95 = 1.6448536269514722  # Φ⁻¹(0.95), the constant in sieve_beta_q
INTERVAL = (0.05, 0.95)  # the 90 % posterior interval of prompt_stats
PRIOR = 1.0  # uniform Beta(1, 1) prior on the pass rate
Quantile = Callable[[Any, Any, float], Any]  # (a, b, u) -> quantile u of Beta(a, b)

GROUP_STATS_COLUMNS = (
    "n_samples", "n", "k", "n_errors", "pass_rate",
    "reward_mean", "reward_std", "reward_min", "reward_max", "zero_variance",
)  # fmt: skip
SPREAD_COLUMNS = ("reward_min", "reward_max")  # what the informative rule reads
POSTERIOR_COLUMNS = ("alpha", "beta", "p_mean", "p_low", "p_high", "learnability")
PROCESS_COLUMNS = ("n_step_rollouts", "step_accuracy", "step_index_varies", "process_informative")


def require_columns(frame: pl.DataFrame, columns: tuple[str, ...] | list[str], what: str) -> None:
    """Raise `SieveError` naming the missing columns, if any."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SieveError(f"{what} lacks column(s) {', '.join(missing)}")


def reward_informative(reward_max: str = "reward_max", reward_min: str = "reward_min") -> pl.Expr:
    """True where a group's reward spread max − min exceeds the tolerance: the trainer's rule
    (`is_uninformative`) on a frame's spread columns. False where the group has no reward."""
    return ~is_uninformative(pl.col(reward_max), pl.col(reward_min)).fill_null(True)


def group_stats(rollouts: pl.DataFrame) -> pl.DataFrame:
    """One row per problem (× run when `run_id` is present): the group GRPO would see.

    n counts scored samples (reward not null), n_errors the verifier failures; reward_std is the
    population std (ddof = 0, like SQL `stddev_pop`). Sorted by the key columns.
    """
    require_columns(rollouts, ("problem_id", "reward", "correct"), "rollouts frame")
    keys = ["run_id", "problem_id"] if "run_id" in rollouts.columns else ["problem_id"]
    reward = pl.col("reward").cast(pl.Float64)
    stats = rollouts.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("n_samples"),
        reward.count().cast(pl.Int64).alias("n"),
        pl.col("correct").fill_null(False).sum().cast(pl.Int64).alias("k"),
        reward.mean().alias("reward_mean"),
        reward.std(ddof=0).alias("reward_std"),
        reward.min().alias("reward_min"),
        reward.max().alias("reward_max"),
    )
    stats = (
        stats.with_columns(
            (pl.col("n_samples") - pl.col("n")).alias("n_errors"),
            pl.when(pl.col("n") > 0).then(pl.col("k") / pl.col("n")).alias("pass_rate"),
            is_uninformative(pl.col("reward_max"), pl.col("reward_min")).alias("zero_variance"),
        )
        .select(*keys, *GROUP_STATS_COLUMNS)
        .sort(keys)
    )
    if "step_correct" not in rollouts.columns:
        return stats
    process = process_stats(rollouts)
    return stats.join(process, on=keys, how="left").with_columns(
        pl.col("n_step_rollouts").fill_null(0),
        pl.col("step_index_varies", "process_informative").fill_null(False),
    )


def process_stats(rollouts: pl.DataFrame) -> pl.DataFrame:
    """Per problem (× run): rollouts with fragments, their mean step accuracy, whether some
    fragment position's verdict varies, and `process_informative` (see the module doc)."""
    require_columns(rollouts, ("problem_id", "step_correct"), "rollouts frame")
    keys = ["run_id", "problem_id"] if "run_id" in rollouts.columns else ["problem_id"]
    stepped = rollouts.select(*keys, "step_correct").filter(
        pl.col("step_correct").list.len().fill_null(0) > 0
    )
    share = pl.col("step_correct").list.eval(pl.element().cast(pl.Float64)).list.mean()
    per_rollout = stepped.with_columns(share.alias("_share"))
    by_key = per_rollout.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("n_step_rollouts"),
        pl.col("_share").mean().alias("step_accuracy"),
        pl.col("_share").max().alias("_max"),
        pl.col("_share").min().alias("_min"),
    )
    positions = (
        stepped.with_columns(pl.int_ranges(pl.col("step_correct").list.len()).alias("_i"))
        .explode("step_correct", "_i")
        .group_by(*keys, "_i")
        .agg((pl.col("step_correct").n_unique() > 1).alias("_varies"))
        .group_by(keys)
        .agg(pl.col("_varies").any().alias("step_index_varies"))
    )
    varies = ~is_uninformative(pl.col("_max"), pl.col("_min")) | pl.col("step_index_varies")
    return (
        by_key.join(positions, on=keys, how="left")
        .with_columns(varies.alias("process_informative"))
        .select(*keys, *PROCESS_COLUMNS)
        .sort(keys)
    )


def upper_normal_quantile(u: float) -> float:
    """y with P(Z > y) = u, with `Z95` itself at the interval's two levels."""
    if not 0.0 < u < 1.0:
        raise SieveError(f"quantile level must be in (0, 1), got {u}")
    if u == INTERVAL[0]:
        return Z95
    if u == INTERVAL[1]:
        return -Z95
    return NormalDist().inv_cdf(1.0 - u)


def beta_quantile(a: Any, b: Any, u: Any, y: Any = None) -> Any:
    """Quantile u of Beta(a, b) for a, b ≥ 1, on Polars expressions (or `Sql`, for the macro).

    a = 1: 1 − (1 − u)^(1/b); b = 1: u^(1/a) (both exact). Otherwise A&S 26.5.22 with y the
    upper-tail normal quantile of u (default `upper_normal_quantile(u)`):
    x = a / (a + b·e^(2w)), w = y√(h + λ)/h − (1/(2b−1) − 1/(2a−1))(λ + 5/6 − 2/(3h)),
    h = 2 / (1/(2a−1) + 1/(2b−1)), λ = (y² − 3)/6.
    """
    y = upper_normal_quantile(u) if y is None else y
    ia, ib = 1 / (2 * a - 1), 1 / (2 * b - 1)
    h = 2 / (ia + ib)
    lam = (y * y - 3) / 6
    w = y * (h + lam).sqrt() / h - (ib - ia) * (lam + 5 / 6 - 2 / (3 * h))
    approx = a / (a + b * (2 * w).exp())
    return when(a == 1, 1 - (1 - u) ** (1 / b), when(b == 1, u ** (1 / a), approx))


def alpha_beta(n: Any, k: Any) -> tuple[Any, Any]:
    """(α, β) = (1 + k, 1 + n − k): the Beta posterior of the pass rate, uniform prior."""
    return PRIOR + k, PRIOR + (n - k)


def beta_summary(a: Any, b: Any, quantile: Quantile = beta_quantile) -> dict[str, Any]:
    """p_mean, p_low, p_high (the 90 % interval) and learnability of Beta(a, b).

    learnability = E[p(1 − p)] = αβ / ((α + β)(α + β + 1)), the expected per-sample reward
    variance of a binary group.
    """
    return {
        "p_mean": a / (a + b),
        "p_low": quantile(a, b, INTERVAL[0]),
        "p_high": quantile(a, b, INTERVAL[1]),
        "learnability": learnability(a, b),
    }


def learnability(a: Any, b: Any) -> Any:
    """E[p(1 − p)] under Beta(a, b): the expected Bernoulli variance, what GRPO learns from."""
    return a * b / ((a + b) * (a + b + 1))


def posterior(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (with integer columns n, k) plus alpha, beta, p_mean, p_low, p_high, learnability
    (`alpha_beta`, `beta_summary`: the formulas the ledger's `sieve_posterior` is rendered from).
    """
    require_columns(frame, ("n", "k"), "posterior input")
    a, b = alpha_beta(pl.col("n"), pl.col("k"))
    with_ab = frame.with_columns(a.alias("alpha"), b.alias("beta"))
    summary = beta_summary(pl.col("alpha"), pl.col("beta"))
    return with_ab.with_columns(v.alias(name) for name, v in summary.items())


def beta_quantile_value(a: float, b: float, u: float) -> float:
    """Scalar convenience over `beta_quantile` (tests, notebooks)."""
    return float(pl.select(beta_quantile(pl.lit(float(a)), pl.lit(float(b)), u)).item())


# ---------------------------------------------------------------- the Beta-binomial predictive


def learnability_sd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The standard deviation of p(1 − p) under Beta(a, b): E[p²(1 − p)²] = a(a + 1) b(b + 1) /
    (t(t + 1)(t + 2)(t + 3)), t = a + b, less `learnability`² (clipped at 0 against rounding)."""
    t = a + b
    second = a * (a + 1) * b * (b + 1) / (t * (t + 1) * (t + 2) * (t + 3))
    return np.sqrt(np.maximum(second - learnability(a, b) ** 2, 0.0))


def flat_probability(alpha: np.ndarray, beta: np.ndarray, g_max: int) -> np.ndarray:
    """P(a group of G is flat: all right or all wrong) under Beta(alpha, beta), for G = 1..g_max
    (column G − 1): E[p^G] + E[(1 − p)^G], each a product Π_{i<G} (a + i) / (a + b + i)."""
    i = np.arange(g_max, dtype=np.float64)
    a, b = alpha[:, None], beta[:, None]
    right = np.cumprod((a + i) / (a + b + i), axis=1)
    wrong = np.cumprod((b + i) / (a + b + i), axis=1)
    return right + wrong


def informative_probability(alpha: np.ndarray, beta: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P(0 < k < n) for k ~ BetaBinomial(n, α, β), elementwise (n whole, ≥ 1): 1 − E[p^n] −
    E[(1 − p)^n], the moments of `flat_probability` at each row's own n."""
    g = np.asarray(n).astype(np.int64)
    out = np.zeros(len(g))
    for size in np.unique(g):
        at = g == size
        a, b = alpha[at], beta[at]
        right, wrong = np.ones(len(a)), np.ones(len(a))
        for i in range(int(size)):
            right *= (a + i) / (a + b + i)
            wrong *= (b + i) / (a + b + i)
        out[at] = 1.0 - right - wrong
    return out
