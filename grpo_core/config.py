"""`GRPOConfig`: every knob of the GRPO trainer, one documented line each, checked on creation.

Each field says what it trades off and where its default comes from. Seed articles are in
`../shared/seeds/` (000: advantages, length bias, length penalty; 002: engineering defaults such
as lr, KL β). Modes are `Literal` types, so a typo is a type error for mypy and a `ValueError`
at run time. Cross-field checks live in `__post_init__` and say how to fix the input.

There is no group size or prompts-per-step knob: each step's prompts are the batch source's
items, and each item carries its own G (`Item.group_size`, from the curriculum).

KL options and their gradients (Tang & Munos 2025, "On a few pitfalls in KL divergence gradient
estimation for RL"; derivations in `grpo_core.kl`, checked by enumeration in test_kl.py). As a
loss term β·k(logp, ref_logp), differentiated through logp at tokens sampled on-policy:

- `kl_estimator="k3"` (default; DeepSeekMath GRPO, TRL): value unbiased for KL(π ‖ π_ref), but
  its expected gradient is ∇KL(π_ref ‖ π), the reverse KL;
- `kl_estimator="k2"`: ½(logπ − logπ_ref)²; expected gradient ∇KL(π ‖ π_ref);
- `kl_estimator="k1"`: logπ − logπ_ref; expected gradient 0, so it measures KL but pulls
  nothing toward the reference;
- `kl_in_reward=True` (PPO-RLHF style): the loss has no KL term; instead each judged completion's
  reward becomes reward − β·Σ_t(logπ_old − logπ_ref), detached, before the group baseline, so
  the policy gradient carries E[∇logπ · (−β·k1)] = −β·∇KL(π ‖ π_ref). `kl_estimator` then only
  picks the logged `kl` metric (which `beta_schedule="adaptive"` steers on). With β = 0 it is a
  no-op (no extra forward pass). With `estimator="grpo"` the per-group std also scales the KL
  differences: a group whose task rewards all agree is no longer uninformative, and its KL
  spread is normalised to unit advantages; `rloo`/`dr_grpo` keep the penalty at scale β.

Departure from seed 002: its lr 2e-6 is for 7B models; the built-in tiny char-level model needs
roughly 1e-4..1e-3, so the default is 1e-4.

Test: `.venv/bin/pytest tests/grpo_core/test_config.py -q`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from grpo_core.advantages import ESTIMATORS, ZERO_VAR_TOL, AdvantageName, EstimatorName
from grpo_core.kl import AdaptiveBeta, BetaSchedule, FixedBeta, KLEstimatorName, WarmupBeta
from grpo_core.loss import AGGREGATIONS, AggregationName

BetaScheduleName = Literal["fixed", "warmup", "adaptive"]
ReferenceName = Literal["frozen", "none", "lora_base"]
AutocastName = Literal["off", "bf16"]
SaveDtypeName = Literal["auto", "float32", "bfloat16"]


@dataclass(frozen=True)
class GRPOConfig:
    # optimisation
    lr: float = 1e-4  # seed 002: 2e-6 for 7B; our tiny model needs ~1e-4..1e-3
    max_grad_norm: float = 1.0  # grad clipping; a common RLHF default (TRL, verl)
    total_steps: int = 200  # optimiser steps per training run (one night)
    seed: int = 0  # torch seed; resume reproduces the uninterrupted run
    # sampling (G and the step's prompts come from the batch source's items)
    max_new_tokens: int = 64  # completion budget; longer ones are truncated
    # sampling temperature; log-probs (policy, old, reference) are of logits / T, the
    # distribution sampled from (as TRL); < 1 makes more groups uninformative
    temperature: float = 1.0
    # advantages (grpo_core.advantages)
    estimator: EstimatorName = "grpo"  # grpo mean/std; rloo; dr_grpo (no std, Liu et al. 2025)
    std_ddof: int = 0  # 0 population std (default), 1 Bessel; minimal GRPO repos differ here
    adv_eps: float = 1e-6  # added to the std; bounds advantages when the spread is tiny
    zero_var_tol: float = ZERO_VAR_TOL  # max − min ≤ tol → uninformative group (one definition)
    length_penalty_coef: float = 0.0  # adv −= c · z(len) after normalisation; seed 000: 0.05–0.2
    # "outcome+steps" adds a group-relative advantage per checkable fragment (Scores.steps) to
    # its tokens (issue 20: process advantages); denser signal, relies on the step verifier
    advantage: AdvantageName = "outcome"
    step_weight: float = 0.5  # "outcome+steps": token adv = outcome + step_weight · fragment adv
    # loss (grpo_core.loss)
    clip_eps_low: float = 0.2  # PPO/GRPO clip 0.2 (seed 002)
    clip_eps_high: float = 0.2  # DAPO clip-higher uses 0.28 to keep exploration (entropy) up
    num_iterations: int = 1  # updates per batch (μ in GRPO); > 1 reuses old log-probs
    aggregation: AggregationName = "token_mean"  # token_mean (DAPO) / seq_mean (GRPO) / dr_grpo
    # dr_grpo's constant denominator per sequence (Liu et al. 2025); 0 = max_new_tokens
    loss_norm_tokens: int = 0
    mask_truncated: bool = False  # leave truncated completions out of the loss (DAPO overlong)
    # KL to the reference (grpo_core.kl)
    reference: ReferenceName = "frozen"  # frozen copy; none (needs β = 0); base weights under LoRA
    # per-token KL loss term: k3 (DeepSeekMath/TRL; gradient of KL(π_ref‖π)), k2 (gradient of
    # KL(π‖π_ref)), k1 (gradient 0: measures only); see the module docstring (Tang & Munos 2025)
    kl_estimator: KLEstimatorName = "k3"
    # fold β·Σ(logπ_old − logπ_ref), detached, into each reward before the baseline (PPO-RLHF)
    # instead of a KL loss term; costs one more no-grad forward over the judged samples
    kl_in_reward: bool = False
    beta_schedule: BetaScheduleName = "warmup"  # seed 002: start tighter, relax as reward rises
    beta: float = 0.02  # β after warm-up / fixed β (seed 002: 0.02)
    beta_start: float = 0.05  # warm-up start β (seed 002: 0.05), tighter than `beta`
    beta_warmup_steps: int = 50  # linear ramp beta_start → beta over these steps
    kl_target: float = 0.05  # adaptive: per-token KL the controller steers toward
    kl_horizon: int = 100  # adaptive: steps for a full clipped error to move β by ~20 %
    # rewards (grpo_core.rewards)
    reward_clip: float = 5.0  # each component clipped to ±this; seed 002 §3.2 clips to [−5, 5]
    repetition_coef: float = 0.0  # weight of the n-gram repetition penalty; 0 switches it off
    repetition_ngram: int = 3  # n of the repeated n-grams counted by the penalty
    repetition_start_step: int = 0  # the penalty is off before this step (scheduled component)
    # optimiser details, checkpoints, reproducibility
    lr_warmup_steps: int = 0  # linear lr warm-up from 0; constant afterwards
    weight_decay: float = 0.0  # AdamW decay; 0 as in TRL's GRPO default
    micro_batch_size: int = 0  # sequences per forward/backward; 0 = the whole batch at once
    # padded prompt + completion tokens per forward/backward (bounds activation memory on long
    # completions); 0 = no token limit. Combined with micro_batch_size: both bounds hold
    micro_batch_tokens: int = 0
    # "bf16": forward passes under torch.autocast(bfloat16), master weights and Adam stay fp32
    # (faster where the device has bf16 matmuls; log-softmax stays fp32); "off": plain dtype
    autocast: AutocastName = "off"
    # truncated importance sampling cap for engine/trainer log-prob mismatch (Yao et al. 2025;
    # TRL vllm_importance_sampling_cap); used only when the sampler reports log-probs; 0 = off
    tis_cap: float = 2.0
    # run each distinct prompt once per micro-batch and its completions on its KV cache (same
    # loss, less compute: G rows share one prompt); False runs every row in full
    share_prefix: bool = True
    checkpoint_every: int = 50  # seed 002 saves every 50 steps; 0 = only at the end
    keep_checkpoints: int = 3  # keep the newest K checkpoints, delete older ones
    # dtype of checkpoint weights: auto = the parameters' dtype; bfloat16 halves fp32 folders
    # (the newest checkpoint then also keeps fp32 master weights for exact resume)
    save_dtype: SaveDtypeName = "auto"
    deterministic: bool = True  # torch deterministic algorithms: bitwise resume on CPU
    lora_rank: int = 8  # reference="lora_base": rank of the LoRA adapters trained
    lora_alpha: int = 16  # reference="lora_base": LoRA scale numerator

    def __post_init__(self) -> None:
        self._check_modes()
        self._check_ranges()
        self._check_beta()

    def _check_modes(self) -> None:
        allowed = {
            "estimator": tuple(ESTIMATORS),
            "advantage": get_args(AdvantageName),
            "aggregation": tuple(AGGREGATIONS),
            "reference": get_args(ReferenceName),
            "kl_estimator": get_args(KLEstimatorName),
            "beta_schedule": get_args(BetaScheduleName),
            "autocast": get_args(AutocastName),
            "save_dtype": get_args(SaveDtypeName),
        }
        for name, options in allowed.items():
            if getattr(self, name) not in options:
                raise ValueError(f"{name}={getattr(self, name)!r}; use one of {list(options)}")

    def _check_ranges(self) -> None:
        for name in ("lr", "max_grad_norm", "temperature", "max_new_tokens"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.std_ddof not in (0, 1):
            raise ValueError(f"std_ddof={self.std_ddof}; use 0 (population) or 1 (Bessel)")
        if self.num_iterations < 1:
            raise ValueError(f"num_iterations={self.num_iterations}; set it to 1 or more")
        if not 0 < self.clip_eps_low < 1:
            raise ValueError(
                f"clip_eps_low={self.clip_eps_low}; choose a value in (0, 1), e.g. 0.2"
            )
        if self.clip_eps_high < self.clip_eps_low:
            raise ValueError(
                f"clip_eps_high={self.clip_eps_high} < clip_eps_low={self.clip_eps_low}; "
                "set clip_eps_high ≥ clip_eps_low (clip-higher widens the upper side only)"
            )
        if not 0 <= self.step_weight < float("inf"):
            raise ValueError(f"step_weight={self.step_weight}; use a finite value ≥ 0, e.g. 0.5")
        if self.length_penalty_coef < 0 or self.adv_eps < 0 or self.zero_var_tol < 0:
            raise ValueError("length_penalty_coef, adv_eps and zero_var_tol must be ≥ 0")
        if not self.reward_clip > 0:
            raise ValueError(f"reward_clip={self.reward_clip}; use a positive bound, e.g. 5")
        if self.repetition_coef < 0 or self.repetition_ngram < 1:
            raise ValueError("repetition_coef must be ≥ 0 and repetition_ngram ≥ 1")
        counts = (
            "repetition_start_step",
            "lr_warmup_steps",
            "micro_batch_size",
            "micro_batch_tokens",
            "checkpoint_every",
            "total_steps",
            "loss_norm_tokens",
        )
        for name in counts:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be ≥ 0, got {getattr(self, name)}")
        if self.loss_norm_tokens and self.aggregation != "dr_grpo":
            raise ValueError(
                f"loss_norm_tokens={self.loss_norm_tokens} only applies to aggregation='dr_grpo'; "
                "set it to 0 or choose dr_grpo"
            )
        if self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints={self.keep_checkpoints}; keep at least 1")
        if self.tis_cap < 0:
            raise ValueError(f"tis_cap={self.tis_cap}; use a cap ≥ 1 (e.g. 2), or 0 to turn it off")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay}; use a value ≥ 0")
        if self.reference == "lora_base" and (self.lora_rank < 1 or self.lora_alpha <= 0):
            raise ValueError("lora_base needs lora_rank ≥ 1 and lora_alpha > 0")

    def _check_beta(self) -> None:
        if self.beta < 0 or self.beta_start < 0:
            raise ValueError(f"beta={self.beta}, beta_start={self.beta_start}; both must be ≥ 0")
        if self.reference == "none" and (self.beta > 0 or self.beta_schedule != "fixed"):
            raise ValueError(
                'reference="none" has no KL term: set beta=0 and beta_schedule="fixed", '
                'or pick reference="frozen"'
            )
        if self.beta_schedule == "warmup":
            if self.beta_warmup_steps < 1:
                raise ValueError("beta_warmup_steps must be ≥ 1; or use beta_schedule='fixed'")
            if self.beta_start < self.beta:
                raise ValueError(
                    f"beta_start={self.beta_start} < beta={self.beta}: warm-up goes tight → loose; "
                    "set beta_start ≥ beta"
                )
        if self.beta_schedule == "adaptive" and (self.kl_target <= 0 or self.kl_horizon < 1):
            raise ValueError("adaptive β needs kl_target > 0 and kl_horizon ≥ 1")
        if self.beta_schedule == "adaptive" and self.beta <= 0:
            raise ValueError("adaptive β multiplies β, so it needs beta > 0 as its initial value")

    @property
    def dr_grpo_tokens(self) -> int:
        """The `dr_grpo` denominator per sequence: loss_norm_tokens, else max_new_tokens."""
        return self.loss_norm_tokens or self.max_new_tokens

    def make_beta_schedule(self) -> BetaSchedule:
        """The β schedule these fields describe (a fresh object; AdaptiveBeta keeps state)."""
        if self.beta_schedule == "warmup":
            return WarmupBeta(self.beta_start, self.beta, self.beta_warmup_steps)
        if self.beta_schedule == "adaptive":
            return AdaptiveBeta(self.kl_target, self.kl_horizon, self.beta)
        return FixedBeta(self.beta)
