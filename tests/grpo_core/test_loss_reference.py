"""`grpo_loss` against a direct transcription of the published objective, and clip counting.

The reference is written from the DeepSeekMath GRPO objective (Shao et al. 2024, eq. 3) with the
k3 KL estimator (their eq. 4): per token
    −min(ρ·A, clip(ρ, 1−ε_low, 1+ε_high)·A) + β·(π_ref/π − log(π_ref/π) − 1),
averaged per sequence then over sequences (the paper's 1/G Σ 1/|o_i| Σ_t form, our `seq_mean`),
or over all tokens (DAPO's token-level form, our `token_mean`). It uses probabilities, not the
log-space helpers of grpo_core, and a Python loop, so it shares no code with the implementation.
"""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.loss import grpo_loss, truncated_is_weights


def reference(
    logp: torch.Tensor,
    old: torch.Tensor,
    ref: torch.Tensor,
    adv: torch.Tensor,
    lengths: list[int],
    eps_low: float,
    eps_high: float,
    beta: float,
    token_level: bool,
    is_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    seq_terms, tok_terms = [], []
    for i, n in enumerate(lengths):
        terms = []
        for t in range(n):
            pi, pi_old, pi_ref = logp[i, t].exp(), old[i, t].exp(), ref[i, t].exp()
            rho = pi / pi_old
            surrogate = torch.minimum(
                rho * adv[i], torch.clamp(rho, 1 - eps_low, 1 + eps_high) * adv[i]
            )
            kl = pi_ref / pi - torch.log(pi_ref / pi) - 1
            w = 1.0 if is_weight is None else float(is_weight[i, t])  # a constant: no gradient
            terms.append(-(w * surrogate - beta * kl))
        tok_terms += terms
        seq_terms.append(torch.stack(terms).mean())
    return torch.stack(tok_terms).mean() if token_level else torch.stack(seq_terms).mean()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean"])
def test_loss_and_gradient_match_the_published_formula(seed: int, aggregation: str) -> None:
    g = torch.Generator().manual_seed(seed)
    b, t = 5, 7
    lengths = [7, 3, 5, 1, 6]
    logp = (-torch.rand(b, t, generator=g, dtype=torch.float64) * 4).requires_grad_()
    old = logp.detach() + 0.4 * torch.randn(b, t, generator=g, dtype=torch.float64)
    ref = logp.detach() + 0.5 * torch.randn(b, t, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    kw = {"eps_low": 0.2, "eps_high": 0.28, "beta": 0.04}
    ours, _ = grpo_loss(
        logp,
        old,
        adv,
        mask,
        torch.ones(b, dtype=torch.bool),
        aggregation=aggregation,  # type: ignore[arg-type]
        ref_logp=ref,
        **kw,
    )
    (grad_ours,) = torch.autograd.grad(ours, logp)
    theirs = reference(logp, old, ref, adv, lengths, token_level=aggregation == "token_mean", **kw)
    (grad_theirs,) = torch.autograd.grad(theirs, logp)
    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-6
    assert torch.allclose(grad_ours, grad_theirs, atol=1e-6, rtol=0)
    assert bool((grad_ours[~mask] == 0).all())


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean"])
def test_importance_weights_scale_only_the_policy_gradient_term(
    seed: int, aggregation: str
) -> None:
    """TIS (Yao et al. 2025; TRL): per token −w·min(ρA, clip(ρ)A) + β·k3, w = min(π_old/μ, cap)."""
    g = torch.Generator().manual_seed(seed)
    b, t, cap = 4, 6, 2.0
    lengths = [6, 2, 4, 1]
    logp = (-torch.rand(b, t, generator=g, dtype=torch.float64) * 4).requires_grad_()
    old = logp.detach() + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    ref = logp.detach() + 0.5 * torch.randn(b, t, generator=g, dtype=torch.float64)
    engine = old + 0.8 * torch.randn(b, t, generator=g, dtype=torch.float64)  # μ, the sampler
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    mask = torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]
    w_ref = torch.tensor(
        [[min(math.exp(float(old[i, j] - engine[i, j])), cap) for j in range(t)] for i in range(b)]
    )
    weights, m = truncated_is_weights(old, engine, mask, cap)
    assert torch.allclose(weights[mask].double(), w_ref[mask].double())
    assert bool((weights[~mask] == 1).all())
    assert m["is_clipped_frac"] == pytest.approx(float((w_ref[mask] >= cap).double().mean()))
    assert m["logprob_mismatch"] == pytest.approx(float((old - engine)[mask].abs().mean()))
    kw = {"eps_low": 0.2, "eps_high": 0.28, "beta": 0.04}
    ours, _ = grpo_loss(
        logp, old, adv, mask, torch.ones(b, dtype=torch.bool),
        aggregation=aggregation, ref_logp=ref, token_weight=weights, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    (grad_ours,) = torch.autograd.grad(ours, logp)
    theirs = reference(
        logp, old, ref, adv, lengths, token_level=aggregation == "token_mean", is_weight=w_ref, **kw
    )
    (grad_theirs,) = torch.autograd.grad(theirs, logp)
    assert abs(float(ours.detach()) - float(theirs.detach())) < 1e-6
    assert torch.allclose(grad_ours, grad_theirs, atol=1e-6, rtol=0)


def test_a_zero_cap_measures_the_mismatch_without_weighting() -> None:
    old = torch.tensor([[-1.0, -2.0, -3.0]])
    engine = torch.tensor([[-1.5, -2.0, -0.5]])
    mask = torch.tensor([[True, True, False]])
    weights, m = truncated_is_weights(old, engine, mask, cap=0.0)
    assert bool((weights == 1).all())
    assert m["logprob_mismatch"] == pytest.approx(0.25)
    assert m["is_weight_mean"] == pytest.approx((math.exp(0.5) + 1) / 2)
    assert m["is_clipped_frac"] == 0.0


def test_clip_fractions_count_the_tokens_where_each_side_binds() -> None:
    # ratios: 0.5 (below 0.8), 0.9, 1.0, 1.5 (above 1.2), per row; adv sign decides which binds
    ratios = torch.tensor([[0.5, 0.9, 1.0, 1.5], [0.5, 0.9, 1.0, 1.5]], dtype=torch.float64)
    old = torch.zeros(2, 4, dtype=torch.float64)
    logp = ratios.log()
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    mask = torch.ones(2, 4, dtype=torch.bool)
    _, m = grpo_loss(logp, old, adv, mask, torch.ones(2, dtype=torch.bool))
    # high side binds only for A > 0 and ρ > 1.2: one token of 8; low side for A < 0, ρ < 0.8
    assert m["clip_frac_high"] == pytest.approx(1 / 8)
    assert m["clip_frac_low"] == pytest.approx(1 / 8)
    assert math.isfinite(m["loss"])
