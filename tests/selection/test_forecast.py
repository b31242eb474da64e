"""The forecast replay (pipeline/selection/forecast.py): the Beta-binomial informative probability
against enumeration and a hand-worked number; no look-ahead for any model; the learning model at
its product settings is the product's posterior; its fits recover known shifts and strengths; on
a synthetic run whose pass rates rise with training it beats the static model, and on a static
run it does not; the replay of a committed sieve run gives the numbers the run recorded.

Test: `.venv/bin/pytest tests/selection/test_forecast.py -q`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.selection.forecast import (
    STRENGTHS,
    LearningConfig,
    LearningModel,
    MoppsPosterior,
    ProductPosterior,
    Stream,
    fit_shift,
    informative_probability,
    matched_strength,
    quarters,
    replay,
    scores,
)
from pipeline.selection.posterior import flat_probability

ROOT = Path(__file__).resolve().parents[2]
LEARNING = LearningConfig(strength=1.0, forget=0.7, cell_strength=2.0, cell_decay=0.97,
                          drift=True, cell_shift=True)  # fmt: skip
STATIC = LearningConfig(strength=1.0, forget=0.7, cell_strength=2.0, cell_decay=0.97)
MATCHED = LearningConfig(strength=None, forget=0.7, drift=True, cell_shift=True)


def enumerate_informative(a: float, b: float, n: int) -> float:
    """Σ_{0<k<n} C(n, k) B(a + k, b + n − k) / B(a, b), term by term."""

    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return sum(
        math.comb(n, k) * math.exp(log_beta(a + k, b + n - k) - log_beta(a, b)) for k in range(1, n)
    )


@settings(max_examples=200, deadline=None)
@given(
    a=st.floats(0.05, 50.0),
    b=st.floats(0.05, 50.0),
    n=st.integers(1, 16),
)
def test_informative_probability_is_the_beta_binomial_sum(a: float, b: float, n: int) -> None:
    got = informative_probability(np.array([a]), np.array([b]), np.array([float(n)]))[0]
    assert got == pytest.approx(enumerate_informative(a, b, n), abs=1e-10)
    flat = flat_probability(np.array([a]), np.array([b]), n)[0, n - 1]
    assert got == pytest.approx(1.0 - flat, abs=1e-12)


def test_informative_probability_by_hand() -> None:
    # Beta(2, 2), G = 8: E[p^8] = E[(1 − p)^8] = (2·3)/(10·11), so P = 1 − 12/110 = 98/110;
    # at the mean (p = ½, the trainer's metric) it would be 1 − 2/256 = 0.992
    a, b = np.array([2.0, 1.0, 3.0]), np.array([2.0, 1.0, 5.0])
    got = informative_probability(a, b, np.array([8.0, 4.0, 1.0]))
    assert got[0] == pytest.approx(98 / 110, abs=1e-12)
    assert got[1] == pytest.approx(1 - 2 / 5, abs=1e-12)  # uniform p: P(k = 0) = 1/(n + 1)
    assert got[2] == 0.0  # one sample never disagrees with itself


def random_rows(seed: int, updates: int = 8, batch: int = 5) -> list[tuple]:
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(updates):
        for i in rng.choice(12, batch, replace=False):
            n = float(rng.choice([4, 8]))
            rows.append((f"p{i}", f"c{i % 3}", float(rng.integers(0, n + 1)), n, u))
    return rows


MODELS = {
    "posterior": ProductPosterior,
    "mopps": MoppsPosterior,
    "learning": lambda: LearningModel(LEARNING),
    "matched": lambda: LearningModel(MATCHED, {"c0": (3.0, 16.0)}),
}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 7), model=st.sampled_from(list(MODELS)))
def test_a_forecast_does_not_see_its_own_update_or_later(seed: int, cut: int, model: str) -> None:
    """Change every group of update ≥ `cut` (outcomes, and one more group): the forecasts of
    all groups up to and including update `cut` stay the same."""
    rows = random_rows(seed)
    altered = [r if r[4] < cut else (r[0], r[1], (r[2] + 1) % (r[3] + 1), r[3], r[4])
               for r in rows] + [("p0", "c0", 8.0, 8.0, 7)]  # fmt: skip
    a1, b1 = replay(Stream.from_rows(rows), MODELS[model]())
    a2, b2 = replay(Stream.from_rows(altered), MODELS[model]())
    upto = np.array([r[4] <= cut for r in rows])
    assert np.array_equal(a1[upto], a2[: len(rows)][upto])
    assert np.array_equal(b1[upto], b2[: len(rows)][upto])
    if model != "mopps" and cut < 7:  # pooled over the cell: every later forecast moves
        assert not np.array_equal(a1[~upto], a2[: len(rows)][~upto])


def test_at_the_products_settings_the_learning_model_is_the_product() -> None:
    stream = Stream.from_rows(random_rows(3, updates=20, batch=6))
    a1, b1 = replay(stream, ProductPosterior())
    a2, b2 = replay(stream, LearningModel(LearningConfig()))
    assert np.max(np.abs(a1 - a2)) < 1e-9 and np.max(np.abs(b1 - b2)) < 1e-9


def test_fit_shift_recovers_a_known_shift_per_group() -> None:
    rng = np.random.default_rng(0)
    rows, truth = 20_000, np.array([[0.7, -0.3], [-0.5, 0.4]])
    group = rng.integers(0, 2, rows)
    x = np.stack([np.ones(rows), rng.uniform(0, 3, rows)], axis=1)
    offset = rng.normal(0, 1, rows)
    p = 1 / (1 + np.exp(-(offset + np.sum(x * truth[group], axis=1))))
    n = np.full(rows, 8.0)
    k = rng.binomial(8, p).astype(np.float64)
    got = fit_shift(offset, k, n, x, np.ones(rows), group, np.zeros((2, 2)), 1e-6)
    assert np.max(np.abs(got - truth)) < 0.06
    # a ridge toward a centre with no rows returns the centre
    empty = np.zeros(0)
    centre = np.array([[0.2, 0.1]])
    assert np.array_equal(fit_shift(empty, empty, empty, np.zeros((0, 2)), empty,
                                    np.zeros(0, dtype=np.int64), centre, 5.0), centre)  # fmt: skip


def test_matched_strength_finds_the_strength_the_groups_came_from() -> None:
    rng = np.random.default_rng(1)
    s, m, groups = 1.5, np.array([0.2, 0.6]), 20_000
    mean = m[rng.integers(0, 2, groups)]
    k = rng.binomial(8, rng.beta(s * mean, s * (1 - mean)))
    y = ((k > 0) & (k < 8)).astype(np.float64)
    n = np.full(groups, 8.0)

    def informative(grid: np.ndarray) -> np.ndarray:
        a, b = grid * mean[:, None], grid * (1 - mean[:, None])
        return informative_probability(a.ravel(), b.ravel(), np.repeat(n, len(grid))).reshape(
            a.shape
        )

    assert matched_strength(informative, y, np.ones(groups), prior=0.0) == pytest.approx(s, 0.1)
    assert matched_strength(informative, y, np.zeros(groups), prior=2.0) == 4.0  # no data: s0
    assert STRENGTHS[0] < s < STRENGTHS[-1]


def synthetic(seed: int, learns: bool, prompts: int = 80, updates: int = 30) -> Stream:
    """Prompts in 4 cells of different difficulty, 16 drawn a update, 8 samples each; when the
    policy `learns`, a trained prompt's logit rises by 0.6 and every prompt's by 0.03 a update."""
    rng = np.random.default_rng(seed)
    cell = np.arange(prompts) % 4
    theta = rng.normal(np.array([-2.0, -0.5, 0.5, 1.5])[cell], 1.5)
    rows = []
    for u in range(updates):
        picked = rng.choice(prompts, 16, replace=False)
        for i in picked:
            k = rng.binomial(8, 1 / (1 + np.exp(-theta[i])))
            rows.append((f"p{i}", f"c{cell[i]}", float(k), 8.0, u))
        if learns:
            theta[picked] += 0.6
            theta += 0.03
    return Stream.from_rows(rows)


def brier(stream: Stream, cfg: LearningConfig) -> float:
    a, b = replay(stream, LearningModel(cfg))
    return float(np.mean((informative_probability(a, b, stream.n) - stream.informative) ** 2))


def test_the_learning_model_wins_where_training_moves_pass_rates_and_only_there() -> None:
    rising = np.array([brier(s, LEARNING) - brier(s, STATIC)
                       for s in (synthetic(i, learns=True) for i in range(4))])  # fmt: skip
    still = np.array([brier(s, LEARNING) - brier(s, STATIC)
                      for s in (synthetic(i, learns=False) for i in range(4))])  # fmt: skip
    assert np.all(rising < 0) and rising.mean() < -0.01
    assert still.mean() > -0.002  # nothing to learn: no win (a little variance, a little loss)


def test_scores_by_hand() -> None:
    p_inf, p_hat = np.array([0.9, 0.2, 0.5, 0.5]), np.array([0.5, 0.0, 0.25, 1.0])
    k, n = np.array([4.0, 0.0, 8.0, 2.0]), np.array([8.0, 8.0, 8.0, 8.0])  # y = 1, 0, 0, 1
    got = scores(p_inf, p_hat, k, n, np.array([0, 0, 1, 1]))
    assert got["brier"] == pytest.approx((0.01 + 0.04 + 0.25 + 0.25) / 4)
    assert got["log_loss"] == pytest.approx(-(np.log(0.9) + np.log(0.8) + 2 * np.log(0.5)) / 4)
    assert got["rate_mae"] == pytest.approx((0.0 + 0.0 + 0.75 + 0.75) / 4)
    assert [q["error"] for q in got["parts"]] == pytest.approx([abs(0.55 - 0.5), 0.0])
    assert quarters(np.array([3, 4, 5, 6, 7, 8, 9, 10])).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_observations_out_of_update_order_are_refused() -> None:
    with pytest.raises(ValueError, match="update order"):
        Stream.from_rows([("a", "c", 1.0, 8.0, 2), ("b", "c", 1.0, 8.0, 1)])


def test_the_replay_gives_the_predicted_informative_a_sieve_run_recorded() -> None:
    path = ROOT / "benchmarks/results/headline_runs/warm_sieve_s1.json"
    if not path.is_file():
        pytest.skip("the committed headline run is not in this checkout")
    run = json.loads(path.read_text())
    stream = Stream.from_rows(run["state"]["observations"])
    a, b = replay(stream, ProductPosterior())
    m = a / (a + b)
    at_mean = 1 - m**stream.n - (1 - m) ** stream.n
    for u in np.unique(stream.update):
        recorded = run["steps"][int(u)]["predicted_informative"]
        assert float(at_mean[stream.update == u].mean()) == pytest.approx(recorded, abs=1e-12)
