"""Per-token KL estimators to the reference policy, and schedules for their weight β.

Estimators (Schulman, "Approximating KL divergence", 2020), with log r = logp − ref_logp on
tokens x sampled from the current policy π. What matters for training is the *gradient* of the
term when it is added to the loss and differentiated through logp at the sampled x (as
`grpo_core.loss` does), in expectation over x ~ π (Tang & Munos 2025, "On a few pitfalls in KL
divergence gradient estimation for RL"):

- `k1 = log r`: value unbiased for KL(π ‖ π_ref), but E[∇k1] = E[∇logπ] = 0: as a loss term it
  pulls nothing toward the reference (it only measures);
- `k2 = ½ (log r)²`: value biased (≥ 0), but E[∇k2] = E[log r · ∇logπ] = ∇KL(π ‖ π_ref), the
  gradient one wants from a KL penalty;
- `k3 = exp(−log r) + log r − 1`: value unbiased and ≥ 0 per token (the DeepSeekMath GRPO and
  TRL term), but E[∇k3] = E[(1 − π_ref/π) ∇logπ] = −Σ π_ref ∇logπ = ∇KL(π_ref ‖ π): it
  optimises the *reverse* KL (mass-covering), not the KL its value estimates;
- `sequence_k1`: Σ_t k1 over a completion, the per-sequence KL that `GRPOConfig.kl_in_reward`
  folds, detached, into the reward (reward − β·k1, PPO-RLHF style); through the policy
  gradient E[∇logπ · (−β·k1)] = −β·∇KL(π ‖ π_ref).

The derivations are checked on an enumerable categorical policy in tests/grpo_core/test_kl.py.

β schedules (all have `value(step) -> float` and `update(measured_kl)`):

- `FixedBeta(beta)`;
- `WarmupBeta(start, end, steps)`: linear from `start` to `end` over `steps`, then `end`. Tight
  then loose (e.g. 0.05 → 0.02): seed article 002 starts with a tighter KL and relaxes it once
  the reward starts to rise;
- `AdaptiveBeta(target, horizon, init)`: the proportional controller of Ziegler et al. 2019
  (used by PPO-RLHF): error = clip(KL/target − 1, −0.2, 0.2); β ← β · (1 + error · n/horizon).

These expectations are on-policy (x from the weights being differentiated: the first of
`num_iterations`; later iterations reuse the samples and hold them only approximately).

Departure: `k3` clamps d = ref_logp − logp to ±`K3_CLAMP` before the exponential so one far-off
token cannot overflow to inf (its gradient is 0 beyond); inside that range it is exact.

Test: `.venv/bin/pytest tests/grpo_core/test_kl.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

if TYPE_CHECKING:
    from grpo_core.config import GRPOConfig

K3_CLAMP = 20.0  # |ref_logp − logp| above this is clamped inside k3 (exp(20) ≈ 5e8)


def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k1 estimate of KL(π ‖ π_ref): logp − ref_logp. (B, T)"""
    return logp - ref_logp  # (B, T)


def k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k2 = ½ (logp − ref_logp)²; E[∇k2] = ∇KL(π ‖ π_ref) on-policy. (B, T)"""
    return 0.5 * (logp - ref_logp).square()  # (B, T)


def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π ‖ π_ref): exp(d) − d − 1 ≥ 0, d = ref_logp − logp. (B, T)"""
    d = (ref_logp - logp).clamp(-K3_CLAMP, K3_CLAMP)  # (B, T)
    return torch.expm1(d) - d  # (B, T); expm1 keeps precision near d = 0


def sequence_k1(logp: Tensor, ref_logp: Tensor, mask: Tensor) -> Tensor:
    """Σ_t k1 over each completion's real tokens (mask (B, T)), detached. (B,)"""
    per_token = torch.where(mask.bool(), k1(logp.detach(), ref_logp.detach()), 0.0)  # (B, T)
    return per_token.sum(dim=1)  # (B,)


KL_ESTIMATORS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"k1": k1, "k2": k2, "k3": k3}


class BetaSchedule(Protocol):
    """β as a function of the optimiser step; `update` feeds back the measured KL."""

    def value(self, step: int) -> float: ...

    def update(self, measured_kl: float, n_steps: int = 1) -> None: ...


@dataclass
class FixedBeta:
    beta: float

    def value(self, step: int) -> float:
        return self.beta

    def update(self, measured_kl: float, n_steps: int = 1) -> None:
        """Fixed: ignores the measured KL."""


@dataclass
class WarmupBeta:
    start: float  # tight β at step 0 (e.g. 0.05)
    end: float  # loose β after warm-up (e.g. 0.02)
    steps: int  # length of the linear ramp in optimiser steps

    def value(self, step: int) -> float:
        if self.steps <= 0 or step >= self.steps:
            return self.end
        frac = max(step, 0) / self.steps
        return self.start + (self.end - self.start) * frac

    def update(self, measured_kl: float, n_steps: int = 1) -> None:
        """Open-loop: ignores the measured KL."""


@dataclass
class AdaptiveBeta:
    target: float  # KL per token the controller steers toward
    horizon: int  # steps over which a full (clipped) error changes β by ~±20 %
    init: float  # starting β
    max_error: float = 0.2  # proportional error clip, as in Ziegler et al. 2019

    def __post_init__(self) -> None:
        self.beta = self.init

    def value(self, step: int) -> float:
        return self.beta

    def update(self, measured_kl: float, n_steps: int = 1) -> None:
        """β rises when KL > target, falls when KL < target; ignores non-finite KL."""
        if not torch.isfinite(torch.tensor(measured_kl)):
            return
        error = min(max(measured_kl / self.target - 1.0, -self.max_error), self.max_error)
        self.beta *= 1.0 + error * n_steps / self.horizon


def make_beta_schedule(cfg: GRPOConfig) -> BetaSchedule:
    """The β schedule `cfg` describes (a fresh object; AdaptiveBeta keeps state)."""
    if cfg.beta_schedule == "warmup":
        return WarmupBeta(cfg.beta_start, cfg.beta, cfg.beta_warmup_steps)
    if cfg.beta_schedule == "adaptive":
        return AdaptiveBeta(cfg.kl_target, cfg.kl_horizon, cfg.beta)
    return FixedBeta(cfg.beta)
