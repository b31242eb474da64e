"""`build_curriculum`: the band, the hard stage, replay, weights, positions, determinism."""

from __future__ import annotations

import functools
import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import SieveError
from pipeline.selection.config import TINY_CURATE, CurateConfig
from pipeline.selection.curriculum import ITEM_SCHEMA, build_curriculum
from pipeline.selection.rules import REJECTION_SCHEMA, stable_uniform
from pipeline.selection.stats import posterior
from pipeline.store import Ledger
from tests.selection.frames import binary_spread

CFG = CurateConfig(replay_share=0.5)


def counts(rows: list[tuple[str, int, int]]) -> pl.DataFrame:
    """Pooled stats of binary groups (reward = correctness): k of n right, and the spread."""
    schema = {"problem_id": pl.Utf8, "n": pl.Int64, "k": pl.Int64}
    return binary_spread(pl.DataFrame(rows, schema=schema, orient="row"))


POOLED = counts(
    [
        ("mid_a", 40, 20),  # p_low 0.36, p_high 0.63: stage 1
        ("mid_b", 40, 10),  # p_low 0.16: stage 1
        ("hard", 40, 3),  # p_mean 0.095 < 0.2, solved: stage 2
        ("too_hard", 400, 1),  # p_mean 0.005: needs G > 64 -> out_of_band
        ("wrong", 40, 0),  # never solved after refine: all_wrong
        ("near_solved", 40, 38),  # p_high > 0.9: out_of_band
    ]
)
EASY = counts([(f"easy{i}", 8, 8) for i in range(5)])


def test_each_prompt_gets_its_stage_and_reason() -> None:
    items, rejected = build_curriculum(POOLED, EASY, CFG)
    by = {r["problem_id"]: r for r in items.to_dicts()}
    replayed = [p for p, r in by.items() if r["reason"] == "replay"]
    assert {p: by[p]["reason"] for p in ("mid_a", "mid_b", "hard")} == {
        "mid_a": "mid_band", "mid_b": "mid_band", "hard": "hard",
    }  # fmt: skip
    assert (by["mid_a"]["stage"], by["mid_a"]["group_size"]) == (1, CFG.stage1_g)
    # p_mean 4/42 = 0.095: G = ceil(ln 0.1 / ln(38/42)) = ceil(2.3026 / 0.1001) = 24
    assert (by["hard"]["stage"], by["hard"]["group_size"]) == (2, 24)
    assert dict(rejected.filter(~pl.col("problem_id").str.starts_with("easy")).iter_rows()) == {
        "too_hard": "out_of_band", "wrong": "all_wrong", "near_solved": "out_of_band",
    }  # fmt: skip
    # replay: round(0.5 x 2 stage-1 items) = 1, the easy prompt with the smallest stable_uniform
    first = min(EASY["problem_id"], key=lambda p: stable_uniform(CFG.seed, p, "replay"))
    assert replayed == [first] and by[first]["weight"] == CFG.replay_weight
    assert by[first]["stage"] == 1 and by[first]["group_size"] == CFG.stage1_g
    easy_rejected = rejected.filter(pl.col("problem_id").str.starts_with("easy"))
    assert easy_rejected.height == 4 and (easy_rejected["reason"] == "all_correct").all()


def test_rewards_decide_informative_and_verdicts_only_label() -> None:
    schema = ["problem_id", "n", "k", "reward_min", "reward_max"]
    rows = [
        ("format_mid", 40, 20, 0.4, 1.0),  # informative, mid-band pass rate: stage 1
        ("partial", 40, 0, 0.0, 0.5),  # never right but rewards spread: informative
        ("flat_mid", 40, 20, 0.5, 0.5),  # mid-band pass rate, equal rewards: no signal
        ("flat_right", 40, 40, 1.0, 1.0),
        ("flat_wrong", 40, 0, 0.0, 1e-9),
    ]
    pooled = pl.DataFrame(rows, schema=schema, orient="row")
    items, rejected = build_curriculum(pooled, counts([]), CFG)
    assert items.select("problem_id", "reason").rows() == [("format_mid", "mid_band")]
    assert dict(rejected.iter_rows()) == {
        "partial": "out_of_band",  # outside the band, not all_wrong: its rewards carry signal
        "flat_mid": "zero_variance",
        "flat_right": "all_correct",
        "flat_wrong": "all_wrong",
    }
    wide = CurateConfig(band_low=0.0, band_high=1.0)
    items, rejected = build_curriculum(pooled, counts([]), wide)
    assert set(items["problem_id"]) == {"format_mid", "partial"}  # exactly the informative ones
    assert set(rejected["problem_id"]) == {"flat_mid", "flat_right", "flat_wrong"}
    with pytest.raises(SieveError, match="reward_min, reward_max"):
        build_curriculum(pooled.drop("reward_min", "reward_max"), counts([]), CFG)


