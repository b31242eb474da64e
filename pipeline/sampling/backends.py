"""Which backend samples: `make_sampler` builds a `Sampler` from CLI-style options (`hf`,
`vllm`, `openai`), the backends loaded lazily so that `hf` alone needs no vLLM.

Test: `pytest tests/sampling` (the real vLLM engine: `make test-vllm`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pipeline.core.errors import SieveError
from pipeline.sampling.base import Sampler
from pipeline.sampling.engine import EngineOptions

Backend = Literal["hf", "vllm", "openai"]
BACKENDS: tuple[Backend, ...] = ("hf", "vllm", "openai")


def make_sampler(
    backend: str,
    model: str | Path,
    *,
    base_urls: Sequence[str] = (),
    device: str | None = None,
    engine: EngineOptions | None = None,
) -> Sampler:
    """A sampler for `model` (a local folder; for `openai`, the served model's name).

    `engine` applies to `vllm` (all fields) and `openai` (`per_request_seed` only); `hf` ignores
    it. An `openai` sampler checks every base URL once before it is returned.
    """
    if backend == "hf":
        from pipeline.sampling.hf import HFSampler

        return HFSampler(model, device=device)
    if backend == "vllm":
        from pipeline.sampling.vllm import VLLMSampler

        return VLLMSampler(model, engine)
    if backend == "openai":
        from pipeline.sampling.openai import OpenAISampler

        if not base_urls:
            raise SieveError("the openai backend needs --base-url (repeat it for several servers)")
        seed = engine.per_request_seed if engine is not None else None
        sampler = OpenAISampler(list(base_urls), str(model), per_request_seed=seed)
        sampler.check_health()
        return sampler
    raise SieveError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
