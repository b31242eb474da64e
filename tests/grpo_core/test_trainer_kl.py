"""Issue 29 in the trainer: `kl_in_reward`, the constant `dr_grpo` denominator, and `batch`'s std
over judged samples only, each against a slow per-sample reference.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer_kl.py -q`.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import grpo_core.trainer as trainer_mod
import grpo_core.update as update_mod  # the micro-batch loss calls grpo_loss there
from grpo_core.config import GRPOConfig
from grpo_core.logprobs import completion_logp
from grpo_core.trainer import Item, Sample, Scores, Trainer
from tests.grpo_core.test_advantages import slow_advantages
from tests.grpo_core.test_history import _moved_reference
from tests.grpo_core.test_trainer import (
    BASE,
    even_first_token,
    half_unknown,
    make,
    params,
    same,
)


def slow_sequence_kl(t: Trainer, item: Item, sample: Sample) -> float:
    """Σ_t (logπ − logπ_ref) of one completion, from a one-row batch of full rows."""
    b = t._tensors([item], [sample], torch.zeros(1))
    with torch.no_grad():
        lp = completion_logp(t.model, b, False, "off", t.cfg.temperature)[0]  # (1, Tc)
        assert t.ref_model is not None
        ref = completion_logp(t.ref_model, b, False, "off", t.cfg.temperature)[0]  # (1, Tc)
    return float(((lp - ref) * b.comp_mask).sum())


def spy_step(monkeypatch: pytest.MonkeyPatch, t: Trainer) -> list[dict[str, Any]]:
    """Each step's inputs to `step_advantages` (incl. kl_penalty), its advantages, and the slow
    per-sample KL at the same (pre-update) weights."""
    seen: list[dict[str, Any]] = []
    real = trainer_mod.step_advantages

    def spy(
        cfg: Any, comps: Any, step: int, flat: Any, group: Any, known: Any, raw: Any, **kw: Any
    ) -> Any:
        adv, inf = real(cfg, comps, step, flat, group, known, raw, **kw)
        items = t.batches(step)
        slow = [
            slow_sequence_kl(t, items[int(g)], s) if k else 0.0
            for s, g, k in zip(flat, group.tolist(), known.tolist(), strict=True)
        ]
        seen.append(
            {
                "group": group,
                "known": known,
                "raw": raw,
                "adv": adv,
                "kl": kw["kl_penalty"],
                "slow": slow,
            }
        )
        return adv, inf

    monkeypatch.setattr(trainer_mod, "step_advantages", spy)
    return seen


def spy_loss(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    real = update_mod.grpo_loss

    def spy(*a: Any, **kw: Any) -> Any:
        calls.append({"beta": kw["beta"], "max_tokens": kw["max_tokens"]})
        return real(*a, **kw)

    monkeypatch.setattr(update_mod, "grpo_loss", spy)
    return calls


@pytest.mark.parametrize("estimator", ["rloo", "grpo"])
@pytest.mark.parametrize("share_prefix", [True, False])
def test_kl_in_reward_subtracts_beta_times_sequence_kl_before_the_baseline(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch, estimator: str, share_prefix: bool
) -> None:
    """kl_penalty = β·Σ_t(logπ_old − logπ_ref) per judged sample (slow one-row recomputation);
    0 at step 0 (policy = frozen reference), then not; the advantages are the slow ones of
    reward − penalty; unjudged samples get no penalty; the loss carries no KL term (β = 0 there)."""
    beta = 0.5
    t = make(
        toy, reward=half_unknown, total_steps=3, beta_schedule="fixed", beta=beta,
        kl_in_reward=True, estimator=estimator, share_prefix=share_prefix, micro_batch_size=5,
    )  # fmt: skip
    seen, calls = spy_step(monkeypatch, t), spy_loss(monkeypatch)
    history = t.train()
    assert len(seen) == 3 and calls
    assert all(c["beta"] == 0.0 for c in calls)  # KL only in the reward
    assert all("kl" in h for h in history)  # still measured
    for i, step in enumerate(seen):
        kl, known = step["kl"], step["known"]
        assert kl is not None and torch.equal(kl[~known], torch.zeros_like(kl[~known]))
        assert kl.tolist() == pytest.approx([beta * x for x in step["slow"]], rel=1e-5, abs=1e-6)
        if i == 0:
            assert kl.abs().max() < 1e-6
        reward = (step["raw"][known] - kl[known]).tolist()
        want = slow_advantages(reward, step["group"][known].tolist(), estimator)
        assert step["adv"][known].tolist() == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert max(float(s["kl"].abs().max()) for s in seen[1:]) > 1e-4  # the policy moved


def flat_b(items: Any, samples: Any) -> Scores:
    """`even_first_token`, but every sample of prompt "b" right: b's task rewards are flat."""
    s = even_first_token(items, samples)
    rewards = [1.0 if it.prompt == "b" else r for it, r in zip(items, s.rewards, strict=True)]
    return Scores(rewards, [r == 1.0 for r in rewards])