def test_weights_positions_and_schema() -> None:
    items, rejected = build_curriculum(POOLED, EASY, CFG)
    assert items.schema == pl.Schema(ITEM_SCHEMA) and rejected.schema == pl.Schema(REJECTION_SCHEMA)
    main = items.filter(pl.col("reason") != "replay")
    assert main["weight"].mean() == pytest.approx(1.0)
    learn = posterior(POOLED).select("problem_id", "learnability")
    joined = main.join(learn, on="problem_id")
    ratio = joined["weight"] / joined["learnability"]
    assert ratio.max() == pytest.approx(ratio.min())
    assert items["position"].to_list() == list(range(items.height))
    assert items["stage"].is_sorted()
    stage1 = items.filter(pl.col("stage") == 1).join(learn, on="problem_id", how="left")
    assert stage1["problem_id"].to_list()[:2] == ["mid_a", "mid_b"]  # higher learnability first
    assert not set(items["problem_id"]) & set(rejected["problem_id"])
    assert items.height + rejected.height == POOLED.height + EASY.height


def test_row_order_does_not_matter() -> None:
    a = build_curriculum(POOLED, EASY, CFG)
    b = build_curriculum(POOLED.reverse(), EASY.sample(fraction=1.0, shuffle=True, seed=3), CFG)
    assert a[0].equals(b[0]) and a[1].equals(b[1])


def test_empty_inputs_give_empty_frames() -> None:
    items, rejected = build_curriculum(counts([]), counts([]), CFG)
    assert items.height == rejected.height == 0
    assert items.schema == pl.Schema(ITEM_SCHEMA) and rejected.schema == pl.Schema(REJECTION_SCHEMA)
    only_easy = build_curriculum(counts([]), EASY, CFG)
    assert only_easy[0].height == 0 and (only_easy[1]["reason"] == "all_correct").all()


def test_bad_inputs_raise() -> None:
    with pytest.raises(SieveError, match="both"):
        build_curriculum(POOLED, counts([("mid_a", 8, 8)]), CFG)
    with pytest.raises(SieveError, match="several rows"):
        build_curriculum(pl.concat([POOLED, POOLED]), EASY, CFG)


# Expected outcomes by hand, default config (band [0.1, 0.9], hard_max_p 0.2, stage1_g 8, G
# target 0.9, cap 64), for binary groups (k of n right, reward = correctness). How each number
# was found, without the code under test:
# - p_mean = (k + 1) / (n + 2), the mean of the Beta(k + 1, n - k + 1) posterior.
# - p_low / p_high, its 5 % / 95 % quantiles: for integer shapes P(Beta(a, b) <= x) =
#   P(Binomial(a + b - 1, x) >= a), solved for x (and for k = 0, p_high = 1 - 0.05^(1/(n + 1))).
# - G, the smallest group with 1 - p^G - (1 - p)^G >= 0.9 at p = p_mean; p^G is negligible here,
#   so G = ceil(ln 0.1 / ln(1 - p_mean)) = ceil(2.3026 / -ln(1 - p_mean)).
# - stage 2 is open at n when some count 1 <= k' < n has p_mean < 0.2 and G <= 64: at n = 12
#   k' = 1 has (2/14 = 0.143, G = 15), at n = 40 too (2/42 = 0.048, G = 48).
BY_HAND = {
    # n = 12, the issue 46 case: k = 1 and k = 2 both go to stage 2
    (12, 0): ("all_wrong", None),  # never right: an uninformative group, labelled by verdicts
    (12, 1): ("hard", 15),  # p_mean 2/14 = 0.143 < 0.2; G = ceil(2.3026 / 0.1542) = 15
    # p_mean 3/14 = 0.214 >= 0.2, but below the band (p_low 0.066 < 0.1, p_high 0.410 <= 0.9)
    # with stage 2 open at n = 12; G = ceil(2.3026 / -ln(11/14) = 0.2412) = 10
    (12, 2): ("hard", 10),
    (12, 3): ("mid_band", 8),  # p_low 0.113 >= 0.1, p_high 0.495 <= 0.9
    (12, 9): ("mid_band", 8),  # p_low 0.505, p_high 0.887 <= 0.9
    (12, 10): ("out_of_band", None),  # p_high 0.934 > 0.9; p_mean 11/14 is not hard
    (12, 12): ("all_correct", None),
    # n = 40, POOLED's n
    (40, 1): ("hard", 48),  # p_mean 2/42 = 0.048; G = ceil(2.3026 / 0.0488) = ceil(47.2)
    (40, 3): ("hard", 24),  # 4/42 = 0.095; G = ceil(2.3026 / 0.1001) = ceil(23.007) = 24
    (40, 6): ("hard", 13),  # 7/42 = 1/6; G = ceil(2.3026 / 0.1823) = ceil(12.6) = 13
    (40, 7): ("mid_band", 8),  # p_low 0.1010 >= 0.1: the first k in the band (p_mean 0.19)
    (40, 33): ("mid_band", 8),  # p_high 0.8990 <= 0.9: the last k in the band
    (40, 34): ("out_of_band", None),  # p_high 0.917 > 0.9
    (400, 1): ("out_of_band", None),  # p_mean 0.005 < 0.2, but G = 461 > 64
}


