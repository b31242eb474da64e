"""Vectorised advantage estimators against a slow per-group loop, plus their invariants."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.advantages import (
    ESTIMATORS,
    ZERO_VAR_TOL,
    advantages,
    length_penalty,
    segment_stats,
)

SETTINGS = settings(max_examples=40, deadline=None)


def slow_advantages(
    rewards: list[float],
    group: list[int],
    estimator: str,
    ddof: int = 0,
    eps: float = 1e-6,
    judged: list[bool] | None = None,
) -> list[float]:
    """Obviously-correct reference: one Python loop per group, plain floats. `batch`'s std is
    over the judged rewards only (default: all)."""
    n_all = len(rewards)
    seen = [r for i, r in enumerate(rewards) if judged is None or judged[i]]
    mean_all = sum(seen) / len(seen) if seen else 0.0
    ss_all = sum((r - mean_all) ** 2 for r in seen)
    batch_std = math.sqrt(ss_all / (len(seen) - ddof)) if len(seen) > ddof else 0.0
    out = [0.0] * n_all
    for g in set(group):
        members = [i for i in range(n_all) if group[i] == g]
        rs = [rewards[i] for i in members]
        if max(rs) - min(rs) <= ZERO_VAR_TOL * max(1.0, *(abs(r) for r in rs)):  # relative
            continue
        n, mean = len(rs), sum(rs) / len(rs)
        std = math.sqrt(sum((r - mean) ** 2 for r in rs) / (n - ddof))
        for i in members:
            others = [rewards[j] for j in members if j != i]
            out[i] = {
                "grpo": (rewards[i] - mean) / (std + eps),
                "rloo": rewards[i] - sum(others) / len(others),
                "dr_grpo": rewards[i] - mean,
                "batch": (rewards[i] - mean) / (batch_std + eps),
            }[estimator]
    return out


# groups of sizes 1..6, rewards that often tie (binary-ish) or vary
group_sizes = st.lists(st.integers(1, 6), min_size=1, max_size=6)
reward_value = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(-5, 5, allow_nan=False))


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[float], list[int]]:
    sizes = draw(group_sizes)
    ids = draw(st.permutations(list(range(len(sizes)))))  # ids need not be in order
    group = [ids[g] for g, n in enumerate(sizes) for _ in range(n)]
    order = draw(st.permutations(list(range(len(group)))))  # groups interleaved
    group = [group[i] for i in order]
    rewards = [draw(reward_value) for _ in group]
    return rewards, group


def run(
    rewards: list[float], group: list[int], est: str, ddof: int = 0, eps: float = 1e-6
) -> tuple[list, list]:
    r = torch.tensor(rewards, dtype=torch.float64)
    adv, inf = advantages(r, torch.tensor(group), est, ddof=ddof, eps=eps)
    return adv.tolist(), inf.tolist()


@pytest.mark.parametrize("est", sorted(ESTIMATORS))
@pytest.mark.parametrize("ddof", [0, 1])
@SETTINGS
@given(batch=batches())
def test_matches_slow_loop(est: str, ddof: int, batch: tuple[list[float], list[int]]) -> None:
    rewards, group = batch
    if est == "batch" and len(rewards) <= ddof:
        return
    got, _ = run(rewards, group, est, ddof)
    want = slow_advantages(rewards, group, est, ddof)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("est", ["grpo", "rloo", "dr_grpo", "batch"])
@SETTINGS
@given(batch=batches())
def test_sums_to_zero_per_informative_group(est: str, batch: tuple[list[float], list[int]]) -> None:
    rewards, group = batch
    adv, inf = run(rewards, group, est)
    for g in set(group):
        members = [i for i, gi in enumerate(group) if gi == g]
        if inf[members[0]]:
            assert abs(sum(adv[i] for i in members)) < 1e-6
        else:
            assert all(adv[i] == 0.0 for i in members)


@pytest.mark.parametrize("est", ["grpo", "rloo", "dr_grpo"])
@SETTINGS
@given(batch=batches(), shift=st.floats(-100, 100))
def test_invariant_to_constant_shift_of_a_group(
    est: str, batch: tuple[list[float], list[int]], shift: float
) -> None:
    rewards, group = batch
    target = group[0]
    shifted = [r + shift if g == target else r for r, g in zip(rewards, group, strict=True)]
    a, inf_a = run(rewards, group, est)
    b, inf_b = run(shifted, group, est)
    if inf_a == inf_b:  # a shift may move a spread of ~tol across the threshold by rounding
        assert b == pytest.approx(a, abs=1e-6)


@SETTINGS
@given(batch=batches(), scale=st.floats(0.01, 100))
def test_grpo_is_scale_free(batch: tuple[list[float], list[int]], scale: float) -> None:
    rewards, group = batch
    # eps = 0: with eps > 0 it is only approximately scale-free once std is near eps
    a, inf_a = run(rewards, group, "grpo", eps=0.0)
    b, inf_b = run([r * scale for r in rewards], group, "grpo", eps=0.0)
    informative_both = [x and y for x, y in zip(inf_a, inf_b, strict=True)]
    for i, ok in enumerate(informative_both):
        if ok:
            assert b[i] == pytest.approx(a[i], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("est", sorted(ESTIMATORS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constant_group_is_exactly_zero(est: str, dtype: torch.dtype) -> None:
    rewards = torch.tensor([0.7, 0.7 + 1e-9, 0.7 - 1e-9, 0.7, 1.0, 0.0, 1.0], dtype=dtype)
    group = torch.tensor([3, 3, 3, 3, 5, 5, 5])
    adv, inf = advantages(rewards, group, est)
    assert adv.dtype == dtype
    assert torch.equal(adv[:4], torch.zeros(4, dtype=dtype))
    assert inf.tolist() == [False] * 4 + [True] * 3
    assert (adv[4:] != 0).all()


def test_a_tiny_spread_is_not_blown_up_to_unit_advantages() -> None:
    """Issue 46 point 6: with an absolute tolerance of 1e-6 under std normalisation, a reward
    spread of 1e-5 (rounding in a reward model, a timing term) became advantages of ±1.4. The
    tolerance is relative to the rewards' scale, tol · max(1, |max|, |min|) with tol 1e-4."""
    for base in (0.5, 0.0, -3.0, 250.0):
        rewards = [base, base + 1e-5 * max(1.0, abs(base)), base, base]
        for est in ("grpo", "batch"):
            adv, inf = run(rewards, [0] * 4, est)
            assert (adv, inf) == ([0.0] * 4, [False] * 4), (base, est)
    assert run([250.0, 250.1, 250.0, 250.0], [0] * 4, "grpo")[1] == [True] * 4


