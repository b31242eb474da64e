"""From scores to advantages, and the metric rows of one step.

`step_advantages` is the step's path from rewards to per-sample advantages: reward components
are combined (`grpo_core.rewards`), a sample whose reward is `None` (the verifier could not
judge it) is put in a group of its own so it carries no advantage and is out of the loss, then
advantages per group (`grpo_core.advantages`) and the length penalty after normalisation.
The `*_metrics` functions build the rows the trainer reports, so every step (trained, empty or
skipped) carries the same keys.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from grpo_core.advantages import advantages, length_penalty
from grpo_core.config import GRPOConfig
from grpo_core.rewards import Component, combine, repetition_penalty
from grpo_core.types import Sample, Scores


def score_metrics(flat: list[Sample], scores: Scores, beta: float) -> dict[str, float]:
    """Reward, pass rate and length metrics of one step's samples (before any update)."""
    known = [float(r) for r in scores.rewards if r is not None]
    correct = [c for c in scores.correct if c is not None]
    lengths = torch.tensor([len(s.token_ids) for s in flat], dtype=torch.float64)  # (N,)
    rewards = torch.tensor(known, dtype=torch.float32)
    return {
        "reward_mean": float(rewards.mean()) if known else math.nan,
        "reward_std": float(rewards.std(correction=0)) if known else math.nan,
        "pass_rate": sum(correct) / len(correct) if correct else math.nan,
        "completion_len": float(lengths.mean()),
        "truncated_share": float(torch.tensor([s.truncated for s in flat]).float().mean()),
        "verifier_errors": float(len(flat) - len(known)),
        "beta": beta,
    }


def step_advantages(
    cfg: GRPOConfig,
    components: list[Component],
    step: int,
    flat: list[Sample],
    group: Tensor,
    known: Tensor,
    raw: Tensor,
) -> tuple[Tensor, Tensor]:
    """(N,) advantages and (N,) informative flags; an unjudged sample is its own group."""
    n = len(flat)
    gid = torch.where(known, group, group.max() + 1 + torch.arange(n))  # (N,)
    values = {
        "reward": torch.where(known, raw, torch.zeros_like(raw)).double(),
        "repetition": repetition_penalty([s.token_ids for s in flat], cfg.repetition_ngram),
    }
    reward = combine(values, components, gid, step, cfg.reward_clip)  # (N,)
    adv, informative = advantages(
        reward, gid, cfg.estimator, cfg.std_ddof, cfg.adv_eps, cfg.zero_var_tol
    )
    lengths = torch.tensor([len(s.token_ids) for s in flat], dtype=torch.float64)  # (N,)
    adv = length_penalty(
        adv, lengths, gid, cfg.length_penalty_coef, informative, cfg.std_ddof, cfg.adv_eps
    )
    return adv, informative


def update_metrics(sums: dict[str, float], trained: int) -> dict[str, float]:
    """The update's metrics from the iterations' averaged loss metrics."""
    return {
        "loss": sums["loss"],
        "kl": sums.get("kl_ref", 0.0),
        "clip_low_frac": sums["clip_frac_low"],
        "clip_high_frac": sums["clip_frac_high"],
        "entropy": sums.get("entropy", math.nan),
        "grad_norm": sums["grad_norm"],
        "trained_samples": float(trained),
    }


def empty_update_metrics(value: float = 0.0) -> dict[str, float]:
    """The update's keys for a step without one: 0 (nothing to learn) or NaN (skipped)."""
    keys = ("loss", "kl", "clip_low_frac", "clip_high_frac", "entropy", "grad_norm")
    return {**{k: value for k in keys}, "trained_samples": 0.0}


def no_samples_metrics(beta: float) -> dict[str, float]:
    """A step whose collector returned nothing to train on."""
    m0 = {"zero_var_share": 1.0, "adv_std": 0.0, "beta": beta}
    nan = {k: math.nan for k in ("reward_mean", "reward_std", "pass_rate")}
    zero = {k: 0.0 for k in ("completion_len", "truncated_share", "verifier_errors")}
    return {**m0, **nan, **zero, **empty_update_metrics()}