@pytest.mark.parametrize(("n", "k"), sorted(BY_HAND))
def test_outcome_of_a_count_matches_the_hand_computation(n: int, k: int) -> None:
    items, rejected = build_curriculum(counts([("p", n, k)]), counts([]), CurateConfig())
    got = [(r["reason"], r["group_size"]) for r in items.to_dicts()]
    got += [(reason, None) for _, reason in rejected.iter_rows()]
    assert got == [BY_HAND[n, k]]


def test_a_config_whose_stage_2_is_closed_at_n_keeps_only_its_band() -> None:
    """hard_max_p 0.1 at n = 12: the smallest p_mean of a solved count is 2/14 = 0.143 >= 0.1, so
    stage 2 takes nothing and k = 1, 2 (below the band: p_low 0.028, 0.066 < 0.1) are out of it;
    k = 3 (p_low 0.113) is in the band, as with the default config."""
    cfg = CurateConfig(hard_max_p=0.1)
    kept = kept_counts(cfg, 12)
    assert kept == {k: "mid_band" for k in range(3, 10)}


# The property test's own oracle, independent of pipeline.selection: the exact Beta CDF through
# the binomial identity above, and G by its definition. The implementation's quantiles are
# Abramowitz & Stegun approximations (absolute error < 0.005), so a prompt whose exact quantile
# lies within MARGIN of a band edge is not asserted (BY_HAND pins such edges).
MARGIN = 0.006


def beta_cdf(x: float, a: int, b: int) -> float:
    """P(Beta(a, b) <= x) = P(Binomial(a + b - 1, x) >= a), exactly (integer a, b >= 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    m = a + b - 1
    return sum(math.comb(m, j) * x**j * (1 - x) ** (m - j) for j in range(a, m + 1))


def smallest_g(p: float, target: float, cap: int) -> int | None:
    """The smallest G in [2, cap] with 1 - p^G - (1 - p)^G >= target, or None."""
    return next((g for g in range(2, cap + 1) if 1 - p**g - (1 - p) ** g >= target), None)


@functools.cache
def stage2_open(hard_max_p: float, target: float, cap: int, n: int) -> bool:
    """Whether some solved, not always solved count k at n has p_mean < hard_max_p and a G."""
    return any(
        (k + 1) / (n + 2) < hard_max_p and smallest_g((k + 1) / (n + 2), target, cap) is not None
        for k in range(1, n)
    )


def expected_outcome(cfg: CurateConfig, n: int, k: int) -> tuple[str, int | None] | None:
    """(reason, group size) of a binary group with k of n right, or None near a band edge."""
    if k in (0, n):
        return ("all_wrong", None) if k == 0 else ("all_correct", None)
    a, b = k + 1, n - k + 1
    low, high = cfg.band_low, cfg.band_high
    low_ok = beta_cdf(low + MARGIN, a, b) <= 0.05  # p_low >= low + MARGIN
    low_short = beta_cdf(low - MARGIN, a, b) > 0.05  # p_low < low - MARGIN
    high_ok = beta_cdf(high - MARGIN, a, b) >= 0.95  # p_high <= high - MARGIN
    high_over = beta_cdf(high + MARGIN, a, b) < 0.95  # p_high > high + MARGIN
    if not (low_ok or low_short) or not (high_ok or high_over):
        return None
    if low_ok and high_ok:
        return ("mid_band", cfg.stage1_g)
    p_mean = a / (a + b)
    open_ = stage2_open(cfg.hard_max_p, cfg.informative_target, cfg.max_group_size, n)
    if p_mean < cfg.hard_max_p or (open_ and low_short and high_ok):
        g = smallest_g(p_mean, cfg.informative_target, cfg.max_group_size)
        return ("out_of_band", None) if g is None else ("hard", g)
    return ("out_of_band", None)


def test_the_oracle_agrees_with_the_hand_computation() -> None:
    """The property test's oracle, checked on the hand-computed counts (those off a band edge)."""
    for (n, k), want in BY_HAND.items():
        got = expected_outcome(CurateConfig(), n, k)
        assert got in (want, None), (n, k)
    assert sum(expected_outcome(CurateConfig(), n, k) is not None for n, k in BY_HAND) >= 11


