"""Decoding budgets for curation and evaluation: one validated block, resolved per model, and
the evaluation's own budget (`EvalConfig`: held-out problems per cell, samples per problem).

`SamplingConfig` is the `[sampling]` table of a curate TOML file and the CLI's `--max-new-tokens`,
`--temperature`, `--top-p` and `--stop`. Its `max_new_tokens` may be left unset: the budget then
follows the model's prompt format, 16 tokens for the built-in tiny model (a bare answer such as
`17/3`; the tiny recipe keeps it) and 512 for chat models, which reason before their `\\boxed{}`
(SmolLM2-135M-Instruct at 256 tokens still cut off a share of its answers; see README "Real
model"). The resolved budget, not the unset one, is what each sampling run records.

A curriculum records the `SamplingConfig` it was curated with (`curricula.config`); a run that
trains on it at other settings gets `training_mismatch`'s list (`sieve train` warns in one line,
`--strict` refuses): a prompt's pass rate, and so whether its group is informative, depends on
the temperature, nucleus and budget it was measured at.

Test: `pytest tests/sampling/test_budget.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo_core.config import DEFAULT_TEMPERATURE
from grpo_core.validate import (
    MAX_TEMPERATURE,
    MAX_TOKENS,
    STRICT,
    AtLeastOne,
    Seed,
    StopStrings,
    check_fields,
)
from pipeline.sampling.base import SamplingParams

# samples of one prompt drawn at once: a sampler holds a prompt's group in memory together (its
# rows x vocabulary of logits, its KV cache), and 100,000 asked terabytes; GRPO groups are 4-64
MAX_GROUP_SIZE = 1024

DEFAULT_MAX_NEW_TOKENS: dict[str, int] = {"raw": 16, "chat": 512}


class SamplingConfig(BaseModel):
    """How answers are drawn: budget, temperature, nucleus, stop strings."""

    model_config = STRICT | ConfigDict(frozen=True)

    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Longest answer in tokens: more lets a chat model finish its reasoning, at "
        "proportional sampling cost. Unset: 16 for raw-format models (the tiny policy), 512 for "
        "chat models (DeepSeek-R1-style recipes use thousands; 512 fits a 135 M model on CPU).",
    )
    temperature: float | None = Field(
        default=None,
        ge=0.0,
        le=MAX_TEMPERATURE,
        description="Sampling temperature. 0 is greedy (no spread: useless for curation). Unset: "
        "the temperature training samples at, the model's recipe's for a chat model (`sieve "
        "curate` takes it) and the trainer's default (GRPOConfig.temperature, the policy's own "
        "distribution) otherwise.",
    )
    top_p: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="Nucleus cut-off; below 1 hides rare answers from the screen (and training "
        "samples the whole distribution: `sieve train` warns when they differ).",
    )
    stop: StopStrings = Field(
        default=(),
        description="Strings that end an answer (removed from it; each non-empty). Default "
        "none: chat models "
        "end at their end-of-turn token.",
    )

    @property
    def sampling_temperature(self) -> float:
        """The temperature answers are drawn at: the one set, else the trainer's default."""
        return DEFAULT_TEMPERATURE if self.temperature is None else self.temperature

    def resolved(self) -> SamplingConfig:
        """This block with the temperature it samples at written in (what a curriculum records,
        and what a curation's key hashes: unset and the trainer's value decide alike)."""
        if self.temperature is not None:
            return self
        return self.model_copy(update={"temperature": self.sampling_temperature})

    def budget(self, prompt_format: Literal["raw", "chat"] | str) -> int:
        """The resolved `max_new_tokens` for a model of this prompt format."""
        if self.max_new_tokens is not None:
            return self.max_new_tokens
        return DEFAULT_MAX_NEW_TOKENS.get(prompt_format, DEFAULT_MAX_NEW_TOKENS["chat"])

    def params(self, prompt_format: str, seed: int = 0, *, greedy: bool = False) -> SamplingParams:
        """`SamplingParams` for a model of this prompt format (greedy: temperature 0)."""
        return SamplingParams(
            temperature=0.0 if greedy else self.sampling_temperature,
            top_p=self.top_p,
            max_new_tokens=self.budget(prompt_format),
            seed=seed,
            stop=tuple(self.stop),
        )


def training_mismatch(
    curated: SamplingConfig, prompt_format: str, temperature: float, max_new_tokens: int
) -> list[str]:
    """How a training run's sampling differs from the curation's, one phrase per setting
    ('temperature 1 (curated) vs 0.6 (trained)'); empty when they agree. Training always
    samples the whole distribution (top-p 1: its log-probs are the policy's own)."""
    pairs = [
        ("temperature", curated.sampling_temperature, temperature),
        ("top-p", curated.top_p, 1.0),
        ("max_new_tokens", curated.budget(prompt_format), max_new_tokens),
    ]
    return [f"{name} {a:g} (curated) vs {b:g} (trained)" for name, a, b in pairs if a != b]


@dataclass(frozen=True)
class EvalConfig:
    """How many held-out problems and samples (`pipeline.jobs.analysis.evaluate`); how they are
    sampled is the one sampling settings object curation and training use (`SamplingConfig`:
    temperature, top-p, budget, stop). Here, beside it, so `sieve eval` and `sieve bootstrap`
    make their options from these fields (`flows.cli.options.EVAL`) without importing the
    evaluation job. Each field's `help` is its option's help."""

    per_level: AtLeastOne = field(
        default=40,
        metadata={"help": "Held-out problems per family x level (fewer where a level is small)."},
    )
    samples: AtLeastOne = field(  # held-out accuracy: the mean over 8 samples
        default=8,
        metadata={"help": "Samples per problem (at the sampling's temperature)."},
    )
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    seed: Seed = field(default=0, metadata={"help": "Sampling seed."})

    def __post_init__(self) -> None:
        check_fields(self)  # types, finite numbers, ranges (grpo_core.validate)
