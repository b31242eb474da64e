"""Replayed (off-policy) rows: the decoupled clipped objective, checked against a slow reference
loop written here, and on-policy rows bitwise as before (issue 46 point 5).

The reference is written from Hilton et al. 2022 ("Batch size-invariance for policy
optimization", decoupled PPO): per token of a row sampled by a behaviour policy μ,

    −w · min(r·A, clip(r, 1 − ε_low, 1 + ε_high)·A) + β · w · k3(π_θ, π_ref),
    r = π_θ / π_prox,   w = min(π_prox / μ, tis_cap) (a constant),

with π_prox the policy at the step's start; on-policy rows have w = 1. It recomputes every
log-prob with a plain full-row forward of the toy model, token by token, and differentiates
the loss with respect to the parameters: no code of grpo_core's loss, batch or log-prob paths.

Test: `.venv/bin/pytest tests/grpo_core/test_offpolicy.py -q`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch import Tensor

import grpo_core.trainer as trainer_module
import grpo_core.update as update_module
from grpo_core.batch import Batch
from grpo_core.config import GRPOConfig
from grpo_core.history import replay_curation
from grpo_core.kl import KL_ESTIMATORS
from grpo_core.loss import (
    AGGREGATIONS,
    _masked_mean,
    _metrics,
    clipped_surrogate,
    grpo_loss,
    truncated_is_weights,
    valid_tokens,
)
from grpo_core.trainer import Hooks, Item, Sample, Trainer, TrainerError
from grpo_core.update import StepInputs
from tests.grpo_core.conftest import (
    VOCAB,
    ToySampler,
    ToyTokenizer,
    first_letter_reward,
    toy_batches,
    toy_model,
)
from tests.grpo_core.test_trainer_engine import EngineSampler

EPS_LOW, EPS_HIGH, CAP = 0.2, 0.28, 2.0


# ------------------------------------------------------------------ on-policy rows: unchanged


def old_grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    mask: Tensor,
    informative: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    aggregation: str,
    max_tokens: int | None,
    ref_logp: Tensor | None,
    beta: float,
    kl_estimator: str,
    truncated: Tensor | None,
    entropy: Tensor | None,
    token_weight: Tensor | None,
) -> tuple[Tensor, dict[str, float]]:
    """`grpo_core.loss.grpo_loss` as it was before issue 46 point 5, op for op."""
    valid = valid_tokens(mask, informative, truncated)
    per_token, ratio = clipped_surrogate(logp, old_logp, adv, eps_low, eps_high, valid)
    metrics = _metrics(ratio, adv, valid, eps_low, eps_high)
    if token_weight is not None:
        per_token = per_token * token_weight.detach().to(per_token.dtype)
    metrics["pg_loss"] = _masked_mean(per_token, valid)
    if ref_logp is not None:
        zero = torch.zeros_like(logp)
        kl = KL_ESTIMATORS[kl_estimator](
            torch.where(valid, logp, zero), torch.where(valid, ref_logp, zero)
        )
        metrics["kl_ref"] = _masked_mean(kl, valid)
        if beta > 0:
            per_token = per_token + beta * kl
    if entropy is not None:
        metrics["entropy"] = _masked_mean(entropy, mask.bool())
    loss = AGGREGATIONS[aggregation](per_token, valid, max_tokens or logp.shape[1])
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def old_is_weights(ctx: StepInputs, j: int, part: Batch, old: Tensor, cap: float) -> Any:
    """`StepInputs.is_weights` as it was before issue 46 point 5 (fresh rows: engine only)."""
    engine_lp, has_engine = part.engine_lp, part.has_engine
    assert part.replayed is None  # this copy is only for fresh-sample batches
    if engine_lp is None or has_engine is None:
        return None
    if j not in ctx.weights:
        known = part.comp_mask & has_engine[:, None]
        ctx.weights[j], metrics = truncated_is_weights(old, engine_lp, known, cap)
        ctx.tis.append((float(known.sum()), metrics))
    return ctx.weights[j]


def old_part_loss(
    cfg: GRPOConfig,
    ctx: StepInputs,
    j: int,
    part: Batch,
    logp: Tensor,
    old: Tensor,
    entropy: Tensor | None,
) -> tuple[Tensor, dict[str, float]]:
    """`grpo_core.update.part_loss` as it was before issue 46 point 5."""
    return old_grpo_loss(
        logp,
        old,
        part.adv,
        part.comp_mask,
        torch.ones_like(part.adv, dtype=torch.bool),
        eps_low=cfg.clip_eps_low,
        eps_high=cfg.clip_eps_high,
        aggregation=cfg.aggregation,
        max_tokens=ctx.max_tokens,
        ref_logp=ctx.ref[j] if ctx.ref is not None else None,
        beta=ctx.beta,
        kl_estimator=cfg.kl_estimator,
        truncated=part.truncated if cfg.mask_truncated else None,
        entropy=entropy,
        token_weight=old_is_weights(ctx, j, part, old, cfg.tis_cap),
    )


@pytest.mark.parametrize(
    "engine,kw",
    [
        (False, {"num_iterations": 2, "micro_batch_size": 5}),
        (True, {"num_iterations": 1}),
        (True, {"num_iterations": 3, "aggregation": "seq_mean", "kl_estimator": "k2"}),
    ],
)
def test_fresh_samples_train_bitwise_as_before(
    engine: bool, kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmark campaign's path (no replay): every step's loss, metrics and parameters
    equal, bit for bit, those of the objective before the decoupled clip (its code frozen
    above), with and without engine log-probs (truncated IS), over several iterations."""
    runs = []
    for formula in ("new", "old"):
        if formula == "old":
            monkeypatch.setattr(update_module, "part_loss", old_part_loss)
        model, tok = toy_model(), ToyTokenizer()
        cfg = GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, total_steps=3, **kw)
        sampler = EngineSampler(model, tok, offset=-0.3) if engine else ToySampler(model, tok)
        t = Trainer(model, tok, sampler, first_letter_reward, toy_batches(), cfg,
                    hooks=Hooks(warning=lambda m: None))  # fmt: skip
        history = t.train()
        runs.append((history, [p.detach().clone() for p in t.model.parameters()]))
    (new_h, new_p), (old_h, old_p) = runs
    assert any(h["trained_samples"] > 0 for h in new_h)
    untimed = [[(k, v) for k, v in sorted(h.items()) if not k.startswith("time_")] for h in new_h]
    assert untimed == [
        [(k, v) for k, v in sorted(h.items()) if not k.startswith("time_")] for h in old_h
    ]
    assert all(torch.equal(a, b) for a, b in zip(new_p, old_p, strict=True))


