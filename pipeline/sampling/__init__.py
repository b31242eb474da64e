"""Sampling backends behind one protocol (`base.Sampler`): `hf` (transformers, CPU or CUDA),
`vllm` (offline engine on GPU, optional extra) and `openai` (OpenAI-compatible servers such as a
fleet of `vllm serve` endpoints). `make_sampler` builds one from CLI-style options."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pipeline.errors import SieveError
from pipeline.sampling.base import Completion, Sampler, SamplingParams

Backend = Literal["hf", "vllm", "openai"]
BACKENDS: tuple[Backend, ...] = ("hf", "vllm", "openai")

__all__ = ["BACKENDS", "Backend", "Completion", "Sampler", "SamplingParams", "make_sampler"]


def make_sampler(
    backend: str,
    model: str | Path,
    *,
    base_urls: Sequence[str] = (),
    device: str | None = None,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
) -> Sampler:
    """A sampler for `model` (a local folder; for `openai`, the served model's name)."""
    if backend == "hf":
        from pipeline.sampling.hf import HFSampler

        return HFSampler(model, device=device)
    if backend == "vllm":
        from pipeline.sampling.vllm import VLLMSampler

        return VLLMSampler(
            str(model),
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
        )
    if backend == "openai":
        from pipeline.sampling.openai import OpenAISampler

        if not base_urls:
            raise SieveError("the openai backend needs --base-url (repeat it for several servers)")
        return OpenAISampler(list(base_urls), str(model))
    raise SieveError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
