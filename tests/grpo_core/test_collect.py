"""Online collection strategies (DAPO dynamic sampling, pilot-then-commit) on the toy task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_core.collect import dynamic_sampling, pilot_commit
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, Trainer
from grpo_core.types import Sample, Scores

LETTERS = "abcdef"


def source(step: int, round_: int) -> list[Item]:
    start = (step * 7 + round_ * 3) % len(LETTERS)
    return [Item(LETTERS[(start + i) % 6], LETTERS[(start + i) % 6].upper(), 8) for i in range(3)]


def trainer(toy: dict[str, Any], collector: Any, **kw: Any) -> Trainer:
    cfg = GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, total_steps=3, **kw)
    model, tok = toy["model"](), toy["tokenizer"]()
    return Trainer(
        model, tok, toy["sampler"](model, tok), toy["reward"], lambda s: [], cfg,
        collector=collector,
    )  # fmt: skip


class Spy:
    """A reward function that scores with `inner` and records each call: the prompts of its
    samples (one per sample) and their rewards. One call is one round of a collector."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.calls: list[tuple[list[str], list[float | None]]] = []

    def __call__(self, items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        scores = self.inner(items, samples)
        self.calls.append(([it.prompt for it in items], list(scores.rewards)))
        return scores

    def groups(self, calls: Sequence[int]) -> dict[str, list[float | None]]:
        """Rewards by prompt over the given calls, in sampling order."""
        out: dict[str, list[float | None]] = {}
        for i in calls:
            for prompt, reward in zip(*self.calls[i], strict=True):
                out.setdefault(prompt, []).append(reward)
        return out


def varies(rewards: Sequence[float | None]) -> bool:
    """Informative by the rule for 0/1 rewards: at least two different values."""
    return len(set(rewards)) > 1


def alternating(flat: set[str], calls: list[int]) -> Any:
    """A reward that ignores the samples: 0 for a prompt in `flat`, else 0, 1, 0, 1, ... along
    its samples in the call (so its group varies). Each call appends to `calls`."""

    def reward(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        seen: dict[str, int] = {}
        values: list[float | None] = []
        for it in items:
            k = seen[it.prompt] = seen.get(it.prompt, -1) + 1
            values.append(0.0 if it.prompt in flat else float(k % 2))
        calls.append(len(calls))
        return Scores(values, [v == 1.0 for v in values])

    return reward


def test_dynamic_sampling_keeps_only_informative_groups_and_counts_every_rollout(
    toy: dict[str, Any],
) -> None:
    """Whatever the toy policy samples: a step draws rounds of 3 prompts x 8 until 2 of the groups
    drawn so far are informative (or 5 rounds), trains those and counts every rollout."""
    t = trainer(toy, dynamic_sampling(source, target=2, max_rounds=5))
    spy = Spy(toy["reward"])
    t.reward_fn = spy
    total = 0.0
    for step in range(3):
        spy.calls.clear()
        h = t.run_step(step).metrics
        rounds = len(spy.calls)
        assert h["rollouts"] == 24 * rounds  # whole rounds of 3 x 8, every one counted
        total += h["rollouts"]
        # informative groups drawn in each round (a round's 3 prompts are distinct)
        found = [sum(map(varies, spy.groups([r]).values())) for r in range(rounds)]
        enough = [sum(found[: r + 1]) >= 2 for r in range(rounds)]
        # it stopped at the first round that completed the batch, or ran out of rounds
        assert enough[-1] or rounds == 5
        assert not any(enough[:-1])
        kept = min(2, sum(found))
        assert h["trained_samples"] == 8 * kept
        assert h["zero_var_share"] == 0.0 or kept == 0  # only informative groups train
    assert t.counters.rollouts == total


def test_dynamic_sampling_refills_until_the_batch_is_informative(toy: dict[str, Any]) -> None:
    """Rewards chosen, not sampled: every step's first round is flat (all 0), its second varies
    for every prompt, so each step draws exactly two rounds and trains the first two groups of
    the second."""
    calls: list[int] = []
    flat_first = alternating(set(LETTERS), calls)
    varied = alternating(set(), calls)
    t = trainer(toy, dynamic_sampling(source, target=2, max_rounds=5))
    t.reward_fn = lambda items, samples: (varied if len(calls) % 2 else flat_first)(items, samples)
    history = [t.run_step(step).metrics for step in range(3)]
    assert [h["rollouts"] for h in history] == [48, 48, 48]
    assert [h["trained_samples"] for h in history] == [16, 16, 16]
    assert t.counters.rollouts == 3 * 48


def test_pilot_commit_trains_on_committed_groups_of_48(toy: dict[str, Any]) -> None:
    """Whatever the toy policy samples: the first two pilots are committed (the band [0, 1] takes
    every pilot), each gets 32 more samples, and the step trains the committed groups whose 48
    rewards vary, all 48 samples of each; the third pilot never trains."""
    spy = Spy(toy["reward"])
    t = trainer(toy, pilot_commit(source, target=2, low=0.0, high=1.0, max_rounds=2), seed=0)
    t.reward_fn = spy
    h = t.run_step(0).metrics
    # pilot: 3 prompts x 16; commit: the first 2 kept x 32 more
    assert [len(rewards) for _, rewards in spy.calls] == [48, 64]
    assert h["rollouts"] == 48 + 64
    pilots, committed = spy.calls[0][0], list(dict.fromkeys(spy.calls[1][0]))
    assert committed == list(dict.fromkeys(pilots))[:2]
    groups = spy.groups([0, 1])
    assert all(len(groups[p]) == 48 for p in committed)
    assert h["trained_samples"] == 48 * sum(varies(groups[p]) for p in committed)


def test_pilot_commit_trains_every_sample_of_an_informative_committed_group_only(
    toy: dict[str, Any],
) -> None:
    """Rewards chosen, not sampled: step 0 draws a, b, c; b is flat (all 0), a and c vary. a and b
    are committed (the band [0, 1] takes every pilot, the first two win); only a trains, with its
    16 pilot and 32 committed samples: 48. Training on nothing (0), on b too (96), without the
    pilot samples (32) or with c's uncommitted pilot (64) fails here."""
    t = trainer(toy, pilot_commit(source, target=2, low=0.0, high=1.0, max_rounds=2), seed=0)
    assert [it.prompt for it in source(0, 0)] == ["a", "b", "c"]
    t.reward_fn = alternating({"b"}, [])
    h = t.run_step(0).metrics
    assert h["rollouts"] == 48 + 64
    assert h["trained_samples"] == 48.0


def test_pilot_commit_with_an_empty_band_spends_but_does_not_train(toy: dict[str, Any]) -> None:
    t = trainer(toy, pilot_commit(source, target=2, low=0.99, high=1.0, max_rounds=2))
    h = t.run_step(0).metrics
    assert h["rollouts"] == 2 * 3 * 16 and h["trained_samples"] == 0
    assert t.counters.empty_steps == 1
