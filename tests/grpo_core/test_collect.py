"""Online collection strategies (DAPO dynamic sampling, pilot-then-commit) on the toy task."""

from __future__ import annotations

from typing import Any

from grpo_core.collect import dynamic_sampling, pilot_commit
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, Trainer

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


def test_dynamic_sampling_keeps_only_informative_groups_and_counts_every_rollout(
    toy: dict[str, Any],
) -> None:
    t = trainer(toy, dynamic_sampling(source, target=2, max_rounds=5))
    history = t.train()
    for h in history:
        assert h["zero_var_share"] == 0.0 or h["trained_samples"] == 0
        assert h["rollouts"] % 24 == 0 and h["rollouts"] >= 24  # whole rounds of 3 × 8
    assert t.counters.rollouts == sum(h["rollouts"] for h in history)
    assert any(h["rollouts"] > 24 for h in history)  # it had to refill at least once


def test_pilot_commit_trains_on_committed_groups_of_48(toy: dict[str, Any]) -> None:
    seen: list[int] = []
    easy = lambda items, samples: toy["reward"](items, samples)  # noqa: E731

    def spy(items: Any, samples: Any) -> Any:
        seen.append(len(samples))
        return easy(items, samples)

    t = trainer(toy, pilot_commit(source, target=2, low=0.0, high=1.0, max_rounds=2), seed=0)
    t.reward_fn = spy
    h = t.run_step(0).metrics
    # pilot: 3 prompts × 16; commit: the first 2 kept × 32 more
    assert seen[:2] == [48, 64]
    assert h["rollouts"] == 48 + 64
    # Exactly the two committed groups of 48 ("a" and "b"), every sample of both. Which groups
    # are informative depends on what the toy policy samples; everything here is seeded (the
    # toy model's init with 0, the sampling with cfg.seed = 0 and the step), and with these
    # seeds "a" gets 2 and "b" 5 right answers of 48, so both are informative: 96. A step that
    # trained on nothing (0), dropped a group (48), lost the pilot samples (64) or let the
    # third, uncommitted pilot in (112) fails here.
    assert h["trained_samples"] == 96.0


def test_pilot_commit_with_an_empty_band_spends_but_does_not_train(toy: dict[str, Any]) -> None:
    t = trainer(toy, pilot_commit(source, target=2, low=0.99, high=1.0, max_rounds=2))
    h = t.run_step(0).metrics
    assert h["rollouts"] == 2 * 3 * 16 and h["trained_samples"] == 0
    assert t.counters.empty_steps == 1