pooled_rows = st.lists(
    st.integers(1, 120).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(pooled_rows, st.floats(0.0, 0.4), st.floats(0.6, 1.0))
def test_band_logic_holds_for_every_prompt(
    rows: list[tuple[int, int]], low: float, high: float
) -> None:
    """Every prompt's reason and group size, against the oracle above (not the posterior code)."""
    cfg = CurateConfig(band_low=low, band_high=high)
    pooled = counts([(f"p{i:03d}", n, k) for i, (n, k) in enumerate(rows)])
    items, rejected = build_curriculum(pooled, counts([]), cfg)
    got = {r["problem_id"]: (r["reason"], r["group_size"]) for r in items.to_dicts()}
    got |= {pid: (reason, None) for pid, reason in rejected.iter_rows()}
    assert len(got) == len(rows)
    for i, (n, k) in enumerate(rows):
        want = expected_outcome(cfg, n, k)
        if want is not None:
            assert got[f"p{i:03d}"] == want, (n, k, low, high)


def kept_counts(cfg: CurateConfig, n: int) -> dict[int, str]:
    """k -> reason of every kept binary group with k of n right (k = 0..n at once)."""
    pooled = counts([(f"k{k:04d}", n, k) for k in range(n + 1)])
    items, _ = build_curriculum(pooled, counts([]), cfg)
    return {int(p[1:]): r for p, r in items.select("problem_id", "reason").iter_rows()}


def assert_one_interval(cfg: CurateConfig, n: int) -> None:
    kept = sorted(kept_counts(cfg, n))
    if kept:
        assert kept == list(range(kept[0], kept[-1] + 1)), (n, kept_counts(cfg, n))


BAND_CONFIGS = {  # the bands Sieve ships or documents
    "default": CurateConfig(),  # = data/configs/curate.toml
    "tiny": CurateConfig.model_validate(TINY_CURATE),
    "pilot_commit": CurateConfig(band_low=0.125, band_high=0.75),
}


def test_screen_4_refine_8_keeps_k_2_when_it_keeps_k_1() -> None:
    """Issue 46 point 6: at n = 12 pooled samples k = 1 went to stage 2 while k = 2 (p ~ 17 %)
    fell between the stages and was rejected out_of_band."""
    kept = kept_counts(CurateConfig(), 12)
    assert kept[1] == "hard" and kept[2] == "hard"


@pytest.mark.parametrize("name", sorted(BAND_CONFIGS))
def test_kept_counts_are_one_interval_at_every_n(name: str) -> None:
    """More successes never turn a kept prompt rejected and back: at fixed n the kept k tile
    one interval (stage 2 below, the mid band above, nothing rejected in between)."""
    for n in range(2, 65):
        assert_one_interval(BAND_CONFIGS[name], n)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 64),
    st.floats(0.0, 0.4),
    st.floats(0.6, 1.0),
    st.floats(0.01, 0.5),
    st.integers(8, 64),
)
def test_kept_counts_are_one_interval_for_any_band(
    n: int, low: float, high: float, hard_max_p: float, cap: int
) -> None:
    cfg = CurateConfig(band_low=low, band_high=high, hard_max_p=hard_max_p, max_group_size=cap)
    assert_one_interval(cfg, n)


def test_frames_write_to_the_ledger_tables(ledger: Ledger) -> None:
    items, rejected = build_curriculum(POOLED, EASY, CFG)
    tag = pl.lit("cur-1").alias("curriculum_id")
    written = ledger.write_batch(
        {"curriculum_items": items.with_columns(tag), "rejections": rejected.with_columns(tag)}
    )
    assert written == {"curriculum_items": items.height, "rejections": rejected.height}
    summary = ledger.sql("SELECT stage, n_items FROM curriculum_summary ORDER BY stage")
    assert summary.rows() == [(1, 3), (2, 1)]
    by_reason = ledger.sql("SELECT reason, n_prompts FROM rejection_summary ORDER BY reason")
    assert sum(by_reason["n_prompts"]) == rejected.height
