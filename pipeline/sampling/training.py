"""Training rollouts: `grpo_core`'s `GroupSampler` over Sieve's sampling backends.

The trainer samples from the weights it is training. `make_group_sampler` builds that sampler for
a backend:

- `hf`: `HFGroupSampler` samples with the trainer's own model object (no copy, always current);
- `vllm`: an engine in this process that receives the updated weights after each optimiser step
  (`sync_weights`), as TRL's colocate mode and verl do;
- `openai`: an OpenAI-compatible server; its weights cannot be pushed from here.

A sampler may return the engine's log-probs of the sampled tokens (`Sample.logprobs`); the
trainer compares them with its own and corrects a mismatch with truncated importance weights.

Test: `pytest tests/test_train.py` (hf); the vLLM path runs under `make test-vllm`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from grpo_core.trainer import Sample
from pipeline.errors import SieveError
from pipeline.sampling import BACKENDS, EngineOptions
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.hf import HFSampler


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
        by_size: dict[int, list[int]] = defaultdict(list)
        for i, g in enumerate(sizes):
            by_size[int(g)].append(i)
        out: list[list[Sample]] = [[] for _ in prompts]
        for g, idx in sorted(by_size.items()):
            params = SamplingParams(temperature, max_new_tokens=max_new_tokens, seed=seed + g)
            groups = self.sampler.sample([prompts[i] for i in idx], g, params)
            for i, group in zip(idx, groups, strict=True):
                out[i] = [self._sample(c) for c in group]
        return out

    def _sample(self, c: Completion) -> Sample:
        ids = c.token_ids + ((self.eos,) if c.finish_reason == "stop" else ())
        return Sample(ids, c.text, truncated=c.finish_reason == "length")


def make_group_sampler(
    backend: str,
    model: Any,
    tokenizer: Any,
    model_dir: str,
    *,
    engine: EngineOptions | None = None,
    base_urls: Sequence[str] = (),
) -> Any:
    """The training sampler for `backend`; `model` is the module being trained."""
    if backend == "hf":
        return HFGroupSampler(HFSampler(model=model, tokenizer=tokenizer, model_name=model_dir))
    if backend in BACKENDS:
        raise SieveError(f"training rollouts through the {backend} backend are not built yet")
    raise SieveError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
