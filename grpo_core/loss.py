"""The GRPO policy loss: clipped surrogate, KL penalty, aggregation, and step metrics.

Per token, with ratio = exp(logp − old_logp) and the sequence's advantage A (or the token's,
when `adv` is (B, T): per-fragment advantages, `grpo_core.step_advantages.step_token_advantages`):

    loss = −min(ratio · A, clip(ratio, 1 − eps_low, 1 + eps_high) · A) + β · k(logp, ref_logp)

with k the `kl_estimator` (k3 default; k2, k1; their gradients are in `grpo_core.kl`).

Separate `eps_low` / `eps_high` are DAPO's clip-higher (Yu et al. 2025; eps_high = 0.28 there).
With `num_iterations` = 1 old_logp is logp detached and ratio is 1 (the clip is then inactive).

Valid tokens: `mask` (padding off) ∧ the sequence's group is informative ∧ (optionally) the
completion was not truncated. Uninformative groups therefore contribute nothing and are out of
every denominator. Aggregations, registered by name in `AGGREGATIONS`:

- `token_mean`: Σ loss / Σ valid tokens (DAPO's token-level mean);
- `seq_mean`:   mean over valid sequences of each sequence's token mean (original GRPO);
- `dr_grpo`:    Σ loss / (max_tokens · valid sequences), a constant per sequence (Dr. GRPO); the
                trainer passes `GRPOConfig.dr_grpo_tokens` (loss_norm_tokens or max_new_tokens),
                the same every step, not the step's longest completion.

Rows sampled by another policy than the one the step starts from: the decoupled clipped
objective (decoupled PPO, Hilton et al. 2022, "Batch size-invariance for policy optimization";
DOTS' `compute_policy_loss_temp`). With μ the behaviour policy that sampled the row, π_prox the
policy at the step's start (`old_logp`: the trainer's own log-probs there) and π_θ the policy
being updated, each token's term is

    −w · min(r·A, clip(r, 1 − eps_low, 1 + eps_high)·A) + β · w_kl · k(logp, ref_logp),
    r = π_θ / π_prox,   w = min(π_prox / μ, cap) (detached; `token_weight`),

w_kl = w on off-policy rows, 1 on the others (`kl_weight`). Why this one: the expectation over
μ of w·(PPO term) is, up to the truncation, the expectation over π_prox of the PPO term, the
on-policy objective at the step's start; and the clip is a trust region around π_prox, the
policy the step starts from, not around μ. Clipping r_μ = π_θ/μ instead (PPO with μ as "old")
would freeze every token whose π_prox/μ already left [1 − eps_low, 1 + eps_high] (most of a
stale sample) and, where the advantage pulls back toward μ, let it pull unclipped. The
truncation at `cap` bounds the variance a very stale token can add (Yao et al. 2025's truncated
IS), at the cost of a bias where it binds (tokens π_prox favours far more than μ did count
for less than they should). DOTS clips r_μ into [w(1 − ε), w(1 + ε)], which is w·clip(r)
since r_μ = w·r: the same objective, with w not truncated.
With `num_iterations` = 1 the only iteration has r ≡ 1, so the clip cannot bind there: the
update is w·A·∇logπ, w ≤ cap, and the trust region acts from the second iteration on, as it
does for on-policy rows (whose w is 1).

The weights are `truncated_is_weights`, from the trainer's step-start log-probs and the
behaviour log-probs (`grpo_core.update.StepInputs.is_weights`): for a replayed curation sample
(`Sample.replayed`) its own `Sample.logprobs` (taken at the weights that sampled it) or, when
absent, the reference's (it was sampled by the reference weights); for a fresh sample the
sampling engine's log-probs when it reports them (truncated IS for engine/trainer mismatch, Yao
et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training"; TRL's
`vllm_importance_sampling_cap`, verl's TIS). KL term: importance-weighted by the same w on
replayed rows (k's value and gradient are derived for tokens sampled from π, so a replayed
row's KL term is an estimate under μ that w carries back to π_prox, as its policy-gradient term);
not weighted on fresh rows, engine mismatch included, as in TRL (their w is 1 up to numerics,
and the on-policy path stays bitwise as before). `kl_ref` reports the weighted term's mean.

Departure: Dr. GRPO divides by a fixed constant; we count only valid sequences in it, so that
uninformative groups do not dilute the gradient (consistent with the other two aggregations).

Test: `.venv/bin/pytest tests/grpo_core/test_loss.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from grpo_core.config import AggregationName, KLEstimatorName
from grpo_core.kl import KL_ESTIMATORS


def _masked(loss: Tensor, valid: Tensor) -> Tensor:
    return torch.where(valid, loss, torch.zeros_like(loss))  # (B, T); not loss·mask: inf·0 = NaN


def _token_mean(loss: Tensor, valid: Tensor, max_tokens: int) -> Tensor:
    return _masked(loss, valid).sum() / valid.sum().clamp(min=1)  # ()


def _seq_mean(loss: Tensor, valid: Tensor, max_tokens: int) -> Tensor:
    n_tok = valid.sum(dim=1)  # (B,)
    per_seq = _masked(loss, valid).sum(dim=1) / n_tok.clamp(min=1)  # (B,)
    has_tok = (n_tok > 0).to(loss.dtype)  # (B,)
    return (per_seq * has_tok).sum() / has_tok.sum().clamp(min=1)  # ()


def _dr_grpo(loss: Tensor, valid: Tensor, max_tokens: int) -> Tensor:
    n_seq = valid.any(dim=1).sum().clamp(min=1)  # ()
    return _masked(loss, valid).sum() / (max_tokens * n_seq)  # ()


Aggregation = Callable[[Tensor, Tensor, int], Tensor]
AGGREGATIONS: dict[str, Aggregation] = {
    "token_mean": _token_mean,
    "seq_mean": _seq_mean,
    "dr_grpo": _dr_grpo,
}


def valid_tokens(mask: Tensor, informative: Tensor, truncated: Tensor | None = None) -> Tensor:
    """Tokens that enter the loss: real (not padding), informative group, not truncated. (B, T)

    `informative` is (B,) per sequence, or (B, T) per token (then `truncated` still (B,)).
    """
    keep = informative.bool()  # (B,) or (B, T)
    keep = keep[:, None] if keep.dim() == 1 else keep  # (B, 1) or (B, T)
    if truncated is not None:
        keep = keep & ~truncated.bool()[:, None]  # (B, 1) or (B, T)
    return mask.bool() & keep  # (B, T)


def _per_token(adv: Tensor) -> Tensor:
    """A sequence advantage (B,) as (B, 1); a token advantage (B, T) as is."""
    return adv[:, None] if adv.dim() == 1 else adv


def clipped_surrogate(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    eps_low: float,
    eps_high: float,
    valid: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-token −min(ratio·A, clip(ratio)·A) (B, T), and the ratio (B, T).

    Where `valid` is False the log-ratio is set to 0 before exp, so padding holding any value
    (even ±inf) yields no inf/NaN in the forward or backward pass.
    """
    log_ratio = logp - old_logp  # (B, T)
    if valid is not None:
        log_ratio = torch.where(valid, log_ratio, torch.zeros_like(log_ratio))  # (B, T)
    ratio = torch.exp(log_ratio)  # (B, T)
    a = _per_token(adv).to(logp.dtype)  # (B, 1) or (B, T)
    unclipped = ratio * a  # (B, T)
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * a  # (B, T)
    return -torch.minimum(unclipped, clipped), ratio


