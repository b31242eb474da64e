"""The SQL views compute what docs/ledger.md and docs/architecture.md say: group and pooled
prompt statistics."""

from __future__ import annotations

from datetime import UTC, datetime

import mpmath
import polars as pl
import pytest

from pipeline.store import Ledger


def _run(run_id: str, revision: str, temperature: float, purpose: str = "screen") -> dict:
    return {
        "run_id": run_id,
        "purpose": purpose,
        "model": "tiny",
        "model_revision": revision,
        "backend": "hf",
        "group_size": 4,
        "temperature": temperature,
        "started_at": datetime(2026, 1, 1, tzinfo=UTC),
        "status": "finished",
    }


def _rollouts(run_id: str, problem_id: str, rewards: list[float | None]) -> list[dict]:
    return [
        {
            "run_id": run_id,
            "problem_id": problem_id,
            "sample_idx": i,
            "reward": r,
            "correct": None if r is None else r >= 1.0,
            "finish_reason": "length" if i == 0 else "stop",
            "n_tokens": 2,
        }
        for i, r in enumerate(rewards)
    ]


@pytest.fixture
def filled(ledger: Ledger) -> Ledger:
    runs = [_run("s1", "revA", 1.0), _run("s2", "revA", 1.0, "refine"), _run("g1", "revA", 0.0)]
    rows = (
        _rollouts("s1", "mixed", [1.0, 0.0, 0.0, 0.0])
        + _rollouts("s2", "mixed", [1.0, 1.0, 0.0, 0.0])
        + _rollouts("s1", "solved", [1.0, 1.0, 1.0, 1.0])
        + _rollouts("s1", "broken", [None, 0.0, 0.0, 0.0])
        + _rollouts("g1", "mixed", [1.0, 1.0, 1.0, 1.0])  # greedy: not pooled
    )
    ledger.write_batch({"sampling_runs": pl.DataFrame(runs), "rollouts": pl.DataFrame(rows)})
    return ledger


def test_group_stats(filled: Ledger) -> None:
    g = filled.sql("SELECT * FROM group_stats WHERE run_id = 's1' ORDER BY problem_id")
    by = {r["problem_id"]: r for r in g.to_dicts()}
    assert (by["mixed"]["n"], by["mixed"]["k"], by["mixed"]["pass_rate"]) == (4, 1, 0.25)
    assert by["mixed"]["zero_variance"] is False
    assert by["solved"]["zero_variance"] is True
    assert (by["broken"]["n"], by["broken"]["n_errors"], by["broken"]["k"]) == (3, 1, 0)
    assert by["mixed"]["truncated_share"] == pytest.approx(0.25)


def test_prompt_stats_pool_sampled_runs_of_a_revision(filled: Ledger) -> None:
    p = filled.sql("SELECT * FROM prompt_stats WHERE problem_id = 'mixed'").to_dicts()[0]
    assert (p["n_runs"], p["n"], p["k"]) == (2, 8, 3)  # the greedy run is left out
    a, b = 1 + 3, 1 + 8 - 3
    assert p["p_mean"] == pytest.approx(a / (a + b))
    assert p["learnability"] == pytest.approx(a * b / ((a + b) * (a + b + 1)))
    assert p["p_low"] < p["p_mean"] < p["p_high"]


def test_run_summary_histogram_and_shares(filled: Ledger) -> None:
    s = filled.sql("SELECT * FROM run_summary WHERE run_id = 's1'").to_dicts()[0]
    assert s["n_problems"] == 3 and s["n_rollouts"] == 12 and s["n_verifier_errors"] == 1
    assert sum(s["pass_rate_histogram"]) == 3
    assert s["pass_rate_histogram"][0] == 1 and s["pass_rate_histogram"][2] == 1
    assert s["pass_rate_histogram"][9] == 1
    assert s["informative_share"] == pytest.approx(1 / 3)


def test_run_summary_shows_the_budget_and_the_truncation_share(filled: Ledger) -> None:
    filled.run(
        "UPDATE sampling_runs SET max_new_tokens = 256, stop = ['</s>'], prompt_format = 'chat' "
        "WHERE run_id = 's1'"
    )
    s = filled.sql("SELECT * FROM run_summary WHERE run_id = 's1'").to_dicts()[0]
    assert (s["max_new_tokens"], s["prompt_format"]) == (256, "chat")
    assert s["n_truncated"] == 3  # sample 0 of each of the three groups hit the budget
    assert s["truncated_share"] == pytest.approx(3 / 12)
    assert s["mean_tokens"] == pytest.approx(2.0)
    greedy = filled.sql("SELECT * FROM run_summary WHERE run_id = 'g1'").to_dicts()[0]
    assert greedy["n_truncated"] == 1 and greedy["truncated_share"] == pytest.approx(1 / 4)


def _exact_beta_q(a: float, b: float, u: float) -> float:
    f = lambda x: mpmath.betainc(a, b, 0, x, regularized=True) - u  # noqa: E731
    return float(mpmath.findroot(f, (1e-12, 1 - 1e-12), solver="bisect", tol=1e-12))


def test_beta_interval_matches_an_exact_inversion(ledger: Ledger) -> None:
    cases = [(n, k) for n in (1, 2, 4, 8, 16, 32, 64) for k in sorted({0, 1, n // 2, n - 1, n})]
    worst = 0.0
    for n, k in cases:
        a, b = 1.0 + k, 1.0 + n - k
        lo, hi = ledger.run(
            "SELECT sieve_beta_q($a, $b, 0.05), sieve_beta_q($a, $b, 0.95)", {"a": a, "b": b}
        )[0]
        for got, u in ((lo, 0.05), (hi, 0.95)):
            err = abs(got - _exact_beta_q(a, b, u))
            if k in (0, n):
                assert err < 1e-9, (n, k, u)  # closed forms for the all-wrong / all-right groups
            worst = max(worst, err)
    assert worst < 0.005
