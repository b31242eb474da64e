"""`build_curriculum`: the band, the hard stage, replay, weights, positions, determinism."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import SieveError
from pipeline.selection.config import TINY_CURATE, CurateConfig
from pipeline.selection.curriculum import ITEM_SCHEMA, build_curriculum
from pipeline.selection.rules import REJECTION_SCHEMA, group_size_for, stable_uniform
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
    assert (by["hard"]["stage"], by["hard"]["group_size"]) == (2, group_size_for(4 / 42))
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


def stage2_open(cfg: CurateConfig, n: int) -> bool:
    """Whether stage 2 takes some binary count at n (the reference loop of `hard_open`)."""
    means = [(k + 1) / (n + 2) for k in range(1, n)]
    return any(
        p < cfg.hard_max_p
        and group_size_for(p, cfg.informative_target, cfg.max_group_size) is not None
        for p in means
    )


pooled_rows = st.lists(
    st.integers(1, 120).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(pooled_rows, st.floats(0.0, 0.4), st.floats(0.6, 1.0))
def test_band_logic_holds_for_every_prompt(
    rows: list[tuple[int, int]], low: float, high: float
) -> None:
    cfg = CurateConfig(band_low=low, band_high=high)
    pooled = counts([(f"p{i:03d}", n, k) for i, (n, k) in enumerate(rows)])
    items, rejected = build_curriculum(pooled, counts([]), cfg)
    post = {r["problem_id"]: r for r in posterior(pooled).to_dicts()}
    in_band = {p for p, r in post.items() if r["p_low"] >= low and r["p_high"] <= high}
    mixed = {p for p, r in post.items() if 0 < r["k"] < r["n"]}  # binary: informative groups
    for item in items.to_dicts():
        r = post[item["problem_id"]]
        assert item["problem_id"] in mixed
        if item["stage"] == 1:
            assert item["problem_id"] in in_band and item["group_size"] == cfg.stage1_g
        else:
            below = stage2_open(cfg, r["n"]) and r["p_low"] < low and r["p_high"] <= high
            assert (r["p_mean"] < cfg.hard_max_p or below) and r["k"] >= 1
            assert item["group_size"] == group_size_for(r["p_mean"])
    for pid, reason in rejected.iter_rows():
        label = "all_wrong" if post[pid]["k"] == 0 else "all_correct"  # by the verdicts
        assert pid not in in_band & mixed
        assert reason == ("out_of_band" if pid in mixed else label)


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