def _masked_mean(x: Tensor, valid: Tensor) -> float:
    return float(_masked(x.detach(), valid).sum() / valid.sum().clamp(min=1))


def _metrics(
    ratio: Tensor, adv: Tensor, valid: Tensor, eps_low: float, eps_high: float
) -> dict[str, float]:
    a = _per_token(adv)  # (B, 1) or (B, T)
    low = (ratio < 1.0 - eps_low) & (a < 0)  # (B, T): clip binds from below
    high = (ratio > 1.0 + eps_high) & (a > 0)  # (B, T): clip binds from above
    log_r = ratio.detach().log()  # (B, T)
    return {
        "clip_frac_low": _masked_mean(low.float(), valid),
        "clip_frac_high": _masked_mean(high.float(), valid),
        "approx_kl_old": _masked_mean(torch.expm1(-log_r) + log_r, valid),  # k3(new ‖ old)
        "valid_tokens": float(valid.sum()),
    }


def _check(aggregation: str, beta: float, ref_logp: Tensor | None) -> None:
    if aggregation not in AGGREGATIONS:
        raise ValueError(
            f"unknown aggregation {aggregation!r}; choose one of {sorted(AGGREGATIONS)}"
        )
    if beta > 0 and ref_logp is None:
        raise ValueError("beta > 0 needs ref_logp; pass reference log-probs or set beta = 0")


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    mask: Tensor,
    informative: Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    aggregation: AggregationName = "token_mean",
    max_tokens: int | None = None,
    ref_logp: Tensor | None = None,
    beta: float = 0.0,
    kl_estimator: KLEstimatorName = "k3",
    truncated: Tensor | None = None,
    entropy: Tensor | None = None,
    token_weight: Tensor | None = None,
    kl_weight: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Scalar loss and metrics for one micro-batch of B completions of T tokens.

    logp/old_logp/ref_logp (B, T) log-probs of the sampled tokens; adv (B,) per sequence or
    (B, T) per token; mask (B, T) real tokens; informative (B,) from `advantages` (or (B, T));
    truncated (B,) to leave truncated completions
    out (None keeps them); kl_estimator picks the KL term (k3 default); max_tokens is the
    `dr_grpo` constant (default T); entropy (B, T) per-token entropy, only for the metric
    (`grpo_core.logprobs` computes it in the log-prob pass);
    token_weight (B, T) multiplies each token's policy-gradient term (the truncated behaviour
    weights w of the module docstring, treated as constants: the decoupled objective when
    `old_logp` is the step's start); kl_weight (B, T) multiplies each token's KL term (w on
    off-policy rows, 1 elsewhere; constants), None leaves it unweighted.
    """
    _check(aggregation, beta, ref_logp)
    valid = valid_tokens(mask, informative, truncated)  # (B, T)
    per_token, ratio = clipped_surrogate(logp, old_logp, adv, eps_low, eps_high, valid)
    metrics = _metrics(ratio, adv, valid, eps_low, eps_high)
    if token_weight is not None:
        per_token = per_token * token_weight.detach().to(per_token.dtype)  # (B, T)
    metrics["pg_loss"] = _masked_mean(per_token, valid)
    if ref_logp is not None:
        zero = torch.zeros_like(logp)  # (B, T)
        kl = KL_ESTIMATORS[kl_estimator](
            torch.where(valid, logp, zero), torch.where(valid, ref_logp, zero)
        )  # (B, T)
        if kl_weight is not None:  # off-policy rows: importance-weighted, as their pg term
            kl = kl * kl_weight.detach().to(kl.dtype)  # (B, T)
        metrics["kl_ref"] = _masked_mean(kl, valid)
        if beta > 0:
            per_token = per_token + beta * kl  # (B, T)
    if entropy is not None:
        metrics["entropy"] = _masked_mean(entropy, mask.bool())
    loss = AGGREGATIONS[aggregation](per_token, valid, max_tokens or logp.shape[1])  # ()
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def truncated_is_weights(
    trainer_logp: Tensor, engine_logp: Tensor, mask: Tensor, cap: float
) -> tuple[Tensor, dict[str, float]]:
    """Per-token truncated importance weights (B, T) and their metrics.

    trainer_logp/engine_logp (B, T) are the log-probs of the sampled tokens under the trainer's
    sampling-time weights and under the engine that sampled them; mask (B, T) the tokens where
    the engine's log-prob is known. Weight = min(exp(trainer − engine), cap), 1 outside the mask;
    cap = 0 turns the correction off (weights 1) but still measures the mismatch.
    Metrics over the masked tokens: `logprob_mismatch` mean |trainer − engine|, `is_weight_mean`
    mean weight applied (the raw ratio when cap = 0), `is_clipped_frac` share above the cap.
    """
    mask = mask.bool()
    delta = torch.where(mask, trainer_logp.detach() - engine_logp, torch.zeros_like(engine_logp))
    ratio = torch.exp(delta)  # (B, T); 1 outside the mask
    capped = ratio.clamp(max=cap) if cap > 0 else ratio  # (B, T)
    metrics = {
        "logprob_mismatch": _masked_mean(delta.abs(), mask),
        "is_weight_mean": _masked_mean(capped, mask),
        "is_clipped_frac": _masked_mean((ratio > cap).float(), mask) if cap > 0 else 0.0,
    }
    weights = capped if cap > 0 else torch.ones_like(ratio)
    return weights.detach(), metrics
