"""KL estimators and β schedules; each KL option's expected gradient, by enumeration.

Gradient tests (Tang & Munos 2025): a softmax policy π_θ over V = 5 tokens, θ the logits, and a
fixed reference π_ref. The trainer adds a per-sample term f(x; θ) to the loss at a token x it
sampled and differentiates through logπ_θ(x) only (x is data). Its expected gradient is
E_{x~π}[∇f(x; θ)] = Σ_x π(x) ∇f(x; θ), computed exactly here as the autograd gradient of
Σ_x sg(π(x)) f(x; θ), with f from the shipped code (`grpo_loss` with advantage 0 and β = 1 for
k1/k2/k3, so the term is exactly KL_ESTIMATORS[name]; `sequence_k1` for `kl_in_reward`):

- k1: Σ π ∇logπ = Σ ∇π = 0;
- k2: Σ π log(π/π_ref) ∇logπ = Σ ∇π log(π/π_ref) = ∇KL(π ‖ π_ref)  (as Σ π ∇log π = 0);
- k3: f = π_ref/π − 1 − log(π_ref/π), ∇f = (1 − π_ref/π) ∇logπ, so
  Σ (π − π_ref) ∇logπ = −Σ π_ref ∇logπ = ∇KL(π_ref ‖ π), and ≠ ∇KL(π ‖ π_ref);
- kl_in_reward: the reward gets −β·k1(x) (k1 detached), the loss is the policy-gradient term
  −A(x)·ratio(x) with A = −β·k1 and ratio = exp(logπ − sg(logπ)), ∇(loss) = β·k1(x)·∇logπ(x);
  Σ π β log(π/π_ref) ∇logπ = β·∇KL(π ‖ π_ref). The ascent direction E[∇logπ·(−β·k1)] is
  therefore −β·∇KL(π ‖ π_ref): it descends the forward KL, like k2.

Exact KLs: KL(π ‖ π_ref) = Σ π log(π/π_ref), KL(π_ref ‖ π) = Σ π_ref log(π_ref/π), differentiated by
autograd.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.kl import (
    KL_ESTIMATORS,
    AdaptiveBeta,
    FixedBeta,
    WarmupBeta,
    k1,
    k2,
    k3,
    sequence_k1,
)
from grpo_core.loss import grpo_loss

logps = st.lists(st.floats(-30, 0, allow_nan=False), min_size=1, max_size=16)


@settings(max_examples=60, deadline=None)
@given(a=logps, b=logps)
def test_k3_is_non_negative(a: list[float], b: list[float]) -> None:
    n = min(len(a), len(b))
    out = k3(torch.tensor(a[:n], dtype=torch.float64), torch.tensor(b[:n], dtype=torch.float64))
    assert (out >= 0).all()
    assert torch.isfinite(out).all()


@settings(max_examples=60, deadline=None)
@given(a=logps)
def test_k3_and_k1_are_zero_when_logps_match(a: list[float]) -> None:
    x = torch.tensor(a).reshape(1, -1)  # (1, T)
    assert torch.equal(k3(x, x.clone()), torch.zeros_like(x))
    assert torch.equal(k1(x, x.clone()), torch.zeros_like(x))


def test_k3_formula_and_k1_sign() -> None:
    logp, ref = torch.tensor([-1.0]), torch.tensor([-2.0])
    d = -1.0
    assert k3(logp, ref).item() == pytest.approx(math.exp(d) - d - 1)
    assert k1(logp, ref).item() == pytest.approx(1.0)


def test_k3_is_unbiased_for_kl() -> None:
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(5), 0)  # (V,)
    q = torch.softmax(torch.randn(5), 0)  # (V,)
    x = torch.multinomial(p, 200_000, replacement=True)  # (S,) tokens from the policy
    est = k3(p.log()[x], q.log()[x]).mean().item()
    exact = (p * (p.log() - q.log())).sum().item()
    assert est == pytest.approx(exact, rel=0.05, abs=2e-3)


def test_fixed_and_warmup() -> None:
    assert FixedBeta(0.02).value(1000) == 0.02
    w = WarmupBeta(start=0.05, end=0.02, steps=10)
    assert w.value(0) == pytest.approx(0.05)
    assert w.value(5) == pytest.approx(0.035)
    assert w.value(10) == w.value(99) == 0.02
    values = [w.value(s) for s in range(12)]
    assert values == sorted(values, reverse=True)  # tight then loose


def test_adaptive_beta_steers_toward_target() -> None:
    up = AdaptiveBeta(target=0.05, horizon=10, init=0.1)
    up.update(0.5)  # KL far above target: error clipped to +0.2
    assert up.value(0) == pytest.approx(0.1 * 1.02)
    down = AdaptiveBeta(target=0.05, horizon=10, init=0.1)
    down.update(0.0)
    assert down.value(0) == pytest.approx(0.1 * 0.98)
    still = AdaptiveBeta(target=0.05, horizon=10, init=0.1)
    still.update(0.05)
    still.update(float("nan"))
    assert still.value(0) == pytest.approx(0.1)


V = 5


def _policy(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits θ (V,) with grad, and a fixed reference log-prob vector (V,), float64."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(V, generator=g, dtype=torch.float64).requires_grad_()
    ref = torch.log_softmax(torch.randn(V, generator=g, dtype=torch.float64), 0)
    return theta, ref


def _grad(value: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(value, theta)
    return g


def _expected_grad_of_kl_term(name: str, theta: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Σ_x sg(π(x)) ∇[loss of `grpo_loss` at the single token x, advantage 0, β = 1]."""
    logp = torch.log_softmax(theta, 0)  # (V,)
    total = theta.new_zeros(())
    for x in range(V):
        lp = logp[x].reshape(1, 1)  # (B=1, T=1)
        loss, _ = grpo_loss(
            lp,
            lp.detach(),
            torch.zeros(1, dtype=torch.float64),
            torch.ones(1, 1, dtype=torch.bool),
            torch.ones(1, dtype=torch.bool),
            ref_logp=ref[x].reshape(1, 1),
            beta=1.0,
            kl_estimator=name,  # type: ignore[arg-type]
        )
        total = total + logp[x].exp().detach() * loss
    return _grad(total, theta)