def old_rule(rewards: list[float], group: list[int], est: str) -> tuple[list, list]:
    """The advantages before issue 46: the same estimators, an absolute tolerance of 1e-6."""
    r, g = torch.tensor(rewards, dtype=torch.float64), torch.tensor(group)
    stats = segment_stats(r, g, 0)
    informative = stats.spread > 1e-6
    adv = ESTIMATORS[est](r, stats, 0, 1e-6, torch.ones_like(g, dtype=torch.bool))
    return torch.where(informative, adv, torch.zeros_like(adv)).tolist(), informative.tolist()


@pytest.mark.parametrize("est", sorted(ESTIMATORS))
@SETTINGS
@given(batch=batches(), binary=st.booleans())
def test_binary_rewards_and_spreads_from_1e_3_are_exactly_as_before(
    est: str, batch: tuple[list[float], list[int]], binary: bool
) -> None:
    """0/1 rewards, and rewards within the trainer's ±5 clip whose groups are constant or spread
    by at least 1e-3, get bit for bit the advantages of the absolute rule."""
    rewards, group = batch
    rewards = [float(r >= 0.5) if binary else round(r, 3) for r in rewards]
    assert run(rewards, group, est) == old_rule(rewards, group, est)


def test_mixed_group_sizes_and_singletons() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.3])
    group = torch.tensor([0, 0, 1, 2, 2, 2, 2, 2, 2, 0])  # sizes 3, 1, 6
    adv, inf = advantages(rewards, group, "grpo")
    assert inf.tolist() == [True, True, False] + [True] * 6 + [True]
    assert adv[2] == 0.0
    want = slow_advantages(rewards.tolist(), group.tolist(), "grpo")
    assert adv.tolist() == pytest.approx(want, abs=1e-6)


