"""Selection rules: each rejection reason on a crafted frame, determinism, the per-prompt G rule."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.core.errors import SieveError
from pipeline.problems import generate_mix
from pipeline.selection.config import CurateConfig
from pipeline.selection.rules import (
    REJECTION_SCHEMA,
    group_size_for,
    group_sizes_for,
    history_prior,
    informative_prob,
    prefilter,
    screen_survivors,
    stable_uniform,
    stable_uniforms,
)
from tests.selection.frames import binary_spread

CFG = CurateConfig()


def pid(i: int) -> str:
    return f"{i:016x}"


def reasons(rejected: pl.DataFrame) -> dict[str, str]:
    return dict(rejected.iter_rows())


def shuffled(frame: pl.DataFrame, seed: int = 1) -> pl.DataFrame:
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)


# -- stable_uniform ----------------------------------------------------------------------------
def test_stable_uniform_is_fixed_by_its_inputs_and_roughly_uniform() -> None:
    ids = pl.Series("problem_id", [pid(i) for i in range(4000)])
    u = stable_uniforms(7, ids, "salt")
    assert u[5] == stable_uniform(7, pid(5), "salt") == stable_uniform(7, pid(5), "salt")
    assert stable_uniform(7, pid(5), "other") != u[5] != stable_uniform(8, pid(5), "salt")
    assert u.min() >= 0.0 and u.max() < 1.0  # type: ignore[operator]
    assert abs(u.mean() - 0.5) < 0.02  # type: ignore[operator]
    assert abs((u < 0.25).mean() - 0.25) < 0.02  # type: ignore[operator]


# -- prefilter ---------------------------------------------------------------------------------
def candidates(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["problem_id", "question", "split"], orient="row")


def test_prefilter_reasons() -> None:
    frame = candidates(
        [
            (pid(1), "q1", "train"),  # kept
            (pid(2), "q2", "heldout"),  # heldout
            (pid(4), "q3", "train"),  # duplicate of pid 3 (same text, larger id)
            (pid(3), "q3", "train"),  # kept: smallest id of its text
            (pid(5), "q5", "train"),  # duplicate: a train copy of a held-out question
            (pid(6), "q5", "heldout"),  # heldout
            (pid(1), "q1", "train"),  # the same problem twice: collapses, no rejection
        ]
    )
    kept, rejected = prefilter(frame, CFG)
    assert kept["problem_id"].to_list() == [pid(1), pid(3)]
    assert reasons(rejected) == {
        pid(2): "heldout", pid(4): "duplicate", pid(5): "duplicate", pid(6): "heldout",
    }  # fmt: skip
    again = prefilter(shuffled(frame), CFG)
    assert again[0].equals(kept) and again[1].equals(rejected)


def test_prefilter_on_generated_problems() -> None:
    problems = generate_mix(None, 120, seed=0)
    kept, rejected = prefilter(problems, CFG)
    assert kept.height + rejected.height == problems["problem_id"].n_unique()
    assert (kept["split"] == "train").all()
    assert set(rejected.filter(pl.col("reason") == "heldout")["problem_id"]) == set(
        problems.filter(pl.col("split") == "heldout")["problem_id"]
    )
    assert kept.columns == problems.columns


def test_prefilter_empty_and_missing_columns() -> None:
    kept, rejected = prefilter(candidates([]), CFG)
    assert kept.height == 0 and rejected.schema == pl.Schema(REJECTION_SCHEMA)
    with pytest.raises(Exception, match="lacks column"):
        prefilter(pl.DataFrame({"problem_id": ["a"]}), CFG)


# -- history prior -----------------------------------------------------------------------------
def history_rows(rows: list[tuple[str, str, int, bool, int]]) -> pl.DataFrame:
    """rows of (problem_id, revision, n, zero_variance, day)."""
    return pl.DataFrame(
        [(p, r, n, z, datetime(2026, 1, d, tzinfo=UTC)) for p, r, n, z, d in rows],
        schema=["problem_id", "model_revision", "n", "zero_variance", "last_seen"],
        orient="row",
    )


def test_history_prior_skips_only_prompts_flat_in_every_recent_revision() -> None:
    cfg = CurateConfig(history_revisions=3, history_skip_prob=1.0)
    hist = history_rows(
        [
            (pid(1), "r4", 8, True, 4), (pid(1), "r3", 8, True, 3),  # flat twice: skipped
            (pid(2), "r4", 8, True, 4), (pid(2), "r3", 8, False, 3),  # once informative: kept
            (pid(3), "r1", 8, True, 1),  # flat only in r1, outside the 3 latest: kept
            (pid(4), "r2", 8, True, 2), (pid(4), "r4", 0, False, 4),  # n = 0 rows do not count
            (pid(9), "r2", 8, False, 2),  # not a candidate
        ]
    )  # fmt: skip
    cands = candidates([(pid(i), f"q{i}", "train") for i in range(1, 6)])
    kept, rejected = history_prior(cands, hist, cfg)
    assert reasons(rejected) == {pid(1): "skipped_by_history", pid(4): "skipped_by_history"}
    assert kept["problem_id"].to_list() == [pid(2), pid(3), pid(5)]
    none_skipped = history_prior(cands, hist, CurateConfig(history_skip_prob=0.0))
    assert none_skipped[0].height == 5 and none_skipped[1].height == 0


def test_history_prior_re_explores_a_stable_share() -> None:
    ids = [pid(i) for i in range(2000)]
    hist = history_rows([(p, "r1", 8, True, 1) for p in ids])
    cands = candidates([(p, p, "train") for p in ids])
    kept, rejected = history_prior(cands, hist, CFG)
    u = {p: stable_uniform(CFG.seed, p, "history") for p in ids}
    assert set(rejected["problem_id"]) == {p for p in ids if u[p] < CFG.history_skip_prob}
    assert abs(kept.height / 2000 - (1 - CFG.history_skip_prob)) < 0.03
    again = history_prior(shuffled(cands), shuffled(hist), CFG)
    assert again[0].equals(kept) and again[1].equals(rejected)


# -- screen ------------------------------------------------------------------------------------
def screen(rows: list[tuple[str, int, int, int]]) -> pl.DataFrame:
    """Screen stats of binary groups: (problem_id, n, k, n_errors) and the reward spread."""
    schema = {"problem_id": pl.Utf8, "n": pl.Int64, "k": pl.Int64, "n_errors": pl.Int64}
    return binary_spread(pl.DataFrame(rows, schema=schema, orient="row"))


def test_screen_reasons() -> None:
    stats = screen(
        [
            (pid(1), 3, 1, 5),  # 5 of 8 failed to verify: verifier_error
            (pid(2), 0, 0, 8),  # nothing scored: verifier_error
            (pid(3), 8, 3, 0),  # mixed: refine
            (pid(4), 8, 8, 0),  # all correct: replay candidate
            (pid(5), 6, 0, 2),  # all wrong
            (pid(6), 4, 4, 0), (pid(6), 4, 1, 0),  # two runs pooled: 5 of 8, mixed
        ]
    )  # fmt: skip
    out = screen_survivors(stats, CurateConfig(uncertain_hard_share=0.0))
    assert dict(out.refine.select("problem_id", "reason").iter_rows()) == {
        pid(3): "mixed", pid(6): "mixed",
    }  # fmt: skip
    assert out.refine.filter(pl.col("problem_id") == pid(6))["k"].item() == 5
    assert out.all_correct["problem_id"].to_list() == [pid(4)]
    assert reasons(out.rejections) == {
        pid(1): "verifier_error", pid(2): "verifier_error", pid(5): "all_wrong",
    }  # fmt: skip
    hard = screen_survivors(stats, CurateConfig(uncertain_hard_share=1.0))
    assert hard.refine.filter(pl.col("problem_id") == pid(5))["reason"].item() == "uncertain_hard"


def test_screen_judges_informativeness_on_the_rewards() -> None:
    """The reward spread (the trainer's rule) decides what is refined; the verdicts only label
    the groups whose rewards are flat."""
    schema = ["problem_id", "n", "k", "n_errors", "reward_min", "reward_max"]
    rows = [
        (pid(1), 4, 0, 0, 0.5, 0.501),  # all wrong, rewards spread (issue 29's example, 1e-3)
        (pid(2), 4, 4, 0, 0.9, 1.0),  # all right, a format component varies
        (pid(3), 4, 2, 0, 0.5, 0.5),  # verdicts differ, rewards do not
        (pid(4), 4, 0, 0, 0.3, 0.3 + 1e-9),  # flat up to rounding, all wrong
        (pid(5), 4, 4, 0, 1.0, 1.0),  # flat, all right
        (pid(6), 4, 1, 0, 0.0, 1.0),  # binary mixed
        (pid(7), 4, 0, 0, 0.5, 0.50001),  # spread 1e-5: rounding level, flat (issue 46)
    ]
    stats = pl.DataFrame(rows, schema=schema, orient="row")
    out = screen_survivors(stats, CurateConfig(uncertain_hard_share=0.0))
    assert dict(out.refine.select("problem_id", "reason").iter_rows()) == {
        pid(1): "mixed", pid(2): "mixed", pid(6): "mixed",
    }  # fmt: skip
    assert reasons(out.rejections) == {
        pid(3): "zero_variance", pid(4): "all_wrong", pid(7): "all_wrong",
    }  # fmt: skip
    assert out.all_correct["problem_id"].to_list() == [pid(5)]
    flat_share = screen_survivors(stats, CurateConfig(uncertain_hard_share=1.0))
    assert reasons(flat_share.rejections) == {pid(3): "zero_variance"}  # only 0/G is explored
    with pytest.raises(SieveError, match="reward_min, reward_max"):
        screen_survivors(stats.drop("reward_min", "reward_max"), CFG)


def test_screen_refines_a_stable_share_of_all_wrong_prompts() -> None:
    stats = screen([(pid(i), 8, 0, 0) for i in range(2000)])
    out = screen_survivors(stats, CFG)
    expect = {pid(i) for i in range(2000) if stable_uniform(0, pid(i), "uncertain") < 0.25}
    assert set(out.refine["problem_id"]) == expect
    assert abs(len(expect) / 2000 - CFG.uncertain_hard_share) < 0.03
    again = screen_survivors(shuffled(stats), CFG)
    assert all(a.equals(b) for a, b in zip(again, out, strict=True))


def test_screen_empty() -> None:
    out = screen_survivors(screen([]), CFG)
    assert out.refine.height == out.all_correct.height == out.rejections.height == 0


# -- per-prompt group size ---------------------------------------------------------------------
probs = st.floats(0.0, 1.0, allow_nan=False)


@given(probs, st.floats(0.5, 0.99), st.integers(2, 128))
def test_group_size_meets_the_target_and_one_less_does_not(p: float, t: float, cap: int) -> None:
    g = group_size_for(p, t, cap)
    if g is None:
        assert informative_prob(p, cap) < t
    else:
        assert 2 <= g <= cap and informative_prob(p, g) >= t
        assert g == 2 or informative_prob(p, g - 1) < t


@given(probs, probs)
def test_group_size_shrinks_toward_p_one_half(p: float, q: float) -> None:
    near, far = sorted((p, q), key=lambda x: abs(x - 0.5))
    g_near, g_far = group_size_for(near), group_size_for(far)
    assert g_far is None or (g_near is not None and g_near <= g_far)


@given(st.lists(probs, max_size=50), st.floats(0.5, 0.99), st.integers(2, 100))
def test_vectorised_group_sizes_match_the_loop(ps: list[float], t: float, cap: int) -> None:
    assert group_sizes_for(np.array(ps), t, cap).to_list() == [
        group_size_for(p, t, cap) for p in ps
    ]


def test_group_size_known_values() -> None:
    assert group_size_for(0.5) == 5  # 1 - 2 / 2^5 = 0.9375; G = 4 gives 0.875
    assert group_size_for(0.0) is None and group_size_for(1.0) is None
    assert group_size_for(0.01) is None  # would need G = 229 > 64
