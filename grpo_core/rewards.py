"""Reward composition for the trainer: clipping, a scheduled repetition penalty, and several
components normalised separately before they are weighted.

Seed article 002 §3.2 (practical reward shaping):

- clip rewards to a sane range (it uses [−5, 5]) so one outlier cannot squash a whole group's
  advantages through the standard deviation;
- with several reward sources, normalise each one first and then take the weighted sum, so that
  a component on a large scale does not drown one on a small scale;
- "outputs repeat" is a known failure mode, treated with a repetition penalty.

`combine` implements the second point: with one active component the clipped reward passes
through unchanged (so plain 0/1 correctness gives textbook GRPO); with more, each component is
z-scored within its group (a constant component contributes 0 there) and the weighted z-scores
are summed. The repetition penalty is a component that is off before `start_step`: early in
training the policy has not yet learned the task, and penalising its babble only adds noise.

Test: `.venv/bin/pytest tests/grpo_core/test_rewards.py -q`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from grpo_core.advantages import ZERO_VAR_TOL, is_uninformative, segment_stats


def repetition_penalty(token_ids: Sequence[Sequence[int]], ngram: int = 3) -> Tensor:
    """−(share of repeated n-grams) per completion, in [−1, 0]; 0 when shorter than n. (N,)"""
    out = torch.zeros(len(token_ids), dtype=torch.float64)  # (N,)
    for i, ids in enumerate(token_ids):  # completions are short; this is not a hot path
        total = len(ids) - ngram + 1
        if total <= 1:
            continue
        grams = {tuple(ids[j : j + ngram]) for j in range(total)}
        out[i] = -(1.0 - len(grams) / total)
    return out


@dataclass(frozen=True)
class Component:
    """One reward source: its weight, and the first step at which it counts."""

    name: str
    weight: float = 1.0
    start_step: int = 0

    def active(self, step: int) -> bool:
        return self.weight != 0.0 and step >= self.start_step


def group_zscore(x: Tensor, group: Tensor, eps: float = 1e-6, tol: float = ZERO_VAR_TOL) -> Tensor:
    """Within-group z-score; an uninformative (near-constant) group gives exact zeros. (N,)"""
    stats = segment_stats(x.double(), group, 0)
    z = (x.double() - stats.mean) / (stats.std + eps)  # (N,)
    flat = is_uninformative(stats.high, stats.low, tol)  # (N,) the one rule
    return torch.where(flat, torch.zeros_like(z), z)  # (N,)


def combine(
    values: Mapping[str, Tensor],
    components: Sequence[Component],
    group: Tensor,
    step: int,
    clip: float,
) -> Tensor:
    """The scalar reward per sample (N,) float64 from named component values (N,) each.

    Components not active at `step` are ignored; each active one is clipped to ±clip; one
    active component passes through (weighted); several are z-scored per group, then weighted.
    """
    active = [c for c in components if c.active(step)]
    if not active:
        raise ValueError(f"no reward component is active at step {step}")
    clipped = {c.name: values[c.name].double().clamp(-clip, clip) for c in active}
    if len(active) == 1:
        return active[0].weight * clipped[active[0].name]
    total = torch.zeros_like(clipped[active[0].name])  # (N,)
    for c in active:
        total = total + c.weight * group_zscore(clipped[c.name], group)
    return total