def _forward_kl_grad(theta: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(theta, 0)
    return _grad((logp.exp() * (logp - ref)).sum(), theta)  # ∇KL(π ‖ π_ref)


def _reverse_kl_grad(theta: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(theta, 0)
    return _grad((ref.exp() * (ref - logp)).sum(), theta)  # ∇KL(π_ref ‖ π)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k2_gradient_is_the_forward_kl_gradient(seed: int) -> None:
    theta, ref = _policy(seed)
    got = _expected_grad_of_kl_term("k2", theta, ref)
    assert torch.allclose(got, _forward_kl_grad(theta, ref), atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k3_gradient_is_the_reverse_kl_gradient_not_the_forward(seed: int) -> None:
    theta, ref = _policy(seed)
    got = _expected_grad_of_kl_term("k3", theta, ref)
    assert torch.allclose(got, _reverse_kl_grad(theta, ref), atol=1e-12)
    assert not torch.allclose(got, _forward_kl_grad(theta, ref), atol=1e-3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_k1_gradient_is_zero(seed: int) -> None:
    theta, ref = _policy(seed)
    got = _expected_grad_of_kl_term("k1", theta, ref)
    assert torch.allclose(got, torch.zeros_like(got), atol=1e-12)
    assert _forward_kl_grad(theta, ref).abs().max() > 1e-2  # there was something to pull


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_kl_in_reward_policy_gradient_descends_the_forward_kl(seed: int, beta: float) -> None:
    """Reward −β·k1 (detached, `sequence_k1`), loss = the PG term of `grpo_loss` at advantage
    A = −β·k1: its expected gradient is β·∇KL(π ‖ π_ref) (ascent direction −β·∇KL)."""
    theta, ref = _policy(seed)
    logp = torch.log_softmax(theta, 0)  # (V,)
    total = theta.new_zeros(())
    for x in range(V):
        lp = logp[x].reshape(1, 1)  # (1, 1)
        penalty = beta * sequence_k1(lp, ref[x].reshape(1, 1), torch.ones(1, 1))  # (1,)
        loss, _ = grpo_loss(
            lp, lp.detach(), -penalty, torch.ones(1, 1, dtype=torch.bool), torch.ones(1).bool()
        )
        total = total + logp[x].exp().detach() * loss
    got = _grad(total, theta)
    assert torch.allclose(got, beta * _forward_kl_grad(theta, ref), atol=1e-12)


def test_estimator_registry_and_k2_value() -> None:
    assert sorted(KL_ESTIMATORS) == ["k1", "k2", "k3"]
    logp, ref = torch.tensor([-1.0, -0.5]), torch.tensor([-2.0, -0.5])
    assert k2(logp, ref).tolist() == pytest.approx([0.5, 0.0])


def test_sequence_k1_sums_real_tokens_and_is_detached() -> None:
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, -9.0]], requires_grad=True)  # (2, 3)
    ref = torch.tensor([[-1.5, -1.0, -3.0], [-1.0, -0.5, 0.0]])  # (2, 3)
    mask = torch.tensor([[True, True, True], [True, True, False]])  # (2, 3)
    out = sequence_k1(logp, ref, mask)
    assert out.tolist() == pytest.approx([0.5 - 1.0 + 0.0, 0.5 + 0.0])
    assert not out.requires_grad