def step_gradient(toy: dict[str, Any], prompts: str, **kw: Any) -> dict[str, torch.Tensor]:
    """The gradient of step 0's update (unclipped) on a batch of `prompts` (G = 8 each), with
    the reference moved away from the policy so that the KL penalty is not 0."""
    cfg = GRPOConfig(**{**BASE, "max_grad_norm": 1e9, "beta_schedule": "fixed", **kw})
    model, tok = toy["model"](), toy["tokenizer"]()
    batch = [Item(p, p.upper(), 8, key=p) for p in prompts]
    t = Trainer(model, tok, toy["sampler"](model, tok), flat_b, lambda step: batch, cfg)
    _moved_reference(t)
    grads: list[dict[str, torch.Tensor]] = []
    real = t.optimizer.step

    def spy(*a: Any, **k: Any) -> Any:
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        return real(*a, **k)

    t.optimizer.step = spy  # type: ignore[method-assign]
    assert t.run_step(0).metrics["trained_samples"] > 0
    assert len(grads) == 1
    return grads[0]


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_a_group_with_flat_task_rewards_trains_nothing_under_kl_in_reward(
    toy: dict[str, Any], estimator: str
) -> None:
    """Issue 46 point 6: one informative rule, on the task reward. b's samples are all right, so
    its group is uninformative although −β·KL spreads its combined rewards (under `grpo` the std
    would have scaled that KL noise to unit advantages, β cancelling): the gradient of a batch
    with b equals the gradient without it."""
    kw = {"kl_in_reward": True, "beta": 0.5, "estimator": estimator}
    with_b, without_b = step_gradient(toy, "ab", **kw), step_gradient(toy, "a", **kw)
    assert with_b.keys() == without_b.keys()
    # equal up to float32 rounding: a's KL penalty comes from a forward padded with b's rows
    # (b in the loss moved every tensor by tens of percent)
    for name, g in with_b.items():
        assert float((g - without_b[name]).norm()) <= 1e-5 * float(without_b[name].norm()), name
    assert any(bool(g.abs().max() > 0) for g in with_b.values())


def test_kl_in_reward_with_beta_zero_is_a_no_op(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    kw = {"total_steps": 3, "beta_schedule": "fixed", "beta": 0.0}
    plain = make(toy, **kw)
    plain.train()
    folded = make(toy, kl_in_reward=True, **kw)
    seen = spy_step(monkeypatch, folded)
    folded.train()
    assert all(s["kl"] is None for s in seen)  # no extra forward pass
    assert same(params(plain), params(folded))


@pytest.mark.parametrize(("norm", "want"), [(0, 6), (10, 10)])
def test_dr_grpo_divides_by_a_constant_every_step(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch, norm: int, want: int
) -> None:
    """max_tokens is max_new_tokens (or loss_norm_tokens), not the step's longest completion."""
    calls = spy_loss(monkeypatch)
    t = make(toy, total_steps=3, aggregation="dr_grpo", max_new_tokens=6, loss_norm_tokens=norm)
    t.train()
    assert calls and all(c["max_tokens"] == want for c in calls)


def test_batch_estimator_std_is_over_judged_samples(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With verifier errors, `batch` advantages of judged samples equal the slow loop over the
    judged samples alone (the 0 placeholders of errors are not in the std)."""
    t = make(toy, reward=half_unknown, total_steps=2, estimator="batch")
    seen = spy_step(monkeypatch, t)
    t.train()
    for step in seen:
        known = step["known"]
        assert not known.all()
        want = slow_advantages(step["raw"][known].tolist(), step["group"][known].tolist(), "batch")
        assert step["adv"][known].tolist() == pytest.approx(want, rel=1e-6, abs=1e-9)
        with_zeros = slow_advantages(
            torch.where(known, step["raw"], 0.0).tolist(),
            [
                g if k else 100 + i
                for i, (g, k) in enumerate(zip(step["group"].tolist(), known.tolist(), strict=True))
            ],
            "batch",
        )
        assert [with_zeros[i] for i in known.nonzero().squeeze(1).tolist()] != pytest.approx(want)
