"""`GRPOConfig`: every knob of the GRPO trainer, one documented line each, checked on creation.

Each field says what it trades off and where its default comes from. "seed 000" and "seed 002" name
the two GRPO engineering write-ups the project started from (000: advantages, length bias, length
penalty; 002: engineering defaults such as lr and KL β); they are not in this repository, and each
default they gave is stated in the field's own comment. Modes are `Literal` types, so a typo is a
type error for mypy and a `ValueError` at run time. Each field's type and range is its annotation
(`Positive`: a finite number > 0, `Count`: an integer ≥ 0, ...), checked by
`grpo_core.validate.check_fields` on creation, the layer every Sieve config goes through: no NaN, no
inf, no bool or float for an int. Cross-field checks live in `__post_init__` and say how to fix the
input.

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
  no-op (no extra forward pass). Fixed, not refused, with every estimator:
  whether a group is informative is decided once, on the task (verifier) reward, as the
  ledger decides it, so a group whose task rewards all agree gets advantage 0 and no gradient
  although the KL penalty (or a repetition penalty) spreads its combined reward — before, under
  `grpo` its std normalised that KL noise to unit advantages (β cancelled). The KL pull thus
  acts through informative groups only; there `grpo`'s std scales the penalty together with
  the task reward (β relative to the group's spread), `rloo`/`dr_grpo` keep it at scale β.

Off-policy rows (replayed curation samples, `Sample.replayed`): their KL
term is importance-weighted by the same truncated behaviour weight w = min(π_prox/μ, tis_cap)
as their policy-gradient term (`grpo_core.loss`), not left out: k's value and gradient above are
derived for tokens sampled from π, and w carries a replayed token's term from its behaviour
policy μ back to π_prox, the policy at the step's start; leaving it out would let replayed rows
drift from the reference unopposed. Fresh rows' KL terms are unweighted (also with engine
log-probs, as TRL). Under `kl_in_reward` the penalty enters the advantage, which w already
weighs in the policy-gradient term.

Departure from seed 002: its lr 2e-6 is for 7B models; the built-in tiny char-level model needs
roughly 1e-4..1e-3, so the default is 1e-4.

Test: `.venv/bin/pytest tests/grpo_core/test_config.py -q`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from annotated_types import Ge, Gt, Le, Lt

from grpo_core.validate import (
    MAX_TEMPERATURE,
    MAX_TOKENS,
    AtLeastOne,
    Count,
    NonNegative,
    Positive,
    Seed,
    Tokens,
    check_fields,
)

# The names the config's fields take, here and not beside their torch code (advantages, kl,
# loss import them from this module, and hold a registry entry for every name: test_config):
# the config, and everything that reads its defaults (the CLI's sampling options), then loads
# without torch. The β schedule a config describes is `grpo_core.kl.make_beta_schedule`.
ZERO_VAR_TOL = 1e-4  # relative (see is_uninformative); the ledger's sieve_zero_var_tol() too
EstimatorName = Literal["grpo", "rloo", "dr_grpo", "batch"]
AdvantageName = Literal["outcome", "outcome+steps"]  # outcome only, or plus per-fragment terms
KLEstimatorName = Literal["k1", "k2", "k3"]
AggregationName = Literal["token_mean", "seq_mean", "dr_grpo"]
BetaScheduleName = Literal["fixed", "warmup", "adaptive"]
ReferenceName = Literal["frozen", "none", "lora_base"]
AutocastName = Literal["off", "bf16"]
SaveDtypeName = Literal["auto", "float32", "bfloat16"]


# T 1 samples the policy's own distribution, which GRPO's group statistics estimate
DEFAULT_TEMPERATURE = 1.0


@dataclass(frozen=True)
class GRPOConfig:
    """Every knob of the GRPO trainer, each with the trade-off it makes and its default's source."""

    # optimisation
    lr: Positive = 1e-4  # seed 002: 2e-6 for 7B; our tiny model needs ~1e-4..1e-3
    max_grad_norm: Positive = 1.0  # grad clipping; a common RLHF default (TRL, verl)
    total_steps: AtLeastOne = 200  # optimiser steps per training run (one night)
    seed: Seed = 0  # torch seed; resume reproduces the uninterrupted run
    # sampling (G and the step's prompts come from the batch source's items)
    max_new_tokens: Tokens = 64  # completion budget; longer ones are truncated
    # sampling temperature; log-probs (policy, old, reference) are of logits / T, the
    # distribution sampled from (as TRL); < 1 makes more groups uninformative. The one default
    # temperature of the project: curation left unset samples at it (pipeline.sampling.budget)
    temperature: Annotated[float, Gt(0), Le(MAX_TEMPERATURE)] = DEFAULT_TEMPERATURE
    # advantages (grpo_core.advantages)
    estimator: EstimatorName = "grpo"  # grpo mean/std; rloo; dr_grpo (no std, Liu et al. 2025)
    # 0 population std (default), 1 Bessel; minimal GRPO repos differ here
    std_ddof: Annotated[int, Ge(0), Le(1)] = 0
    adv_eps: NonNegative = 1e-6  # added to the std; bounds advantages when the spread is tiny
    # max − min ≤ tol · max(1, |max|, |min|) of the task reward → uninformative (one definition,
    # also under penalties; relative 1e-4, was an absolute 1e-6)
    zero_var_tol: NonNegative = ZERO_VAR_TOL
    length_penalty_coef: NonNegative = (
        0.0  # adv −= c · z(len), after normalising; seed 000: 0.05–0.2
    )
    # "outcome+steps" adds a group-relative advantage per checkable fragment (Scores.steps) to
    # its tokens (process advantages); denser signal, relies on the step verifier
    advantage: AdvantageName = "outcome"
    step_weight: NonNegative = 0.5  # "outcome+steps": token adv = outcome + this · fragment adv
    # loss (grpo_core.loss)
    clip_eps_low: Annotated[float, Gt(0), Lt(1)] = 0.2  # PPO/GRPO clip 0.2 (seed 002)
    clip_eps_high: NonNegative = 0.2  # DAPO clip-higher uses 0.28 to keep exploration (entropy) up
    num_iterations: AtLeastOne = 1  # updates per batch (μ in GRPO); > 1 reuses old log-probs
    aggregation: AggregationName = "token_mean"  # token_mean (DAPO) / seq_mean (GRPO) / dr_grpo
    # dr_grpo's constant denominator per sequence (Liu et al. 2025); 0 = max_new_tokens
    loss_norm_tokens: Annotated[int, Ge(0), Le(MAX_TOKENS)] = 0
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
    beta: NonNegative = 0.02  # β after warm-up / fixed β (seed 002: 0.02)
    beta_start: NonNegative = 0.05  # warm-up start β (seed 002: 0.05), tighter than `beta`
    beta_warmup_steps: Count = 50  # linear ramp beta_start → beta over these steps
    kl_target: Positive = 0.05  # adaptive: per-token KL the controller steers toward
    kl_horizon: AtLeastOne = 100  # adaptive: steps for a full clipped error to move β by ~20 %
    # rewards (grpo_core.rewards)
    reward_clip: Positive = 5.0  # each component clipped to ±this; seed 002 §3.2 clips to [−5, 5]
    repetition_coef: NonNegative = 0.0  # weight of the n-gram repetition penalty; 0 switches it off
    repetition_ngram: AtLeastOne = 3  # n of the repeated n-grams counted by the penalty
    repetition_start_step: Count = 0  # the penalty is off before this step (scheduled component)
    # optimiser details, checkpoints, reproducibility
    lr_warmup_steps: Count = 0  # linear lr warm-up from 0; constant afterwards
    weight_decay: NonNegative = 0.0  # AdamW decay; 0 as in TRL's GRPO default
    micro_batch_size: Count = 0  # sequences per forward/backward; 0 = the whole batch at once
    # padded prompt + completion tokens per forward/backward (bounds activation memory on long
    # completions); 0 = no token limit. Combined with micro_batch_size: both bounds hold. With
    # share_prefix, parts under the budget are also cut by completion length where that pads
    # less (grpo_core.batch; same gradient, fewer padded tokens)
    micro_batch_tokens: Count = 0
    # "bf16": forward passes under torch.autocast(bfloat16), master weights and Adam stay fp32
    # (faster where the device has bf16 matmuls; log-softmax stays fp32); "off": plain dtype
    autocast: AutocastName = "off"
    # cap of the truncated behaviour weights w = min(π_prox/μ, cap): engine/trainer log-prob
    # mismatch (Yao et al. 2025; TRL vllm_importance_sampling_cap) and replayed samples' decoupled
    # objective (policy-gradient and KL terms; grpo_core.loss); 0 = off, refused with replay
    tis_cap: NonNegative = 2.0
    # run each distinct prompt once per micro-batch and its completions on its KV cache (same
    # loss, less compute: G rows share one prompt); False runs every row in full
    share_prefix: bool = True
    checkpoint_every: Count = 50  # seed 002 saves every 50 steps; 0 = only at the end
    keep_checkpoints: AtLeastOne = 3  # keep the newest K checkpoints, delete older ones
    # dtype of checkpoint weights: auto = the parameters' dtype; bfloat16 halves fp32 folders
    # (the newest checkpoint then also keeps fp32 master weights for exact resume)
    save_dtype: SaveDtypeName = "auto"
    deterministic: bool = True  # torch deterministic algorithms: bitwise resume on CPU
    lora_rank: Count = 8  # reference="lora_base": rank of the LoRA adapters trained
    lora_alpha: Count = 16  # reference="lora_base": LoRA scale numerator

    def __post_init__(self) -> None:
        check_fields(self)  # types, finite numbers and each field's range (grpo_core.validate)
        self._check_ranges()
        self._check_beta()

    def _check_ranges(self) -> None:
        """The checks that involve more than one field (single-field ranges are annotations)."""
        if self.clip_eps_high < self.clip_eps_low:
            raise ValueError(
                f"clip_eps_high={self.clip_eps_high} < clip_eps_low={self.clip_eps_low}; "
                "set clip_eps_high ≥ clip_eps_low (clip-higher widens the upper side only)"
            )
        if self.loss_norm_tokens and self.aggregation != "dr_grpo":
            raise ValueError(
                f"loss_norm_tokens={self.loss_norm_tokens} only applies to aggregation='dr_grpo'; "
                "set it to 0 or choose dr_grpo"
            )
        if self.reference == "lora_base" and (self.lora_rank < 1 or self.lora_alpha <= 0):
            raise ValueError("lora_base needs lora_rank ≥ 1 and lora_alpha > 0")

    def _check_beta(self) -> None:
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
        if self.beta_schedule == "adaptive" and self.beta <= 0:
            raise ValueError("adaptive β multiplies β, so it needs beta > 0 as its initial value")

    @property
    def dr_grpo_tokens(self) -> int:
        """The `dr_grpo` denominator per sequence: loss_norm_tokens, else max_new_tokens."""
        return self.loss_norm_tokens or self.max_new_tokens
