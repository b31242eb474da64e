"""Group advantages for GRPO, and the one definition of an uninformative group.

A group is uninformative when max(r) − min(r) ≤ tol · max(1, |max(r)|, |min(r)|) (`ZERO_VAR_TOL`
= 1e-4), on the rewards: a spread at rounding level relative to the rewards' scale. The
tolerance was once an absolute 1e-6, and under std normalisation a spread of 1e-5 became
advantages of ±1.4. 0/1 rewards, and any spread ≥ 1e-3 of rewards within ±10 (the trainer clips
to ±5), are classified as before, so their advantages are bit for bit those of the old rule
(tested). This is the
ONE definition: the trainer applies it here and again on the task (verifier) reward, whatever
penalties its combined reward carries (`grpo_core.step_advantages.step_advantages`,
`group_informative`), the screen and the curriculum (`pipeline.selection`,
via `stats.reward_informative`) call `is_uninformative` on the group's reward spread, and the
ledger's macros `sieve_zero_var_tol()` / `sieve_uninformative(max, min)`, which `group_stats`,
`prompt_stats` and the history prior use, are rendered from it (migration 0009,
`pipeline.selection.sql_macros`); correctness only labels the uninformative groups. It is never
`advantage == 0` or `std == 0`: after the mean rounds, a constant group's spread comes out near
1e-9 rather than 0, so an exact-zero test misclassifies it. `is_uninformative` is duck-typed: it
works on floats, numpy arrays, Polars expressions, torch tensors and SQL text (`Sql`) alike.

Estimators, registered by name in `ESTIMATORS` (one flat batch, groups of any size, `group` holds
each sample's group id; vectorised with index_add/scatter_reduce, no loop over groups):

- `grpo`:    (r − mean_g) / (std_g + eps)                          (DeepSeekMath GRPO)
- `rloo`:    r − mean of the *other* samples of the group, no std  (RLOO, Ahmadian et al. 2024)
- `dr_grpo`: r − mean_g, no std                                     (Dr. GRPO, Liu et al. 2025)
- `batch`:   (r − mean_g) / (std over the judged batch + eps)       (group mean, batch std)

The std convention is explicit: `ddof=0` (population, the default) or `ddof=1` (Bessel); papers
and minimal repos differ here. Statistics are computed in float64 and cast back. Uninformative
groups get advantage exactly 0.0 and `informative=False`, so the loss leaves them out of its
denominator. `length_penalty` runs *after* normalisation (seed article 000): adv −= c · z(len).

Process (per-fragment) advantages, `fragment_advantages` (`GRPOConfig.advantage =
"outcome+steps"`): within a group, the samples that have a checkable fragment j are compared at
that index, (c − mean_gj) / (std_gj + eps) of their 0/1 correctness with the same `ddof`/`eps`;
a (group, j) cell with max − min ≤ tol (fewer than 2 fragments, or all agree) gives 0. The
trainer adds `step_weight` × this to the outcome advantage of the fragment's tokens
(`grpo_core.step_advantages.step_token_advantages`). It always normalises by the std (GRPO-style),
whichever outcome estimator is chosen.

Departures: `batch` takes its std over every *judged* reward of the batch (`judged`, default all),
uninformative groups included (the batch's reward spread); the 0 placeholders that
`grpo_core.step_advantages` gives unjudged samples (verifier errors) are left out of it. A size-1
group is always uninformative (its spread is 0).

Test: `.venv/bin/pytest tests/grpo_core -q`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from grpo_core.config import ZERO_VAR_TOL, EstimatorName


def is_uninformative(reward_max: Any, reward_min: Any, tol: Any = ZERO_VAR_TOL) -> Any:
    """True where a group's reward spread max − min is at most tol · max(1, |max|, |min|)
    (element-wise): absolute for rewards within ±1, relative to their scale beyond.

    Takes floats (→ bool), numpy arrays / torch tensors (→ bool array), Polars
    expressions/Series (→ Boolean; null where the group has no reward, as in SQL) or `Sql`.
    Written as three comparisons joined by "or" (the max of three needs no function that
    every one of those types has).
    """
    spread = reward_max - reward_min
    return (spread <= tol) | (spread <= tol * abs(reward_max)) | (spread <= tol * abs(reward_min))


@dataclass(frozen=True)
class GroupStats:
    """Per-sample view of per-group statistics (every tensor is (N,), float64)."""

    count: Tensor  # size of the sample's group
    mean: Tensor
    std: Tensor  # with the caller's ddof; 0 where count ≤ ddof
    high: Tensor  # max of the group
    low: Tensor  # min of the group

    @property
    def spread(self) -> Tensor:
        """max − min of the group."""
        return self.high - self.low


def _segment_stats(x: Tensor, group: Tensor, ddof: int) -> GroupStats:
    """Group statistics of `x` (N,) float64, broadcast back to samples; ids need not be dense."""
    _, idx = torch.unique(group, return_inverse=True)  # (N,) dense ids 0..K-1
    k = int(idx.max()) + 1 if idx.numel() else 0
    zeros = x.new_zeros(k)  # (K,)
    count = zeros.index_add(0, idx, torch.ones_like(x))  # (K,)
    mean = zeros.index_add(0, idx, x) / count  # (K,)
    sq = zeros.index_add(0, idx, (x - mean[idx]) ** 2)  # (K,)
    var = sq / (count - ddof).clamp(min=1)  # (K,)
    var = torch.where(count > ddof, var, zeros)  # (K,)
    gmax = zeros.scatter_reduce(0, idx, x, reduce="amax", include_self=False)  # (K,)
    gmin = zeros.scatter_reduce(0, idx, x, reduce="amin", include_self=False)  # (K,)
    return GroupStats(count[idx], mean[idx], var.sqrt()[idx], gmax[idx], gmin[idx])


segment_stats = _segment_stats  # public name for other grpo_core modules


def group_informative(x: Tensor, group: Tensor, tol: float = ZERO_VAR_TOL) -> Tensor:
    """(N,) bool: whether each sample's group of `x` (N,) is informative by the one rule."""
    stats = _segment_stats(x.double(), group, 0)
    return ~is_uninformative(stats.high, stats.low, tol)  # (N,)


