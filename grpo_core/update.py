"""One optimiser update of a GRPO step from explicit inputs, no trainer: what every iteration of
the step shares (`StepInputs`: micro-batches, the log-probs fixed over the iterations, truncated
IS weights; `fixed_inputs` takes them), each micro-batch's share of the loss denominator
(`denominators`, `share`), a micro-batch's loss (`part_loss`), the gradient accumulated over the
micro-batches (`backward`), the clipped optimiser step (`clip_and_step`), and the metrics a step
reports beyond the update's own (`step_metrics`). `grpo_core.trainer` calls them; they read
nothing else of it.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py tests/grpo_core/test_batch.py
tests/grpo_core/test_offpolicy.py -q`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from grpo_core import fsdp
from grpo_core.batch import Batch
from grpo_core.config import GRPOConfig
from grpo_core.logp_policy import Policy
from grpo_core.loss import grpo_loss, truncated_is_weights
from grpo_core.types import Collected, Counters, TrainerError

TIS_KEYS = ("logprob_mismatch", "is_weight_mean", "is_clipped_frac")


def valid(b: Batch, mask_truncated: bool) -> Tensor:
    """Completion tokens that enter the loss. (B, Tc)"""
    keep = ~b.truncated if mask_truncated else torch.ones_like(b.truncated)
    return b.comp_mask & keep[:, None]  # (B, Tc)


def denominators(b: Batch, mask_truncated: bool) -> tuple[float, float]:
    """The whole batch's valid tokens and valid sequences (the aggregations' denominators)."""
    v = valid(b, mask_truncated)
    return float(v.sum()), float(v.any(dim=1).sum())


def share(
    part: Batch, totals: tuple[float, float], aggregation: str, mask_truncated: bool
) -> float:
    """This micro-batch's share of the aggregation's denominator (1 with one micro-batch)."""
    v = valid(part, mask_truncated)
    if aggregation == "token_mean":
        return float(v.sum()) / max(totals[0], 1.0)
    return float(v.any(dim=1).sum()) / max(totals[1], 1.0)


class StepInputs:
    """What every iteration of one step shares: micro-batches, fixed log-probs, IS weights."""

    def __init__(
        self,
        parts: list[Batch],
        totals: tuple[float, float],
        old: list[Tensor] | None,
        ref: list[Tensor] | None,
        beta: float,
        max_tokens: int,
        real: int | None = None,
    ):
        self.parts, self.totals, self.old, self.ref = parts, totals, old, ref
        self.beta, self.max_tokens = beta, max_tokens
        self.real = len(parts) if real is None else real  # parts after it: fsdp's zero-weight pads
        self.weights: dict[int, Tensor] = {}  # micro-batch -> (B, Tc) truncated IS weights
        self.tis: list[tuple[float, dict[str, float]]] = []  # (engine tokens, metrics) per part

    def is_weights(self, j: int, part: Batch, old: Tensor, cap: float) -> Tensor | None:
        """Part j's truncated behaviour weights w = min(π_prox / μ, cap) (B, Tc), the
        `token_weight` of the decoupled objective (`grpo_core.loss`): π_prox is `old`, the
        trainer's log-probs at the step's start (taken once, at the first iteration); μ is a
        replayed row's own `logprobs` when it carries them (taken at the weights that sampled
        it, `grpo_core.history.with_behaviour_logprobs`), else the step's reference log-probs,
        and a fresh row's engine log-probs where the sampler reported them; 1 elsewhere. None:
        no row has a behaviour policy of its own (the plain on-policy path).

        Refused (TrainerError): replayed rows with `cap` = 0 (that turns the weights off, and a
        replayed row would push as if sampled at the step's start), and a replayed row with
        neither its own log-probs nor a reference to read μ from."""
        self._check_replayed(part, cap)
        engine_lp, has_engine = part.engine_lp, part.has_engine
        if part.replayed is not None and self.ref is not None:
            ref, rep = self.ref[j], part.replayed  # (B, Tc), (B,)
            if has_engine is not None:
                rep = rep & ~has_engine  # a replayed row with its own log-probs keeps them
            base = engine_lp if engine_lp is not None else torch.zeros_like(ref)
            engine_lp = torch.where(rep[:, None], ref, base)  # (B, Tc)
            has_engine = rep if has_engine is None else has_engine | rep
        if engine_lp is None or has_engine is None:
            return None
        if j not in self.weights:
            known = part.comp_mask & has_engine[:, None]  # (B, Tc)
            self.weights[j], metrics = truncated_is_weights(old, engine_lp, known, cap)
            self.tis.append((float(known.sum()), metrics))
        return self.weights[j]

    def kl_weights(self, j: int, part: Batch, old: Tensor, cap: float) -> Tensor | None:
        """Part j's KL-term weights (B, Tc): a replayed row's truncated behaviour weights (its
        KL term is importance-weighted like its policy-gradient term), 1 on every other row;
        None when the part has no replayed row (fresh rows' KL terms stay unweighted)."""
        if part.replayed is None or not bool(part.replayed.any()):
            return None
        w = self.is_weights(j, part, old, cap)
        assert w is not None  # a replayed row always has a behaviour policy (or is refused)
        return torch.where(part.replayed[:, None], w, torch.ones_like(w))  # (B, Tc)

    def _check_replayed(self, part: Batch, cap: float) -> None:
        if part.replayed is None or not bool(part.replayed.any()):
            return
        if cap <= 0:
            raise TrainerError(
                "replayed samples need tis_cap > 0: their behaviour weights min(π_prox / μ, "
                "tis_cap) are what corrects them for being sampled by another policy "
                "(tis_cap = 0 turns them off); set tis_cap (default 2.0) or turn replay off"
            )
        own = part.has_engine if part.has_engine is not None else torch.zeros_like(part.replayed)
        if self.ref is None and bool((part.replayed & ~own).any()):
            raise TrainerError(
                "a replayed sample without behaviour log-probs (Sample.logprobs) needs the "
                "reference's, the weights that sampled it: set reference to frozen or "
                "lora_base, or give each replayed sample its log-probs"
            )

    def tis_metrics(self) -> dict[str, float]:
        """Engine/trainer mismatch metrics, token-weighted over micro-batches; {} without."""
        total = sum(n for n, _ in self.tis)
        if not self.tis:
            return {}
        return {k: sum(n * mm[k] for n, mm in self.tis) / max(total, 1.0) for k in TIS_KEYS}


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


def fixed_inputs(
    cfg: GRPOConfig, policy: Policy, batch: Batch, parts: list[Batch], real: int, beta: float
) -> StepInputs:
    """The step's inputs fixed over its iterations: the micro-batches `parts` of `batch` (the
    first `real` weigh), the old log-probs (`num_iterations` > 1), the reference's, the whole
    batch's denominators and the KL weight `beta`."""
    with torch.no_grad():
        old = [policy.logp(p)[0] for p in parts] if cfg.num_iterations > 1 else None
        ref = [policy.ref_logp(p) for p in parts] if cfg.reference != "none" else None
    totals = denominators(batch, cfg.mask_truncated)
    return StepInputs(parts, totals, old, ref, beta, cfg.dr_grpo_tokens, real)


def backward(
    cfg: GRPOConfig,
    ctx: StepInputs,
    optimizer: torch.optim.Optimizer,
    policy: Policy,
    sharded: bool,
) -> dict[str, float] | str:
    """The whole batch's gradient, accumulated over micro-batches, and the loss metrics; or why
    it was refused ("non-finite loss": `sharded` (fsdp) still runs every part's backward, each
    a collective)."""
    optimizer.zero_grad(set_to_none=True)
    it_metrics: dict[str, float] = {}
    refused = ""
    for j, part in enumerate(ctx.parts):
        logp, entropy = policy.logp(part, entropy=True)
        old = ctx.old[j] if ctx.old is not None else logp.detach()
        loss, lm = part_loss(cfg, ctx, j, part, logp, old, entropy)
        if not math.isfinite(float(loss.detach())):
            refused = "non-finite loss"
            if not sharded:
                return refused
        real = j < ctx.real  # fsdp's padding micro-batches weigh nothing
        weight = share(part, ctx.totals, cfg.aggregation, cfg.mask_truncated)
        (loss * (weight if real else 0.0)).backward()  # under fsdp: a collective
        for k, v in lm.items():
            it_metrics[k] = it_metrics.get(k, 0.0) + (v * weight if real else 0.0)
    return refused or it_metrics


def clip_and_step(
    cfg: GRPOConfig,
    params: Sequence[Tensor],
    optimizer: torch.optim.Optimizer,
    it_metrics: dict[str, float] | str,
) -> dict[str, float] | str:
    """Clip the (summed) gradient to `max_grad_norm` and step: the iteration's metrics with its
    `grad_norm`, or why it was refused (a refusal passed in, or a non-finite norm: no step)."""
    if isinstance(it_metrics, str):
        return it_metrics
    norm = fsdp.local_float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
    if not math.isfinite(norm):
        return "non-finite gradient"
    optimizer.step()
    it_metrics["grad_norm"] = norm
    return it_metrics
