"""Reward composition: clipping, the scheduled repetition penalty, separate normalisation."""

from __future__ import annotations

import pytest
import torch

from grpo_core.rewards import Component, combine, group_zscore, repetition_penalty


def test_repetition_penalty_is_the_share_of_repeated_ngrams() -> None:
    pen = repetition_penalty([(1, 2, 3, 4, 5), (7, 7, 7, 7, 7), (1, 2), (1, 2, 1, 2, 1, 2)], 2)
    # 4 distinct bigrams of 4; 1 of 4; too short; {12, 21} of 5
    assert pen.tolist() == pytest.approx([0.0, -0.75, 0.0, -(1 - 2 / 5)])


def test_one_component_passes_through_clipped() -> None:
    group = torch.tensor([0, 0, 1, 1])
    r = torch.tensor([0.0, 1.0, 9.0, -9.0])
    out = combine({"reward": r}, [Component("reward")], group, 0, clip=5.0)
    assert out.tolist() == [0.0, 1.0, 5.0, -5.0]


def test_penalty_is_off_before_its_start_step_then_normalised_separately() -> None:
    group = torch.tensor([0, 0, 0, 0])
    correct = torch.tensor([1.0, 1.0, 0.0, 0.0])
    rep = torch.tensor([0.0, -0.5, 0.0, -0.5])
    comps = [Component("reward", 1.0), Component("repetition", 0.5, start_step=10)]
    early = combine({"reward": correct, "repetition": rep}, comps, group, 9, clip=5.0)
    assert early.tolist() == correct.tolist()
    late = combine({"reward": correct, "repetition": rep}, comps, group, 10, clip=5.0)
    expected = group_zscore(correct, group) + 0.5 * group_zscore(rep, group)
    assert torch.allclose(late, expected)
    # a component on a 100x larger scale does not drown the other after normalisation
    big = combine({"reward": correct, "repetition": 100 * rep}, comps, group, 10, clip=1e9)
    assert torch.allclose(big, expected, atol=1e-5)


def test_constant_component_contributes_zero_in_its_group() -> None:
    group = torch.tensor([0, 0, 1, 1])
    z = group_zscore(torch.tensor([3.0, 3.0, 0.0, 1.0]), group)
    assert z[:2].tolist() == [0.0, 0.0]
    assert z[2] < 0 < z[3]


def test_no_active_component_is_an_error() -> None:
    with pytest.raises(ValueError, match="no reward component"):
        combine({"reward": torch.zeros(2)}, [Component("reward", 0.0)], torch.zeros(2), 0, 5.0)