# ------------------------------------------------------------------ the reference loop

IDS = {ch: i for i, ch in enumerate(VOCAB)}


def sample(text: str, stop: bool = True) -> Sample:
    """A completion spelled in the toy vocabulary, with <eos> when it stopped."""
    ids = tuple(IDS[ch] for ch in text) + ((IDS["<eos>"],) if stop else ())
    return Sample(ids, text, truncated=not stop)


GROUPS = {  # first letter right in 2 of 4 (a, c) or 1 of 4 (b): every group informative
    "a": [sample("A"), sample("cb"), sample("Ab", stop=False), sample("d")],
    "b": [sample("c"), sample("Bd"), sample("dd"), sample("e")],
    "c": [sample("C"), sample("a"), sample("Cc"), sample("cab", stop=False)],
}


def items(step: int) -> list[Item]:
    return [Item(p, p.upper(), 4, key=p) for p in ("a", "b", "c")]


class Fixed:
    """A sampler that returns the given completions, whatever the weights (fresh rows)."""

    def sample_groups(self, prompts: Sequence[str], sizes: Any, **_: Any) -> list[list[Sample]]:
        return [list(GROUPS[p]) for p in prompts]


def moved(model: torch.nn.Module, seed: int, scale: float) -> torch.nn.Module:
    """Another policy: `model` with every parameter moved by `scale` · N(0, 1)."""
    other = copy.deepcopy(model).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return other


def token_logps(model: torch.nn.Module, prompt: str, s: Sample) -> list[Tensor]:
    """log π(token | prefix) for each completion token, one full-row forward, one by one."""
    p = [IDS[ch] for ch in prompt]
    logits = model(input_ids=torch.tensor([p + list(s.token_ids)])).logits[0].float()
    out = []
    for t, tok in enumerate(s.token_ids):
        out.append(torch.log_softmax(logits[len(p) - 1 + t], dim=-1)[tok])
    return out


def advantages(group: list[Sample], answer: str) -> list[float]:
    """GRPO's (r − mean) / (population std + 1e-6) of the first-letter reward."""
    r = [1.0 if s.text[:1] == answer else 0.0 for s in group]
    mean = sum(r) / len(r)
    std = math.sqrt(sum((x - mean) ** 2 for x in r) / len(r))
    return [(x - mean) / (std + 1e-6) for x in r]