def _grpo(r: Tensor, s: GroupStats, ddof: int, eps: float, judged: Tensor) -> Tensor:
    return (r - s.mean) / (s.std + eps)  # (N,)


def _rloo(r: Tensor, s: GroupStats, ddof: int, eps: float, judged: Tensor) -> Tensor:
    # r − (sum − r)/(n − 1) == n/(n − 1) · (r − mean); n = 1 is uninformative and masked later
    n = s.count
    return n / (n - 1).clamp(min=1) * (r - s.mean)  # (N,)


def _dr_grpo(r: Tensor, s: GroupStats, ddof: int, eps: float, judged: Tensor) -> Tensor:
    return r - s.mean  # (N,)


def _batch(r: Tensor, s: GroupStats, ddof: int, eps: float, judged: Tensor) -> Tensor:
    rj = r[judged]  # (J,) the verifier's rewards, not the placeholders of its errors
    batch_std = rj.std(correction=ddof) if rj.numel() > ddof else r.new_zeros(())  # ()
    return (r - s.mean) / (batch_std + eps)  # (N,)


Estimator = Callable[[Tensor, GroupStats, int, float, Tensor], Tensor]  # judged: (N,) bool
ESTIMATORS: dict[str, Estimator] = {
    "grpo": _grpo,
    "rloo": _rloo,
    "dr_grpo": _dr_grpo,
    "batch": _batch,
}


def advantages(
    rewards: Tensor,
    group: Tensor,
    estimator: EstimatorName = "grpo",
    ddof: int = 0,
    eps: float = 1e-6,
    tol: float = ZERO_VAR_TOL,
    judged: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Advantages (N,) and an `informative` mask (N,) bool for a flat batch of groups.

    `rewards` (N,) float; `group` (N,) long group id of each sample (any ids, any group sizes).
    Uninformative groups (`is_uninformative`) get exactly 0 and informative=False. `judged` (N,)
    bool (default all) marks real rewards; only `batch`'s std uses it (placeholders left out).
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {sorted(ESTIMATORS)}")
    if rewards.shape != group.shape or rewards.dim() != 1:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and group {tuple(group.shape)} must be (N,)"
        )
    r = rewards.double()  # (N,)
    stats = _segment_stats(r, group, ddof)
    informative = ~is_uninformative(stats.high, stats.low, tol)  # (N,) bool
    if judged is not None and judged.shape != rewards.shape:
        raise ValueError(f"judged {tuple(judged.shape)} must match rewards {tuple(rewards.shape)}")
    judged = torch.ones_like(group, dtype=torch.bool) if judged is None else judged.bool()
    adv = ESTIMATORS[estimator](r, stats, ddof, eps, judged)  # (N,)
    adv = torch.where(informative, adv, torch.zeros_like(adv))  # (N,) exact zeros
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.get_default_dtype()
    return adv.to(out_dtype), informative


def length_penalty(
    adv: Tensor,
    lengths: Tensor,
    group: Tensor,
    coef: float,
    informative: Tensor,
    ddof: int = 0,
    eps: float = 1e-6,
) -> Tensor:
    """adv − coef · (within-group z-score of length), on informative groups only. (N,)

    Applied after normalisation, so longer-than-its-group completions lose a little advantage
    and shorter ones gain it (seed article 000; coef 0.05–0.2). Uninformative groups stay 0.
    """
    if coef == 0.0:
        return adv
    x = lengths.double()  # (N,)
    stats = _segment_stats(x, group, ddof)
    z = (x - stats.mean) / (stats.std + eps)  # (N,)
    penalised = adv.double() - coef * z  # (N,)
    return torch.where(informative, penalised, adv.double()).to(adv.dtype)  # (N,)


def fragment_advantages(
    correct: Tensor,
    group: Tensor,
    index: Tensor,
    ddof: int = 0,
    eps: float = 1e-6,
    tol: float = ZERO_VAR_TOL,
) -> tuple[Tensor, Tensor]:
    """Per-fragment advantages (M,) float64 and `informative` (M,) bool, one flat batch.

    Fragment m is fragment number `index[m]` (0-based, text order) of a sample in group
    `group[m]`, judged `correct[m]` (bool or 0/1). Fragments with the same (group, index) form
    a cell, normalised GRPO-style; a cell whose spread is ≤ tol (incl. a single fragment) gets
    exactly 0 and informative=False.
    """
    if not correct.shape == group.shape == index.shape or correct.dim() != 1:
        raise ValueError("correct, group and index must all be (M,)")
    if correct.numel() == 0:
        return correct.new_zeros(0, dtype=torch.float64), correct.new_zeros(0, dtype=torch.bool)
    c = correct.double()  # (M,)
    cell = group.long() * (int(index.max()) + 1) + index.long()  # (M,) one id per (group, j)
    stats = _segment_stats(c, cell, ddof)
    informative = ~is_uninformative(stats.high, stats.low, tol)  # (M,) bool
    adv = (c - stats.mean) / (stats.std + eps)  # (M,)
    return torch.where(informative, adv, torch.zeros_like(adv)), informative
