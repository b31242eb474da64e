"""The closed loop on the realised informative share (pipeline/selection/batch_choice.py): the
update rule against numbers worked by hand, its bounds and direction on generated share
sequences, the exploration part of a batch, and the collector that steers with it (a resumed
run handed its shares continues on the same ε)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_core.types import Item, Scores
from pipeline.selection.batch_choice import (
    SelectionConfig,
    exploration,
    explore_batch,
    realised_share,
)
from pipeline.selection.posterior import Observations, posterior_select
from tests.selection.test_posterior import Fake

SHARES = st.lists(st.floats(0, 1), max_size=40)


def test_the_update_rule_against_numbers_worked_by_hand() -> None:
    # τ 0.4, η 0.25: 0 → 0 + 0.25·0.4 = 0.1 → 0.2 → 0.2 + 0.25·(−0.4) = 0.1 → 0.1 + 0.25·0.6
    steps = [exploration([0.8, 0.8, 0.0, 1.0][:n], 0.4, 0.25, 0.5) for n in range(5)]
    assert steps == pytest.approx([0.0, 0.1, 0.2, 0.1, 0.25])
    assert exploration([0.0, 0.0], 0.4, 0.25, 0.5) == 0.0  # never below 0
    assert exploration([1.0] * 10, 0.4, 0.25, 0.5) == 0.5  # never above the ceiling
    # clipped at 0, the loop does not owe the deficit: one surplus step raises ε at once
    assert exploration([0.0, 0.0, 0.0, 0.8], 0.4, 0.25, 0.5) == pytest.approx(0.1)


@given(SHARES, st.floats(0.05, 0.95), st.floats(0.01, 1), st.floats(0, 1))
def test_epsilon_stays_in_its_bounds(shares: list[float], tau: float, eta: float, most: float):
    assert 0.0 <= exploration(shares, tau, eta, most) <= most


@given(SHARES, st.data())
def test_a_higher_realised_share_never_lowers_epsilon(shares: list[float], data) -> None:
    """The loop's direction: raising any one step's realised share leaves ε as high or higher."""
    if not shares:
        return
    i = data.draw(st.integers(0, len(shares) - 1))
    more = [*shares[:i], data.draw(st.floats(shares[i], 1)), *shares[i + 1 :]]
    assert exploration(more, 0.4, 0.25, 0.5) >= exploration(shares, 0.4, 0.25, 0.5) - 1e-12


def test_the_realised_share_counts_disagreeing_groups() -> None:
    parts = [Scores([1.0, 0.0], [True, False]), Scores([1.0, 1.0], [True, True]),
             Scores([0.0], [False]), Scores([0.0, 0.0, 1.0], [False, False, True])]  # fmt: skip
    assert realised_share(parts, 1e-6) == 0.5
    assert realised_share([], 1e-6) == 0.0


@given(
    st.integers(1, 12), st.integers(0, 20), st.floats(0, 1), st.integers(0, 2**32 - 1),
    st.booleans(),
)  # fmt: skip
def test_the_explored_part_is_the_least_visited_below_the_ranked_part(
    batch: int, extra: int, eps: float, seed: int, with_visits: bool
) -> None:
    n = batch + extra
    order = np.random.default_rng(seed).permutation(n)
    visits = np.random.default_rng(seed + 1).integers(0, 3, n) if with_visits else None
    rng = np.random.default_rng(seed)
    before = rng.bit_generator.state
    out = explore_batch(order, batch, eps, rng, visits)
    m = round(eps * batch) if extra else 0
    assert len(out) == batch and len(set(out.tolist())) == batch
    assert out[: batch - m].tolist() == order[: batch - m].tolist()  # the score's part
    if m == 0:
        assert rng.bit_generator.state == before  # ε 0 draws nothing: runs without the loop
        return
    rest = order[batch - m :]
    v = np.zeros(n) if visits is None else visits
    picked = out[batch - m :]
    assert set(picked.tolist()) <= set(rest.tolist())
    # no prompt left out of the rest has fewer visits than one picked
    left = set(rest.tolist()) - set(picked.tolist())
    assert all(v[a] <= v[b] for a in picked for b in left)


@pytest.mark.parametrize("target", [0.0, 1.0, -0.1])
def test_a_target_outside_the_open_unit_interval_is_refused(target: float) -> None:
    with pytest.raises(ValueError, match="target_share"):
        SelectionConfig(target_share=target)


def _run(select: SelectionConfig, steps: range, shares: list[float], obs: Observations):
    keys = [f"{cell}{i}" for cell in ("easy", "hard") for i in range(12)]
    cell_of = {k: k.rstrip("0123456789") for k in keys}
    fake = Fake({k: (2 if cell_of[k] == "easy" else 0) for k in keys})
    items = [Item(k, k, 4, key=k) for k in keys]
    collect = posterior_select(lambda s, r: items, cell_of, obs, 4, seed=3, select=select,
                               shares=shares)  # fmt: skip
    return [collect(fake, step) for step in steps]


def test_the_collector_steers_by_its_shares_and_resumes_on_them() -> None:
    """Every group of an easy prompt is informative, of a hard one never: the realised shares
    the collector records are the trained groups', ε follows `exploration` of them, and a
    collector handed the first steps' shares and observations picks what the whole run did."""
    select = SelectionConfig(target_share=0.3, share_gain=0.5)
    shares: list[float] = []
    whole = _run(select, range(8), shares, Observations())
    assert len(shares) == 8
    for step, c in enumerate(whole):
        assert shares[step] == sum(it.key.startswith("easy") for it in c.items) / 4
        assert c.metrics["explore"] == pytest.approx(exploration(shares[:step], 0.3, 0.5, 0.5))
    assert max(c.metrics["explore"] for c in whole) > 0  # the surplus went to coverage
    obs = Observations()
    first: list[float] = []
    _run(select, range(4), first, obs)
    rest = _run(select, range(4, 8), first, obs)
    assert [[it.key for it in c.items] for c in rest] == [
        [it.key for it in c.items] for c in whole[4:]
    ]
    assert first == shares


def test_without_a_target_the_batch_is_the_scores_top() -> None:
    plain = _run(SelectionConfig(), range(5), [], Observations())
    assert all(c.metrics["explore"] == 0.0 for c in plain)
