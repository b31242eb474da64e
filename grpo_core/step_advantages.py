"""From scores to advantages, and the metric rows of one step.

`step_advantages` is the step's path from rewards to per-sample advantages: reward components are
combined (`grpo_core.rewards`), under `kl_in_reward` the β-weighted per-sequence KL is subtracted
(`kl_penalty`, before the group baseline, PPO-RLHF style), a sample whose reward is `None` (the
verifier could not judge it) is put in a group of its own so it carries no advantage and is out of
the loss, then advantages per group (`grpo_core.advantages`) and the length penalty after
normalisation. Whether a group is informative is decided once, on the task reward: a group whose
verifier rewards all agree gets no advantage however the penalties spread its combined reward.
`step_token_advantages` adds the per-fragment (process) advantages of `advantage =
"outcome+steps"`: token advantage = outcome advantage + step_weight · the advantage of the
fragment the token belongs to (`grpo_core.advantages.fragment_advantages`,
`grpo_core.fragments`), and a group with varying fragment correctness is informative even when
its outcomes agree; with `advantage = "outcome"` it returns its inputs unchanged.
The `*_metrics` functions build the rows the trainer reports, so every step (trained, empty or
skipped) carries the same keys.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from grpo_core.advantages import (
    advantages,
    fragment_advantages,
    group_informative,
    length_penalty,
)
from grpo_core.config import GRPOConfig
from grpo_core.fragments import Fragment, token_char_spans, token_fragments
from grpo_core.rewards import Component, combine, repetition_penalty
from grpo_core.types import Sample, Scores, TrainerError


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


def judged_groups(group: Tensor, known: Tensor) -> Tensor:
    """(N,) group ids where an unjudged sample (known False) is put in a group of its own."""
    return torch.where(known, group, group.max() + 1 + torch.arange(len(group)))  # (N,)


def step_advantages(
    cfg: GRPOConfig,
    components: list[Component],
    step: int,
    flat: list[Sample],
    group: Tensor,
    known: Tensor,
    raw: Tensor,
    kl_penalty: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """(N,) advantages and (N,) informative flags; an unjudged sample is its own group.

    A component that is not active at `step` (weight 0, or before its start step) is not
    computed at all.

    `kl_penalty` (N,): β·Σ_t(logπ_old − logπ_ref) per completion (0 where unjudged), taken off
    the combined reward before the baseline; None leaves the reward as it is.

    Informative is decided on the task reward (the verifier's, `raw`), the rule the ledger
    applies to the same rewards: a group whose task rewards all agree gets advantage 0 and stays
    out of the loss even when a repetition penalty or the KL penalty spreads its combined reward
    (under `grpo` the std would scale that spread to unit advantages).
    """
    gid = judged_groups(group, known)  # (N,)
    active = {c.name for c in components if c.active(step)}  # zero weight or not started: skip
    values = {"reward": torch.where(known, raw, torch.zeros_like(raw)).double()}
    if "repetition" in active:
        values["repetition"] = repetition_penalty([s.token_ids for s in flat], cfg.repetition_ngram)
    reward = combine(values, components, gid, step, cfg.reward_clip)  # (N,)
    if kl_penalty is not None:
        reward = reward - torch.where(known, kl_penalty.double(), 0.0)  # (N,)
    adv, informative = advantages(
        reward, gid, cfg.estimator, cfg.std_ddof, cfg.adv_eps, cfg.zero_var_tol, judged=known
    )
    informative = informative & group_informative(values["reward"], gid, cfg.zero_var_tol)  # (N,)
    adv = torch.where(informative, adv, torch.zeros_like(adv))  # (N,) task-flat groups: 0
    lengths = torch.tensor([len(s.token_ids) for s in flat], dtype=torch.float64)  # (N,)
    adv = length_penalty(
        adv, lengths, gid, cfg.length_penalty_coef, informative, cfg.std_ddof, cfg.adv_eps
    )
    return adv, informative


def step_token_advantages(
    cfg: GRPOConfig,
    tokenizer: Any,
    flat: list[Sample],
    group: Tensor,
    known: Tensor,
    steps: list[tuple[Fragment, ...] | None] | None,
    adv: Tensor,
    informative: Tensor,
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """Under "outcome+steps": (N, T) token advantages (T = longest completion), informative
    (N,) widened to groups with a step signal, and the step metrics. Otherwise the inputs, {}.

    `adv`/`informative` are `step_advantages`' outcome ones; an unjudged sample (known False)
    is its own group there and here, so all its tokens keep advantage 0.
    """
    if cfg.advantage == "outcome":
        return adv, informative, {}
    n = len(flat)
    per_sample: list[tuple[Fragment, ...] | None] = list(steps) if steps else [None] * n
    if len(per_sample) != n:
        raise TrainerError(f"Scores.steps has {len(per_sample)} entries for {n} samples")
    gid = judged_groups(group, known)  # (N,)
    owner = torch.tensor([i for i, f in enumerate(per_sample) for _ in f or ()], dtype=torch.long)
    index = torch.tensor([j for f in per_sample for j in range(len(f or ()))], dtype=torch.long)
    correct = torch.tensor([bool(c) for f in per_sample for *_, c in f or ()], dtype=torch.bool)
    frag_adv, frag_inf = fragment_advantages(
        correct, gid[owner], index, cfg.std_ddof, cfg.adv_eps, cfg.zero_var_tol
    )  # (M,), (M,)
    step_tok, covered = _token_steps(tokenizer, flat, per_sample, frag_adv)  # (N, T), (N, T)
    token_adv = (adv.double()[:, None] + cfg.step_weight * step_tok).to(adv.dtype)  # (N, T)
    step_group = torch.zeros(n, dtype=torch.bool).index_fill_(0, owner[frag_inf], True)
    step_group = _any_in_group(step_group, gid)  # (N,) some cell of the sample's group varies
    only_steps = step_group & ~informative & known  # (N,) groups whose only signal is steps
    lengths = torch.tensor([len(s.token_ids) for s in flat])  # (N,)
    metrics = {
        "step_signal_share": len(torch.unique(group[only_steps])) / len(torch.unique(group)),
        "step_adv_std": float(frag_adv[frag_inf].std(correction=0)) if frag_inf.any() else 0.0,
        "step_token_share": float(covered[known].sum()) / max(int(lengths[known].sum()), 1),
    }
    return token_adv, informative | step_group, metrics


def _token_steps(
    tokenizer: Any, flat: list[Sample], steps: list[tuple[Fragment, ...] | None], frag_adv: Tensor
) -> tuple[Tensor, Tensor]:
    """(N, T) float64 fragment advantage of each token (0 outside fragments and past the end),
    and (N, T) bool: the token lies in a fragment. `frag_adv` is flat in sample, text order."""
    width = max([1, *(len(s.token_ids) for s in flat)])
    step_tok = torch.zeros(len(flat), width, dtype=torch.float64)  # (N, T)
    covered = torch.zeros(len(flat), width, dtype=torch.bool)  # (N, T)
    offset = 0
    for i, (s, frags) in enumerate(zip(flat, steps, strict=True)):
        if not frags:
            continue
        which = token_fragments(token_char_spans(tokenizer, s.token_ids, s.text), frags)  # (T_i,)
        inside = which >= 0  # (T_i,)
        vals = frag_adv[offset + which.clamp(min=0)]  # (T_i,)
        step_tok[i, : len(which)] = torch.where(inside, vals, torch.zeros_like(vals))
        covered[i, : len(which)] = inside
        offset += len(frags)
    return step_tok, covered


def _any_in_group(flag: Tensor, gid: Tensor) -> Tensor:
    """(N,) True where any sample of the same group has `flag`."""
    _, idx = torch.unique(gid, return_inverse=True)  # (N,)
    hit = torch.zeros(int(idx.max()) + 1, dtype=torch.bool).index_fill_(0, idx[flag], True)
    return hit[idx]  # (N,)


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
