"""KL estimators and β schedules."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.kl import AdaptiveBeta, FixedBeta, WarmupBeta, k1, k3

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