def reference_loss(
    model: torch.nn.Module,
    prox: torch.nn.Module,
    ref: torch.nn.Module,
    behaviour: dict[str, torch.nn.Module | None],
    beta: float,
) -> tuple[Tensor, int]:
    """The decoupled objective (token mean) at `model`'s weights, and how many tokens of
    off-policy rows the clip binds on (where it zeroes their policy gradient)."""
    terms: list[Tensor] = []
    binding = 0
    for prompt, group in GROUPS.items():
        mu = behaviour[prompt]
        for s, a in zip(group, advantages(group, prompt.upper()), strict=True):
            now = token_logps(model, prompt, s)
            with torch.no_grad():
                at_start, at_ref = token_logps(prox, prompt, s), token_logps(ref, prompt, s)
                sampled = token_logps(mu, prompt, s) if mu is not None else at_start
            for lp, lp_prox, lp_ref, lp_mu in zip(now, at_start, at_ref, sampled, strict=True):
                w = min(math.exp(float(lp_prox) - float(lp_mu)), CAP)  # 1 on on-policy rows
                r = torch.exp(lp - lp_prox)
                surrogate = torch.minimum(r * a, torch.clamp(r, 1 - EPS_LOW, 1 + EPS_HIGH) * a)
                k3 = torch.exp(lp_ref - lp) - (lp_ref - lp) - 1
                terms.append(-w * surrogate + beta * w * k3)
                out = (a > 0 and float(r.detach()) > 1 + EPS_HIGH) or (
                    a < 0 and float(r.detach()) < 1 - EPS_LOW
                )
                binding += int(mu is not None and out)
    return torch.stack(terms).mean(), binding


def weights_of(model: torch.nn.Module, values: Sequence[Tensor]) -> torch.nn.Module:
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        for p, v in zip(copy_.parameters(), values, strict=True):
            p.copy_(v)
    return copy_.train(False).requires_grad_(True)


@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_replayed_rows_follow_the_decoupled_objective(beta: float) -> None:
    """Prompt "a" replays samples of another policy with their behaviour log-probs, "b" samples
    of the (moved) reference without, "c" trains on fresh samples. Over three iterations at a
    large lr the ratio to the step's start moves past the clip on replayed tokens; every
    iteration's loss and gradient equal the reference loop's."""
    model, tok = toy_model(), ToyTokenizer()
    start = copy.deepcopy(model)
    mu_a = moved(model, seed=1, scale=0.4)
    with torch.no_grad():  # "a": its behaviour log-probs, read from mu_a token by token
        lps = {s: tuple(float(x) for x in token_logps(mu_a, "a", s)) for s in GROUPS["a"]}
    stored = {"a": [replace(s, logprobs=lps[s]) for s in GROUPS["a"]], "b": GROUPS["b"]}
    cfg = GRPOConfig(
        lr=0.05, max_new_tokens=3, checkpoint_every=0, total_steps=1, num_iterations=3,
        beta=beta, beta_schedule="fixed", clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH,
        tis_cap=CAP, max_grad_norm=1e9,
    )  # fmt: skip
    t = Trainer(model, tok, Fixed(), first_letter_reward, items, cfg,
                collector=replay_curation(stored))  # fmt: skip
    ref = moved(start, seed=2, scale=0.4)  # a later night: the reference is not the policy
    t.ref_model = t.policy.ref_model = ref
    seen: list[tuple[list[Tensor], list[Tensor], Any]] = []
    backward = t._backward

    def spy(ctx: StepInputs) -> Any:
        before = [p.detach().clone() for p in t.model.parameters()]
        out = backward(ctx)
        grads = [p.grad.detach().clone() for p in t.model.parameters()]  # type: ignore[union-attr]
        seen.append((before, grads, out))
        return out

    t._backward = spy  # type: ignore[method-assign]
    m = t.run_step(0).metrics
    assert m["replayed_rollouts"] == 8 and m["rollouts"] == 4
    assert 0 < m["is_clipped_frac"] < 1  # some behaviour weights truncated at the cap
    assert len(seen) == 3
    prox = weights_of(start, seen[0][0])
    bound = 0
    for before, grads, out in seen:
        at = weights_of(start, before)
        loss, binding = reference_loss(at, prox, ref, {"a": mu_a, "b": ref, "c": None}, beta)
        bound += binding
        expected = torch.autograd.grad(loss, list(at.parameters()))
        assert out["loss"] == pytest.approx(float(loss.detach()), rel=1e-5, abs=1e-7)
        for g, e in zip(grads, expected, strict=True):
            assert torch.allclose(g, e, rtol=1e-4, atol=1e-6), float((g - e).abs().max())
    assert not all(torch.equal(a, b) for a, b in zip(seen[0][0], seen[1][0], strict=True))
    assert bound > 0  # the clip bound on replayed tokens in the later iterations


