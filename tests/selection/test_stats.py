"""`pipeline.selection.stats` computes what the SQL views compute, and the posterior is sound."""

from __future__ import annotations

import mpmath
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.selection.stats import beta_quantile_value, group_stats, posterior
from pipeline.store import Ledger

TOL = 1e-9
FLOATS = ("pass_rate", "reward_mean", "reward_std", "reward_min", "reward_max")


def _close(a: pl.Series, b: pl.Series) -> bool:
    both_null = a.is_null() & b.is_null()
    return bool((both_null | ((a - b).abs() <= TOL)).all())


def test_group_stats_match_the_sql_view(filled: Ledger, rollouts: pl.DataFrame) -> None:
    sql = filled.sql("SELECT * FROM group_stats ORDER BY run_id, problem_id")
    ours = group_stats(rollouts)
    assert ours["problem_id"].to_list() == sql["problem_id"].to_list()
    for col in ("n_samples", "n", "k", "n_errors", "zero_variance"):
        assert ours[col].to_list() == sql[col].to_list(), col
    for col in FLOATS:
        assert _close(ours[col], sql[col]), col
    assert ours["zero_variance"].any() and not ours["zero_variance"].all()


def test_posterior_matches_prompt_stats(filled: Ledger, rollouts: pl.DataFrame) -> None:
    sql = filled.sql("SELECT * FROM prompt_stats ORDER BY problem_id")
    pooled = posterior(group_stats(rollouts.drop("run_id")))
    assert pooled["problem_id"].to_list() == sql["problem_id"].to_list()
    assert pooled["zero_variance"].to_list() == sql["zero_variance"].to_list()
    for col in ("pass_rate", "p_mean", "p_low", "p_high", "learnability"):
        assert _close(pooled[col], sql[col]), col


def test_beta_quantile_matches_the_sql_macro_off_the_grid(ledger: Ledger) -> None:
    for a, b in ((1.0, 1.0), (1.0, 7.0), (3.0, 1.0), (2.5, 9.0), (40.0, 3.0)):
        for u in (0.05, 0.95):
            sql = ledger.run("SELECT sieve_beta_q($a, $b, $u)", {"a": a, "b": b, "u": u})[0][0]
            assert abs(beta_quantile_value(a, b, u) - sql) <= TOL, (a, b, u)


def _post(n: int, k: int) -> dict[str, float]:
    return posterior(pl.DataFrame({"n": [n], "k": [k]})).to_dicts()[0]


counts = st.integers(0, 400).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n)))


@given(counts)
def test_interval_brackets_the_mean(nk: tuple[int, int]) -> None:
    p = _post(*nk)
    assert 0.0 <= p["p_low"] <= p["p_mean"] <= p["p_high"] <= 1.0
    assert 0.0 < p["learnability"] <= 0.25


@given(st.integers(1, 50), st.integers(0, 50), st.integers(2, 8))
def test_interval_shrinks_as_n_grows_at_fixed_pass_rate(n: int, k_raw: int, m: int) -> None:
    k = min(k_raw, n)
    small, large = _post(n, k), _post(m * n, m * k)
    assert large["p_high"] - large["p_low"] < small["p_high"] - small["p_low"]


@given(st.integers(0, 1000))
def test_closed_forms_for_all_wrong_and_all_right(n: int) -> None:
    none, every = _post(n, 0), _post(n, n)
    assert abs(none["p_low"] - (1 - 0.95 ** (1 / (n + 1)))) < 1e-12
    assert abs(none["p_high"] - (1 - 0.05 ** (1 / (n + 1)))) < 1e-12
    assert abs(every["p_low"] - 0.05 ** (1 / (n + 1))) < 1e-12
    assert abs(every["p_high"] - 0.95 ** (1 / (n + 1))) < 1e-12


def _exact_beta_q(a: float, b: float, u: float) -> float:
    """Bisection on the regularised incomplete beta function (slow, obviously correct)."""
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if mpmath.betainc(a, b, 0, mid, regularized=True) < u:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@settings(max_examples=25, deadline=None)
@given(counts.filter(lambda nk: nk[0] <= 120))
def test_interval_is_within_0_005_of_an_exact_inversion(nk: tuple[int, int]) -> None:
    n, k = nk
    p = _post(n, k)
    a, b = 1.0 + k, 1.0 + n - k
    assert abs(p["p_low"] - _exact_beta_q(a, b, 0.05)) < 0.005
    assert abs(p["p_high"] - _exact_beta_q(a, b, 0.95)) < 0.005
