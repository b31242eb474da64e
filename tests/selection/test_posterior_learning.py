"""The selection's options (pipeline/selection/posterior.py, learning.py): the learning model's
update rule and drift against numbers worked by hand, the start prior in both models, the default
selection exactly as it was, the "ucb" and coverage scores, the exact predictive metric, the
product's learning model equal to the one the forecast replay scores, and the ledger's prior.

Test: `.venv/bin/pytest tests/selection/test_posterior_learning.py -q`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pytest

from grpo_core.seeds import derive_seed
from grpo_core.types import Item, Sample, Scores
from grpo_core.validate import FieldError
from pipeline.problems import generate
from pipeline.selection.evidence import ledger_cell_prior
from pipeline.selection.forecast import Stream, replay
from pipeline.selection.learning import LEARNING, LearningConfig, LearningModel, RunLearner
from pipeline.selection.posterior import (
    CellPrior,
    Observations,
    PosteriorConfig,
    SelectionConfig,
    posterior_screen,
    posterior_select,
    prompt_posterior,
    select_batch,
)
from pipeline.selection.stats import informative_probability
from pipeline.store import Ledger

LN3 = math.log(3.0)


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_the_learning_update_rule_by_hand() -> None:
    """One prompt x of cell c: 2 of 8 right at update 0, 6 of 8 at update 2; asked at update 5.
    Settings: s = 1, γ = 0.9 per update, forgetting 0.7 per group, cell decay 1, cell strength
    2, no drift.
    - x's evidence at update 2: the first group kept γ² · 0.7 = 0.567, so wk = 0.567 · 2 + 6 =
      7.134 and wn = 0.567 · 8 + 8 = 12.536;
    - at update 5 (3 updates on) it keeps γ³ = 0.729: ek = 5.200686, en = 9.138744;
    - the cell: 8 right of 16, pooled (8 + 1) / (16 + 2) = ½, its yield (8 + 2 · ½) / 18 = ½;
    - α = s · ½ + ek = 5.700686, β = s · ½ + en − ek = 4.438058; mean α / (α + β) = 0.562267;
    - P(informative) of a group of 2 = 1 − E[p²] − E[(1 − p)²] = 2αβ / (t(t + 1)) = 0.448053,
      t = α + β = 10.138744."""
    cfg = LearningConfig(strength=1.0, decay=0.9, forget=0.7, cell_decay=1.0, cell_strength=2.0)
    m = LearningModel(cfg)
    for k, u in ((2.0, 0), (6.0, 2)):
        m.observe(np.array(["x"], dtype=object), np.array(["c"], dtype=object),
                  np.array([k]), np.array([8.0]), u)  # fmt: skip
    a, b = m.predict(np.array(["x"], dtype=object), np.array(["c"], dtype=object), np.ones(1), 5)
    assert (a[0], b[0]) == pytest.approx((5.700686, 4.438058), abs=1e-12)
    t = a[0] + b[0]
    assert a[0] / t == pytest.approx(5.700686 / 10.138744, abs=1e-12)
    p = informative_probability(a, b, np.array([2.0]))[0]
    assert p == pytest.approx(2 * 5.700686 * 4.438058 / (10.138744 * 11.138744), abs=1e-12)
    assert (a[0] / t, p) == pytest.approx((0.562267, 0.448053), abs=1e-6)
    # the product's learner reads the same rows and gives the same numbers
    rows = [["x", "c", 2.0, 8.0, 0], ["x", "c", 6.0, 8.0, 2]]
    a2, b2 = RunLearner(cfg).params(rows, ["x"], ["c"], 5)
    assert (a2[0], b2[0]) == pytest.approx((5.700686, 4.438058), abs=1e-12)


def test_the_drift_fitted_from_revisits_is_the_one_worked_by_hand() -> None:
    """Cell c, 20 prompts each 4 of 8 right at update 0 (yield ½); p0–p9 revisited at update 10
    with 6 of 8 each, p10–p19 at update 30 with 2 of 8 each. Settings: s = 1, no decay, no
    forgetting, no down-weighting (memory 1), cell strength 2, a vanishing ridge: the fit then
    solves its score equations exactly.
    - the update-10 revisits' forecast without drift: (½ + 4) / (1 + 8) = ½, offset logit ½ = 0;
    - at update 30 the cell has 140 right of 240: pooled 141/242, yield m = (140 + 2 · 141/242)
      / 242 = 0.583328; offset o = logit((m + 4) / 9) = 0.037039;
    - drift a + b · gap / 10 with gaps 10 and 30: σ(0 + a + b) = 6/8 and σ(o + a + 3b) = 2/8,
      so a + b = ln 3 and a + 3b = −ln 3 − o: b = (−2 ln 3 − o) / 2 = −1.117132, a = ln 3 − b =
      2.215744 (a revisit right after training is much easier, and the lift fades);
    - p0 asked at update 31 (gap 21, evidence 10 of 16 kept whole under drift): its mean is
      σ(logit((m' + 10) / 17) + a + 2.1 b), m' = ½ the cell's yield after the update-30 groups
      (160 right of 320)."""
    cfg = LearningConfig(strength=1.0, decay=1.0, forget=1.0, cell_decay=1.0, cell_strength=2.0,
                         drift=True, memory=1.0, ridge=1e-9)  # fmt: skip
    first = [[f"p{i}", "c", 4.0, 8.0, 0] for i in range(20)]
    early = [[f"p{i}", "c", 6.0, 8.0, 10] for i in range(10)]
    late = [[f"p{i}", "c", 2.0, 8.0, 30] for i in range(10, 20)]
    learner = RunLearner(cfg)
    a, b = learner.params(first + early + late, ["p0"], ["c"], 31)
    m30 = (140 + 2 * 141 / 242) / 242
    o = logit((m30 + 4) / 9)
    slope = (-2 * LN3 - o) / 2
    lift = LN3 - slope
    assert (m30, o, lift, slope) == pytest.approx(
        (0.583328, 0.037039, 2.215744, -1.117132), abs=1e-6
    )
    pooled, per_cell = learner.model.fit["revisit"]
    assert pooled == pytest.approx([lift, slope], abs=1e-6)
    assert per_cell[0] == pytest.approx([lift, slope], abs=1e-6)  # one cell: its fit is the pool
    m31 = (160 + 2 * 161 / 322) / 322  # 160 right of 320 after the late revisits
    mean = sigmoid(logit((m31 + 10) / 17) + lift + 2.1 * slope)
    assert a[0] / (a[0] + b[0]) == pytest.approx(mean, abs=1e-6)
    assert a[0] + b[0] == pytest.approx(1 + 16, abs=1e-9)  # strength s + evidence (no decay)


def test_the_start_prior_moves_an_unseen_prompt_as_worked_by_hand() -> None:
    """Cell c measured 6 of 8 right at update 0; an unseen prompt of c asked at update 2.
    - static (γ 0.9, s 4, cell strength 8): the prior weighs 0.81, so 4.86 of 6.48; pooled
      (4.86 + 1) / (6.48 + 2) = 0.691038, yield (4.86 + 8 · 0.691038) / 14.48 = 0.717424,
      prompt Beta(4 · 0.717424, 4 · 0.282576); without the prior the yield is ½: Beta(2, 2);
    - learning (LEARNING: cell decay 0.97, cell strength 2, s 1): 0.9409 of it, 5.645400 of
      7.527200; pooled 6.6454 / 9.5272 = 0.697519, yield (5.6454 + 2 · 0.697519) / 9.5272 =
      0.738983, prompt Beta(0.738983, 0.261017)."""
    prior = CellPrior({"c": (6.0, 8.0)})
    prompts = pl.DataFrame({"problem_id": ["new"], "cell": ["c"]})
    empty = Observations().frame()
    got = prompt_posterior(empty, prompts, PosteriorConfig(), 2, prior).row(0, named=True)
    pooled = 5.86 / 8.48
    y = (4.86 + 8 * pooled) / 14.48
    assert (got["alpha"], got["beta"]) == pytest.approx((4 * y, 4 * (1 - y)), abs=1e-12)
    assert y == pytest.approx(0.717424, abs=1e-6)
    none = prompt_posterior(empty, prompts, PosteriorConfig(), 2).row(0, named=True)
    assert (none["alpha"], none["beta"]) == (2.0, 2.0)
    a, b = RunLearner(LEARNING, prior.cells, prior.update).params([], ["new"], ["c"], 2)
    ck, cn = 6 * 0.97**2, 8 * 0.97**2
    pooled = (ck + 1) / (cn + 2)
    y = (ck + 2 * pooled) / (cn + 2)
    assert y == pytest.approx(0.738983, abs=1e-6)
    assert (a[0], b[0]) == pytest.approx((y, 1 - y), abs=1e-12)
    a0, b0 = RunLearner(LEARNING).params([], ["new"], ["c"], 2)
    assert (a0[0], b0[0]) == pytest.approx((0.5, 0.5), abs=1e-12)  # no prior: the pooled ½


def test_a_prior_taken_at_a_later_update_joins_before_that_updates_groups() -> None:
    """The learner adds the prior when its clock reaches the prior's update: asked earlier it is
    not there; asked later it decays from then on, not from update 0."""
    prior = CellPrior({"c": (8.0, 8.0)}, update=5)
    learner = RunLearner(LEARNING, prior.cells, prior.update)
    a, b = learner.params([["z", "d", 4.0, 8.0, 0]], ["x"], ["c"], 3)
    before = a[0] / (a[0] + b[0])
    a, b = learner.params([["z", "d", 4.0, 8.0, 0]], ["x"], ["c"], 5)
    assert before == pytest.approx(0.5, abs=1e-9) and a[0] / (a[0] + b[0]) > 0.8


class Fake:
    """Rollouts whose prompt `key` gets `right[key]` of its G samples right."""

    def __init__(self, right: dict[str, int]) -> None:
        from grpo_core.config import GRPOConfig

        self.right, self.cfg, self.calls = right, GRPOConfig(), 0

    def step_seed(self, step: int, round_: int = 0) -> int:
        return step

    def sample_and_score(self, items: Sequence[Item], seed: int, sizes: Any = None) -> Any:
        self.calls += 1
        g = sizes or [it.group_size for it in items]
        groups = [[Sample((1,), f"{it.key}{i}", False) for i in range(n)]
                  for it, n in zip(items, g, strict=True)]  # fmt: skip
        ok = [i < self.right[it.key] for it, n in zip(items, g, strict=True) for i in range(n)]
        return groups, Scores([float(x) for x in ok], list(ok)), 0.0, 0.0


def pool(prompts: int = 40) -> tuple[list[Item], dict[str, str], dict[str, int]]:
    rng = np.random.default_rng(3)
    keys = [f"k{i}" for i in range(prompts)]
    cell_of = {k: f"c{i % 4}" for i, k in enumerate(keys)}
    right = {k: int(rng.integers(0, 5)) for k in keys}
    return [Item(k, k, 4, key=k) for k in keys], cell_of, right


def test_the_default_selection_is_todays_draw_for_draw() -> None:
    """The default (static model, Thompson draws, no coverage, no prior) picks what the
    selection always picked: per step, the static posterior of the candidates, one Beta draw
    each from the step's generator, the `batch` largest p(1 − p), ties in candidate order."""
    items, cell_of, right = pool()

    def source(step: int, _round: int) -> list[Item]:
        return [items[int(i)] for i in np.random.default_rng(step).choice(40, 16, replace=False)]

    obs = Observations()
    collect = posterior_select(source, cell_of, obs, 4, seed=11)
    mirror = Observations()
    for step in range(12):
        got = [it.key for it in collect(Fake(right), step).items]
        cands = source(step, 0)
        prompts = pl.DataFrame({"problem_id": [it.key for it in cands],
                                "cell": [cell_of[it.key] for it in cands]})  # fmt: skip
        post = prompt_posterior(mirror.frame(), prompts, PosteriorConfig(), step)
        rng = np.random.default_rng(derive_seed(11, "posterior", step))
        p = rng.beta(post["alpha"].to_numpy(), post["beta"].to_numpy())
        want = [cands[int(i)].key for i in np.argsort(-(p * (1 - p)), kind="stable")[:4]]
        assert got == want, step
        for key in want:
            mirror.add(key, cell_of[key], right[key], 4, step)
    assert obs.rows == mirror.rows


def test_ucb_ranks_by_mean_and_spread_of_the_learnability() -> None:
    """Beta(1, 1): E[p(1 − p)] = 1/6, E[p²(1 − p)²] = 1·2·1·2 / (2·3·4·5) = 1/30, sd = √(1/180)
    = 0.0745; Beta(5, 5): 25/110 = 0.2273, E[..²] = 900/17160, sd = 0.0282. At κ = 1: 0.2412
    against 0.2555, the surer prompt first; at κ = 2: 0.3157 against 0.2837, the unsure one."""
    a, b = np.array([1.0, 5.0]), np.array([1.0, 5.0])
    rng = np.random.default_rng(0)
    sd1, sd5 = math.sqrt(1 / 30 - 1 / 36), math.sqrt(900 / 17160 - (25 / 110) ** 2)
    assert (1 / 6 + sd1, 25 / 110 + sd5) == pytest.approx((0.2412, 0.2555), abs=1e-4)
    assert select_batch(a, b, 2, rng, SelectionConfig(score="ucb", kappa=1.0)).tolist() == [1, 0]
    assert select_batch(a, b, 2, rng, SelectionConfig(score="ucb", kappa=2.0)).tolist() == [0, 1]


def test_coverage_puts_an_unseen_prompt_before_a_revisit_of_equal_learnability() -> None:
    """Two Beta(5, 5) prompts, the first seen 3 times: at ρ = 1 it scores ¼ of the second's; at
    ρ = 0 (the default) they tie and keep their order. Thompson draws get the same factor."""
    a, b, seen = np.array([5.0, 5.0]), np.array([5.0, 5.0]), np.array([3.0, 0.0])
    rng = np.random.default_rng(0)
    ucb = SelectionConfig(score="ucb", kappa=0.0)
    assert select_batch(a, b, 2, rng, ucb, seen).tolist() == [0, 1]
    cover = SelectionConfig(score="ucb", kappa=0.0, coverage=1.0)
    assert select_batch(a, b, 2, rng, cover, seen).tolist() == [1, 0]
    twins = np.full(200, 5.0)
    visits = np.r_[np.full(100, 8.0), np.zeros(100)]
    thompson = SelectionConfig(coverage=1.0)
    picked = select_batch(twins, twins, 100, np.random.default_rng(1), thompson, visits)
    assert (picked >= 100).all()  # x 1/9: no revisit's draw beats an unseen prompt's


def test_the_metric_is_the_posterior_predictive_not_the_plug_in() -> None:
    """With no evidence every prompt is Beta(2, 2) (yield ½, s = 4): a group of 4 is flat with
    probability 2 · (2·3·4·5) / (4·5·6·7) = 2/7, so informative with 5/7 (at the mean ½ it would
    read 1 − 2/16 = 7/8)."""
    items, cell_of, right = pool()
    c = posterior_select(lambda s, r: items, cell_of, Observations(), 4, seed=0)(Fake(right), 0)
    assert c.metrics["predicted_informative"] == pytest.approx(5 / 7, abs=1e-12)


@pytest.mark.parametrize("score", ["thompson", "ucb"])
def test_the_learning_model_selects_and_learns_through_both_collectors(score: str) -> None:
    items, cell_of, right = pool()
    select = SelectionConfig(model="learning", score=score, coverage=0.5)
    prior = CellPrior.from_rates({"c0": 0.5, "c1": 0.0}, 16)
    assert prior.cells == {"c0": (8.0, 16.0), "c1": (0.0, 16.0)}
    obs, fake = Observations(), Fake(right)
    collect = posterior_select(lambda s, r: items, cell_of, obs, 4, 0, select=select, prior=prior)
    for step in range(8):
        c = collect(fake, step)
        assert len(c.items) == 4 and 0 < c.metrics["predicted_informative"] < 1
    assert len(obs.rows) == 32
    screened = posterior_screen(lambda s, r: items, cell_of, Observations(), 4, 0,
                                select=select, prior=prior)  # fmt: skip
    assert len(screened(Fake(right), 0).items) == 4


def test_the_products_learner_is_the_model_the_forecast_replay_scores() -> None:
    """Every group's Beta from the learner (fed the rows of earlier updates, as the collector
    feeds it) equals the replay's, prior included; rows loaded out of order start it again."""
    rng = np.random.default_rng(5)
    rows = [[f"p{i}", f"c{i % 3}", float(rng.integers(0, 9)), 8.0, u]
            for u in range(12) for i in rng.choice(15, 5, replace=False)]  # fmt: skip
    prior = {"c0": (3.0, 16.0), "c2": (12.0, 16.0)}
    a, b = replay(Stream.from_rows(rows), LearningModel(LEARNING, prior))
    learner = RunLearner(LEARNING, prior)
    for u in range(12):
        at = [i for i, r in enumerate(rows) if r[4] == u]
        before = [r for r in rows if r[4] < u]
        got = learner.params(before, [rows[i][0] for i in at], [rows[i][1] for i in at], u)
        assert np.allclose(got, (a[at], b[at]), rtol=0, atol=1e-12), u
    whole = learner.params(rows, ["p0"], ["c0"], 12)
    late = RunLearner(LEARNING, prior)
    late.params(rows[:20], ["p0"], ["c0"], 12)  # its clock at 12, then older rows arrive
    assert np.allclose(late.params(rows[:20] + rows[20:], ["p0"], ["c0"], 12), whole,
                       rtol=0, atol=1e-12)  # fmt: skip


def test_settings_are_checked_where_they_are_built() -> None:
    with pytest.raises(FieldError, match="model"):
        SelectionConfig(model="dynamic")  # type: ignore[arg-type]
    with pytest.raises(FieldError, match="coverage"):
        SelectionConfig(coverage=-1.0)
    with pytest.raises(ValueError, match="0 ≤ k ≤ n"):
        CellPrior({"c": (9.0, 8.0)})


def test_the_ledgers_cell_prior_is_one_revisions_sampled_pass_rate() -> None:
    """Revision r0 sampled arith 1 twice (3 and 1 of 4 right) and arith 2 once (4 of 4); r1's
    and greedy samples do not count: arith 1 is 4 of 8, arith 2 4 of 4; capped at 4 samples a
    cell, arith 1 keeps its rate (2 of 4)."""
    probs = generate("arith", [1, 2], 6, seed=1)
    one = probs.filter(pl.col("level") == 1)["problem_id"].to_list()
    two = probs.filter(pl.col("level") == 2)["problem_id"].to_list()
    with Ledger.memory() as ledger:
        ledger.write("problems", probs)
        runs = [("a", "r0", 1.0), ("b", "r1", 1.0), ("g", "r0", 0.0)]
        ledger.write(
            "sampling_runs",
            pl.DataFrame(
                [(r, "screen", "m", v, "hf", 4, t, "finished") for r, v, t in runs],
                schema=["run_id", "purpose", "model", "model_revision", "backend", "group_size",
                        "temperature", "status"],
                orient="row",
            ),
        )  # fmt: skip
        right = [("a", one[0], 3), ("a", one[1], 1), ("a", two[0], 4), ("b", one[0], 0),
                 ("g", one[0], 4)]  # fmt: skip
        ledger.write(
            "rollouts",
            pl.DataFrame(
                [(r, p, i, float(i < k), i < k) for r, p, k in right for i in range(4)],
                schema=["run_id", "problem_id", "sample_idx", "reward", "correct"],
                orient="row",
            ),
        )
        prior = ledger_cell_prior(ledger, "r0")
        capped = ledger_cell_prior(ledger, "r0", samples=4.0, update=7)
        assert ledger_cell_prior(ledger, "elsewhere") is None
    assert prior is not None and capped is not None
    assert prior.cells == {"arith 1": (4.0, 8.0), "arith 2": (4.0, 4.0)}
    assert capped.cells == {"arith 1": (2.0, 4.0), "arith 2": (4.0, 4.0)} and capped.update == 7


@pytest.mark.parametrize("shift", [-1e4, -800.0, -40.0, 0.0, 40.0, 800.0, 1e4, np.inf, -np.inf,
                                   np.nan])  # fmt: skip
@pytest.mark.parametrize("m", [0.0, 1e-300, 0.3, 1.0])
@pytest.mark.parametrize("strength", [1e-6, 2.0, 64.0])
def test_the_predictive_is_a_proper_beta_whatever_the_shift(
    shift: float, m: float, strength: float
) -> None:
    """A run's fitted drift can run off (a share05 regime-map run overflowed σ and drew from
    Beta(0, β)): whatever the shift, the cell yield and the strength, α and β are finite and
    > 0, and a finite shift still moves the mean the way it points."""
    from pipeline.selection.learning import beta_predictive

    part = {"m": np.array([m, m]), "ek": np.array([0.0, 3.0]), "en": np.array([0.0, 8.0]),
            "en_w": np.array([0.0, 8.0]), "shift": np.array([shift, shift])}  # fmt: skip
    a, b = beta_predictive(strength, part)
    assert np.all(np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0))
    np.random.default_rng(0).beta(a, b)  # what Thompson selection draws
    if np.isfinite(shift) and abs(shift) >= 40:
        still = dict(part, shift=np.zeros(2))
        a0, b0 = beta_predictive(strength, still)
        mean, mean0 = a / (a + b), a0 / (a0 + b0)
        assert np.all(mean >= mean0) if shift > 0 else np.all(mean <= mean0)