def test_a_stale_token_past_the_clip_has_no_policy_gradient() -> None:
    """A replayed token whose ratio to the proximal policy left the clip range on the side its
    advantage pushes contributes nothing (whatever its behaviour weight); inside the range its
    gradient is −w·A·r / N, with w = min(π_prox / μ, cap): the weight, not the ratio to μ."""
    prox = torch.log(torch.tensor([[0.2, 0.2, 0.2, 0.2]], dtype=torch.float64))
    ratio = torch.tensor([[1.5, 1.1, 0.5, 0.9]], dtype=torch.float64)  # r = π_θ / π_prox
    logp = (prox + ratio.log()).requires_grad_()
    mu = torch.log(torch.tensor([[0.05, 0.05, 0.4, 0.08]], dtype=torch.float64))  # μ: stale
    w, _ = truncated_is_weights(prox, mu, torch.ones(1, 4, dtype=torch.bool), CAP)
    assert w[0].tolist() == pytest.approx([2.0, 2.0, 0.5, 2.0])  # π_prox/μ = 4, 4, 0.5, 2.5
    for adv, dead in ((1.0, [True, False, False, False]), (-1.0, [False, False, True, False])):
        a = torch.tensor([adv], dtype=torch.float64)
        loss, _ = grpo_loss(
            logp, prox, a, torch.ones(1, 4, dtype=torch.bool), torch.ones(1, dtype=torch.bool),
            eps_low=EPS_LOW, eps_high=EPS_HIGH, token_weight=w,
        )  # fmt: skip
        (grad,) = torch.autograd.grad(loss, logp)
        expected = [0.0 if d else -float(w[0, i]) * adv * float(ratio[0, i]) / 4
                    for i, d in enumerate(dead)]  # fmt: skip
        assert grad[0].tolist() == pytest.approx(expected, abs=1e-12)


def test_the_kl_of_off_policy_rows_is_importance_weighted() -> None:
    """`kl_weight` multiplies each token's KL term (and the logged kl_ref); None: unweighted."""
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(2, 3, generator=g, dtype=torch.float64) * 2).requires_grad_()
    ref = logp.detach() + 0.5 * torch.randn(2, 3, generator=g, dtype=torch.float64)
    kw: dict[str, Any] = {"ref_logp": ref, "beta": 0.1}
    mask, info = torch.ones(2, 3, dtype=torch.bool), torch.ones(2, dtype=torch.bool)
    adv = torch.zeros(2, dtype=torch.float64)  # only the KL term moves
    w = torch.tensor([[1.0, 1.0, 1.0], [0.5, 2.0, 0.25]], dtype=torch.float64)
    plain, mp = grpo_loss(logp, logp.detach(), adv, mask, info, **kw)
    weighted, mw = grpo_loss(logp, logp.detach(), adv, mask, info, kl_weight=w, **kw)
    k3 = torch.exp(ref - logp) - (ref - logp) - 1
    assert float(plain.detach()) == pytest.approx(float(0.1 * k3.detach().mean()))
    assert float(weighted.detach()) == pytest.approx(float(0.1 * (w * k3).detach().mean()))
    assert mw["kl_ref"] == pytest.approx(float((w * k3).detach().mean()))
    assert mp["kl_ref"] == pytest.approx(float(k3.detach().mean()))


def test_replayed_rows_without_their_weights_are_refused(toy: dict[str, Any]) -> None:
    """tis_cap = 0 turns the weights off: a replayed row would then push as if on-policy, so
    the step is refused; so is a replayed row with neither its behaviour log-probs nor a
    reference (a collector other than replay_curation, which refuses it itself)."""
    model, tok = toy_model(), ToyTokenizer()
    cfg = GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, total_steps=1, tis_cap=0.0)
    t = Trainer(model, tok, Fixed(), first_letter_reward, items, cfg,
                collector=replay_curation(GROUPS))  # fmt: skip
    with pytest.raises(TrainerError, match="tis_cap"):
        t.run_step(0)

    def replaying(tr: Any, step: int) -> Any:
        c = trainer_module.collect(tr, step)
        c.groups = [[Sample(s.token_ids, s.text, s.truncated, replayed=True) for s in g]
                    for g in c.groups]  # fmt: skip
        return c

    cfg = GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, total_steps=1,
                     reference="none", beta=0.0, beta_schedule="fixed")  # fmt: skip
    t = Trainer(toy_model(), tok, Fixed(), first_letter_reward, items, cfg, collector=replaying)
    with pytest.raises(TrainerError, match="behaviour log-probs"):
        t.run_step(0)
