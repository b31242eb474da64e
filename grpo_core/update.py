"""Pieces of a GRPO step that need no trainer, only explicit inputs: a micro-batch's loss from the
config and the step's fixed inputs (`part_loss`), and the metrics a step reports beyond the
update's own (`step_metrics`). `grpo_core.trainer` calls them; they read nothing else of it.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py tests/grpo_core/test_batch.py -q`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from grpo_core.batch import Batch, StepInputs
from grpo_core.config import GRPOConfig
from grpo_core.loss import grpo_loss
from grpo_core.types import Collected, Counters


def part_loss(
    cfg: GRPOConfig,
    ctx: StepInputs,
    j: int,
    part: Batch,
    logp: Tensor,
    old: Tensor,
    entropy: Tensor | None,
) -> tuple[Tensor, dict[str, float]]:
    """Micro-batch j's loss (`grpo_core.loss.grpo_loss`) and its metrics: `logp` (B, T) under
    the current weights, `old` (B, T) at the step's start (the proximal policy of the decoupled
    objective; the sampling weights of a fresh row), `entropy` (B, T) if measured."""
    return grpo_loss(
        logp,
        old,
        part.adv,
        part.comp_mask,
        torch.ones_like(part.adv, dtype=torch.bool),  # every row trains: like adv, (B,) or (B, T)
        eps_low=cfg.clip_eps_low,
        eps_high=cfg.clip_eps_high,
        aggregation=cfg.aggregation,
        max_tokens=ctx.max_tokens,
        ref_logp=ctx.ref[j] if ctx.ref is not None else None,
        beta=ctx.beta,
        kl_estimator=cfg.kl_estimator,
        truncated=part.truncated if cfg.mask_truncated else None,
        entropy=entropy,
        token_weight=ctx.is_weights(j, part, old, cfg.tis_cap),
        kl_weight=ctx.kl_weights(j, part, old, cfg.tis_cap),
    )


def step_metrics(
    m: dict[str, float], c: Collected, counters: Counters, lr: float, time_update: float
) -> dict[str, float]:
    """The update's metrics `m` with the collection's (timings, its own) and the run's counters."""
    return {
        **m,
        "time_sample": c.time_sample,
        "time_score": c.time_score,
        **c.metrics,
        "time_update": time_update,
        "skipped_steps": float(counters.skipped_steps),
        "rollouts": float(c.rollouts),
        "rollouts_total": float(counters.rollouts),
        "lr": lr,
    }
