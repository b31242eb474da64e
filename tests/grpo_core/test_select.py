"""Selection before rollout (grpo_core.select) and DAPO's full batches: what each collector
samples, what it trains, and what it counts, on a fake trainer whose prompts have known
correct counts (no model)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from grpo_core.collect import dynamic_sampling
from grpo_core.config import GRPOConfig
from grpo_core.history import ZeroVarSkip
from grpo_core.select import (
    BetaPosterior,
    greso_refill,
    informative_groups,
    ranked_select,
    thompson_select,
)
from grpo_core.types import Item, Sample, Scores, TrainerError

G = 4


class Fake:
    """A trainer stand-in: prompt `key` gets `right[key]` correct answers out of its G."""

    def __init__(self, right: dict[str, int]) -> None:
        self.right = right
        self.cfg = GRPOConfig()
        self.sampled: list[list[str]] = []  # the keys of every sample_and_score call

    def step_seed(self, step: int, round_: int = 0) -> int:
        return 1000 * step + round_

    def sample_and_score(
        self, items: Sequence[Item], seed: int, sizes: Sequence[int] | None = None
    ) -> tuple[list[list[Sample]], Scores, float, float]:
        self.sampled.append([it.key for it in items])
        sizes = list(sizes) if sizes is not None else [it.group_size for it in items]
        groups = [
            [Sample((1,), f"{it.key}{i}", False) for i in range(n)]
            for it, n in zip(items, sizes, strict=True)
        ]
        ok = [i < self.right[it.key] for it, n in zip(items, sizes, strict=True) for i in range(n)]
        return groups, Scores([float(x) for x in ok], list(ok)), 0.0, 0.0


def items(keys: str) -> list[Item]:
    return [Item(k, k, G, key=k) for k in keys]


class Skips(ZeroVarSkip):
    """A skip that skips exactly the keys named (the random draw is ZeroVarSkip's own test)."""

    def __init__(self, keys: str) -> None:
        super().__init__()
        self.names = set(keys)

    def skips(self, key: str, step: int) -> bool:
        return key in self.names


def test_greso_refill_fills_the_batch_from_later_candidates_and_samples_no_skipped_prompt() -> None:
    rounds = {0: "abcd", 1: "aefg", 2: "hijk"}
    fake = Fake({k: 1 for k in "abcdefghijk"})
    c = greso_refill(lambda step, r: items(rounds[r]), Skips("bc"), target=4)(fake, 0)
    # b and c skipped: the batch is refilled from round 1 (a is not taken twice)
    assert [it.key for it in c.items] == ["a", "d", "e", "f"]
    assert fake.sampled == [["a", "d", "e", "f"]]  # one generation call, nothing to decide
    assert c.rollouts == 4 * G and sum(len(g) for g in c.groups) == 4 * G
    assert c.metrics["skipped_zero_var"] == 2.0


def test_greso_refill_takes_skipped_prompts_when_the_candidates_run_out() -> None:
    fake = Fake({k: 0 for k in "abc"})
    skip = Skips("ab")
    c = greso_refill(lambda step, r: items("abc"), skip, target=3, max_rounds=2)(fake, 0)
    assert [it.key for it in c.items] == ["c", "a", "b"]
    # every group observed, all flat here; G = 4: half a visit each (issue 46 point 6)
    assert skip.streaks == {"c": 0.5, "a": 0.5, "b": 0.5}


def test_greso_refill_streaks_follow_the_groups() -> None:
    fake = Fake({"a": 0, "b": 2})
    skip = ZeroVarSkip(seed=0)
    collect = greso_refill(lambda step, r: items("ab"), skip, target=2)
    collect(fake, 0)
    collect(fake, 1)
    assert skip.streaks["b"] == 0
    assert skip.streaks["a"] >= 1  # flat each time it was sampled


def test_thompson_select_picks_the_prompts_nearest_one_half_and_updates_their_posteriors() -> None:
    post = BetaPosterior(decay=0.5)
    post.a.update({"easy": 200.0, "hard": 1.0, "mid": 50.0})
    post.b.update({"easy": 1.0, "hard": 200.0, "mid": 50.0})
    fake = Fake({"easy": 4, "hard": 0, "mid": 2, "new": 1})
    c = thompson_select(lambda step, r: items(["easy", "hard", "mid"]), post, 1, seed=0)(fake, 0)
    assert [it.key for it in c.items] == ["mid"]
    assert fake.sampled == [["mid"]] and c.rollouts == G  # nothing sampled to decide
    assert post.a["mid"] == pytest.approx(0.5 * 50 + 0.5 * 1 + 2)
    assert post.b["mid"] == pytest.approx(0.5 * 50 + 0.5 * 1 + 2)
    assert post.a["easy"] == 200.0  # a prompt not sampled keeps its posterior


def test_thompson_select_is_a_pure_function_of_seed_and_step() -> None:
    def picked(seed: int, step: int) -> list[str]:
        post = BetaPosterior()
        fake = Fake({k: 1 for k in "abcdefgh"})
        return [it.key for it in thompson_select(lambda s, r: items("abcdefgh"), post, 3,
                                                 seed=seed)(fake, step).items]  # fmt: skip

    assert picked(1, 5) == picked(1, 5)
    assert len({tuple(picked(1, s)) for s in range(6)}) > 1  # the draws differ by step


def test_thompson_select_needs_enough_candidates() -> None:
    from grpo_core.types import TrainerError

    with pytest.raises(TrainerError, match="2 candidates for a batch of 3"):
        thompson_select(lambda s, r: items("ab"), BetaPosterior(), 3, seed=0)(Fake({}), 0)


@pytest.mark.parametrize("seed", range(6))
def test_ranked_select_samples_the_top_scores_and_breaks_ties_by_seed_and_step(seed: int) -> None:
    """The cell oracle's collector: the batch is the largest fixed scores (duplicate candidates
    counted once), ties broken by a draw of (seed, step); only the batch is sampled."""
    score = {"a": 0.9, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.0, "f": 0.1}
    fake = Fake({k: 1 for k in score})

    def picked(step: int) -> list[str]:
        src = lambda s, r: items("abcdefa")  # noqa: E731
        c = ranked_select(src, lambda it: score[it.key], 3, seed)(fake, step)
        assert c.rollouts == 3 * G and fake.sampled[-1] == [it.key for it in c.items]
        return [it.key for it in c.items]

    got = [picked(step) for step in range(8)]
    assert all(g[0] == "a" and set(g[1:]) <= {"b", "c", "d"} and len(set(g)) == 3 for g in got)
    assert len({tuple(g) for g in got}) > 1  # the ties fall differently by step
    assert got == [picked(step) for step in range(8)]  # and the same again on resume
    with pytest.raises(TrainerError, match="6 candidates for a batch of 7"):
        ranked_select(lambda s, r: items("abcdef"), lambda it: 0.0, 7, seed)(fake, 0)


def test_beta_posterior_refuses_a_bad_prior() -> None:
    with pytest.raises(ValueError, match="prior_a"):
        BetaPosterior(prior_a=0.0)


def test_posterior_state_round_trips() -> None:
    post = BetaPosterior()
    post.observe("x", 3, 8)
    again = BetaPosterior()
    again.load(post.state())
    assert again.params(["x", "y"])[0].tolist() == [post.a["x"], 1.0]


def test_dapo_full_batches_train_exactly_the_target_or_nothing_and_count_every_rollout() -> None:
    rounds = {0: "abcd", 1: "efgh"}
    right = {"a": 2, "b": 0, "c": 4, "d": 1, "e": 0, "f": 3, "g": 2, "h": 0}
    # 2 informative of round 0 (a, d), 2 more in round 1 (f, g): full at 4
    c = dynamic_sampling(lambda s, r: items(rounds[r]), 4, max_rounds=2, full=True)(Fake(right), 0)
    assert [it.key for it in c.items] == ["a", "d", "f", "g"]
    assert c.rollouts == 8 * G and sum(len(g) for g in c.groups) == 4 * G
    assert informative_groups(c, 1e-6) == 4
    # one round only: 2 informative of a target of 4, so nothing trains, 4 groups counted
    c = dynamic_sampling(lambda s, r: items(rounds[r]), 4, max_rounds=1, full=True)(Fake(right), 0)
    assert sum(len(g) for g in c.groups) == 0 and c.rollouts == 4 * G
    assert c.metrics["unfilled"] == 1.0
    # without `full` the short batch trains what it has (the old behaviour)
    c = dynamic_sampling(lambda s, r: items(rounds[r]), 4, max_rounds=1)(Fake(right), 0)
    assert [it.key for it in c.items] == ["a", "d"]
