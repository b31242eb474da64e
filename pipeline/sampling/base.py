"""The sampler protocol every backend implements, and the types it exchanges.

`Sampler.sample(prompts, n, params)` returns, for each prompt, its n completions in order. Prompts
are already rendered text (see `pipeline.policy.prompts`); backends never apply templates again.

Test: `pytest tests/sampling`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal, Protocol, runtime_checkable

from annotated_types import Gt, Le

from grpo_core.validate import Count, FieldError, StopStrings, Temperature, Tokens, check_fields
from pipeline.core.errors import SieveError

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class Completion:
    """One sampled answer."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason  # "stop": end-of-sequence or a stop string; "length": cut off
    logprob: float | None = None  # summed log-probability of the tokens, where provided
    # Token count; defaults to len(token_ids). A server that reports no ids may still say how
    # many tokens it produced (e.g. the length of its logprobs list).
    n_tokens: int = -1

    def __post_init__(self) -> None:
        if self.n_tokens < 0:
            object.__setattr__(self, "n_tokens", len(self.token_ids))


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings shared by all backends; temperature 0 means greedy. The temperature has
    no default: each caller passes the one it resolved (a `SamplingConfig`'s, the trainer's)."""

    temperature: Temperature
    top_p: Annotated[float, Gt(0), Le(1)] = 1.0
    top_k: Count = 0  # 0: no top-k filter
    max_new_tokens: Tokens = 32
    seed: int = 0  # any integer an engine takes (derived seeds may use 64 bits)
    stop: StopStrings = field(default_factory=tuple)

    def __post_init__(self) -> None:
        try:
            check_fields(self)  # types, finite numbers, ranges (grpo_core.validate)
        except FieldError as exc:
            raise SieveError(str(exc)) from None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@runtime_checkable
class Sampler(Protocol):
    """Draws n completions for each prompt."""

    backend: str  # "hf", "vllm", "openai"
    model_name: str  # what the ledger records as `model`

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]: ...


def check_n(n: int) -> None:
    """Every backend rejects n < 1 the same way."""
    if not isinstance(n, int) or n < 1:
        raise SieveError(f"n (samples per prompt) must be an integer >= 1, got {n!r}")


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut `text` at the first stop string (which is removed); say whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