def test_unknown_estimator_and_bad_shapes() -> None:
    with pytest.raises(ValueError, match="choose one of"):
        advantages(torch.zeros(2), torch.zeros(2, dtype=torch.long), "ppo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be"):
        advantages(torch.zeros(2), torch.zeros(3, dtype=torch.long))


def test_length_penalty_after_normalisation() -> None:
    rewards = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    group = torch.tensor([0, 0, 0, 0, 1, 1])  # group 1 is uninformative
    lengths = torch.tensor([10, 30, 10, 30, 5, 50])
    adv, inf = advantages(rewards, group, "grpo")
    out = length_penalty(adv, lengths, group, 0.1, inf)
    # group 0: length z-scores are −1, +1, −1, +1 (population std)
    want = adv[:4] - 0.1 * torch.tensor([-1.0, 1.0, -1.0, 1.0])
    assert out[:4].tolist() == pytest.approx(want.tolist(), abs=1e-5)
    assert out[4:].tolist() == [0.0, 0.0]  # untouched
    assert out[1] < out[0]  # of two right answers, the longer one gets less
    assert length_penalty(adv, lengths, group, 0.0, inf) is adv


@pytest.mark.parametrize("ddof", [0, 1])
@SETTINGS
@given(batch=batches(), data=st.data())
def test_batch_std_leaves_unjudged_placeholders_out(
    ddof: int, batch: tuple[list[float], list[int]], data: st.DataObject
) -> None:
    """Unjudged samples (reward placeholder 0, each its own group, as
    `grpo_core.step_advantages` builds them) change no judged sample's `batch` advantage: the
    std is over judged rewards only."""
    rewards, group = batch
    judged = data.draw(st.lists(st.booleans(), min_size=len(rewards), max_size=len(rewards)))
    r = [x if j else 0.0 for x, j in zip(rewards, judged, strict=True)]
    g = [gi if j else 1000 + i for i, (gi, j) in enumerate(zip(group, judged, strict=True))]
    adv, _ = advantages(
        torch.tensor(r, dtype=torch.float64), torch.tensor(g), "batch", ddof=ddof,
        judged=torch.tensor(judged),
    )  # fmt: skip
    want = slow_advantages(r, g, "batch", ddof, judged=judged)
    assert adv.tolist() == pytest.approx(want, rel=1e-9, abs=1e-9)
    kept = [i for i, j in enumerate(judged) if j]
    if len(kept) > ddof:  # the same as the batch with the unjudged removed
        alone = slow_advantages([r[i] for i in kept], [g[i] for i in kept], "batch", ddof)
        assert [adv[i].item() for i in kept] == pytest.approx(alone, rel=1e-9, abs=1e-9)


def test_batch_std_differs_once_placeholders_are_left_out() -> None:
    r = torch.tensor([1.0, 0.0, 1.0, 0.9, 0.0, 0.0], dtype=torch.float64)
    g = torch.tensor([0, 0, 1, 1, 7, 8])
    judged = torch.tensor([True, True, True, True, False, False])
    with_all, _ = advantages(r, g, "batch")
    judged_only, _ = advantages(r, g, "batch", judged=judged)
    assert judged_only[:4].tolist() == pytest.approx(
        slow_advantages(r[:4].tolist(), [0, 0, 1, 1], "batch")
    )
    assert not torch.allclose(with_all, judged_only)
