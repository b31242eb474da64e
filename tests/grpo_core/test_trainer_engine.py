"""An engine with its own weights: log-prob mismatch, truncated IS, weight sync, autocast."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Sample, Scores, Trainer, WeightSync
from tests.grpo_core.conftest import (
    ToySampler,
    ToyTokenizer,
    first_letter_reward,
    toy_batches,
    toy_model,
)

BASE = {"lr": 3e-3, "max_new_tokens": 3, "checkpoint_every": 0}


class EngineSampler(ToySampler):
    """The toy sampler reporting log-probs like an engine would: the model's own, plus `offset`
    (an engine that disagrees with the trainer), and recording every weight push."""

    def __init__(self, model: torch.nn.Module, tokenizer: ToyTokenizer, offset: float = 0.0):
        super().__init__(model, tokenizer)
        self.offset = offset
        self.synced: list[torch.nn.Module] = []

    def sample_groups(self, prompts: Sequence[str], sizes: Sequence[int], **kw: Any) -> Any:
        groups = super().sample_groups(prompts, sizes, **kw)
        return [
            [self._with_logprobs(p, s) for s in g] for p, g in zip(prompts, groups, strict=True)
        ]

    @torch.no_grad()
    def _with_logprobs(self, prompt: str, s: Sample) -> Sample:
        ids = self.tokenizer(prompt)["input_ids"]
        full = torch.tensor([ids + list(s.token_ids)])
        logp = torch.log_softmax(self.model(input_ids=full).logits[0].float(), -1)  # (L, V)
        picked = [float(logp[len(ids) - 1 + i, t]) + self.offset for i, t in enumerate(s.token_ids)]
        return Sample(s.token_ids, s.text, s.truncated, logprobs=tuple(picked))

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.synced.append(model)


def make(offset: float = 0.0, reward: Any = first_letter_reward, **kw: Any) -> Trainer:
    model, tok = toy_model(), ToyTokenizer()
    cfg = GRPOConfig(**{**BASE, **kw})
    sampler = EngineSampler(model, tok, offset)
    return Trainer(
        model, tok, sampler, reward, toy_batches(), cfg, hooks=Hooks(warning=lambda m: None)
    )


def params(t: Trainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in t.model.parameters()]


def test_matching_engine_log_probs_give_weights_of_one() -> None:
    t = make(total_steps=4)
    history = [h for h in t.train() if h["trained_samples"] > 0]
    assert history, "no informative step"
    for h in history:
        assert h["logprob_mismatch"] < 1e-5
        assert h["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
        assert h["is_clipped_frac"] == 0.0


@pytest.mark.parametrize("num_iterations", [1, 2])
def test_a_disagreeing_engine_is_measured_and_capped(num_iterations: int) -> None:
    # the engine puts every token 1 nat below the trainer: weight exp(1) ≈ 2.72, capped at 2
    t = make(offset=-1.0, total_steps=3, num_iterations=num_iterations)
    history = [h for h in t.train() if h["trained_samples"] > 0]
    assert history
    for h in history:
        assert h["logprob_mismatch"] == pytest.approx(1.0, abs=1e-4)
        assert h["is_weight_mean"] == pytest.approx(2.0)
        assert h["is_clipped_frac"] == 1.0


def test_a_zero_cap_measures_but_leaves_the_update_alone() -> None:
    plain = make(total_steps=3)
    plain.sampler = ToySampler(plain.model, plain.tokenizer)  # no log-probs at all
    off = make(offset=-1.0, total_steps=3, tis_cap=0.0)
    capped = make(offset=-1.0, total_steps=3)
    h_plain, h_off = plain.train(), off.train()
    capped.train()
    assert "logprob_mismatch" not in h_plain[0]
    assert [h["loss"] for h in h_plain] == [h["loss"] for h in h_off]  # bitwise: weight 1
    assert all(torch.equal(a, b) for a, b in zip(params(plain), params(off), strict=True))
    trained = [h for h in h_off if h["trained_samples"] > 0]
    assert trained and all(h["is_weight_mean"] == pytest.approx(math.e) for h in trained)
    assert not all(torch.equal(a, b) for a, b in zip(params(off), params(capped), strict=True))


def test_weights_are_pushed_at_start_and_after_each_update_only() -> None:
    calls = {"n": 0}

    def nan_on_step_1(items: Any, samples: Any) -> Scores:  # step 1's rewards are poisoned
        calls["n"] += 1
        s = first_letter_reward(items, samples)
        return Scores([math.nan] * len(s.rewards), s.correct) if calls["n"] == 2 else s

    t = make(reward=nan_on_step_1, total_steps=6)
    assert isinstance(t.sampler, WeightSync)
    history = t.train()
    updates = sum(h["trained_samples"] > 0 for h in history)
    assert history[1]["skipped_steps"] == 1 and 0 < updates < 6
    synced = t.sampler.synced  # type: ignore[attr-defined]
    assert len(synced) == 1 + updates
    assert all(m is t.model for m in synced)


def test_under_lora_the_wrapped_model_is_pushed() -> None:
    pytest.importorskip("peft")
    from peft import PeftModel

    t = make(total_steps=1, reference="lora_base")
    t.train()
    synced = t.sampler.synced  # type: ignore[attr-defined]
    assert synced and all(isinstance(m, PeftModel) for m in synced)


def test_bf16_autocast_trains_with_fp32_master_weights() -> None:
    t = make(total_steps=4, autocast="bf16")
    history = t.train()
    trained = [h for h in history if h["trained_samples"] > 0]
    assert trained and all(math.isfinite(h["loss"]) for h in trained)
    assert all(p.dtype == torch.float32 for p in t.model.parameters())
    assert all(s["exp_avg"].dtype == torch.float32 for s in t.optimizer.state.values())
    # bf16 forwards see the engine's fp32 log-probs as ~1e-2 off, not as different tokens
    assert max(h["logprob_mismatch"] for h in trained) < 0.1
