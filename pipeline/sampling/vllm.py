"""The `vllm` backend: offline batched sampling with `vllm.LLM` on GPU.

vLLM is imported only when a `VLLMSampler` is built (it is an optional extra:
`pip install 'grpo-sieve[vllm]'`). The mapping to and from vLLM lives in two pure functions,
`to_vllm_params` and `from_request_output`, so it can be tested on a machine without a GPU.

Semantics, checked against vLLM 0.33 (`vllm.SamplingParams`):
- greedy: temperature 0 is vLLM's greedy, which refuses n > 1; greedy therefore asks vLLM for one
  answer and `VLLMSampler.sample` repeats it n times (greedy answers are identical anyway);
- top_k: our 0 (no filter) becomes the installed vLLM's own default, 0 in recent releases and -1
  in old ones, where 0 was an error;
- logprobs=0 asks for the sampled token's log-probability only, which makes vLLM fill
  `cumulative_logprob`; that becomes `Completion.logprob`;
- stop strings are cut from the text by vLLM itself (not included in the output).

Test: `make -f Makefile.vllm test-vllm` (own venv with vLLM; mapping tests on real vLLM objects);
in the main venv `pytest tests/sampling/test_vllm.py` checks the missing-vLLM error only.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pipeline.errors import SieveError
from pipeline.sampling.base import Completion, FinishReason, SamplingParams, check_n

if TYPE_CHECKING:
    import vllm as vllm_types

INSTALL_HINT = "the vllm backend needs vLLM: pip install 'grpo-sieve[vllm]'"


def import_vllm() -> ModuleType:
    """The vllm module, or a one-line SieveError saying how to get it."""
    try:
        import vllm
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "vllm":
            raise SieveError(INSTALL_HINT) from None
        raise SieveError(f"vLLM is installed but cannot be imported: {exc}") from None
    except ImportError as exc:  # e.g. a CUDA library that does not load
        reason = " ".join(str(exc).split())[:300]
        raise SieveError(f"vLLM is installed but cannot be imported: {reason}") from None
    return vllm


@cache
def _disabled_top_k() -> int:
    """The installed vLLM's "no top-k filter" value: its default (0 now, -1 before v0.8)."""
    return int(import_vllm().SamplingParams().top_k)


def to_vllm_params(params: SamplingParams, n: int) -> vllm_types.SamplingParams:
    """vLLM sampling parameters for n answers per prompt (n=1 when greedy, see module doc)."""
    check_n(n)
    vllm = import_vllm()
    return vllm.SamplingParams(
        n=1 if params.greedy else n,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k if params.top_k > 0 else _disabled_top_k(),
        max_tokens=params.max_new_tokens,
        seed=params.seed,
        stop=list(params.stop),
        logprobs=0,
    )


def _finish_reason(value: str | None) -> FinishReason:
    return "length" if value == "length" else "stop"


def from_request_output(output: vllm_types.RequestOutput) -> list[Completion]:
    """The completions of one vLLM request, in their `index` order."""
    return [
        Completion(
            text=choice.text,
            token_ids=tuple(int(t) for t in choice.token_ids),
            finish_reason=_finish_reason(choice.finish_reason),
            logprob=(
                float(choice.cumulative_logprob) if choice.cumulative_logprob is not None else None
            ),
        )
        for choice in sorted(output.outputs, key=lambda c: c.index)
    ]


def expand(completions: list[Completion], n: int, greedy: bool) -> list[Completion]:
    """A greedy request got one answer: repeat it n times. Anything else must have n already."""
    if greedy and len(completions) == 1:
        return completions * n
    if len(completions) != n:
        raise SieveError(f"vLLM returned {len(completions)} completions for a prompt, not {n}")
    return completions


class VLLMSampler:
    """A `Sampler` over `vllm.LLM`, loading the model folder once."""

    backend = "vllm"

    def __init__(
        self,
        model_path: str,
        *,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
    ) -> None:
        vllm = import_vllm()
        options: dict[str, Any] = {
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "seed": seed,
        }
        if max_model_len is not None:
            options["max_model_len"] = max_model_len
        self.model_name = str(model_path)
        self.llm = vllm.LLM(model=str(model_path), **options)

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        if not prompts:
            return []
        outputs = self.llm.generate(list(prompts), to_vllm_params(params, n), use_tqdm=False)
        if len(outputs) != len(prompts):
            raise SieveError(f"vLLM answered {len(outputs)} of {len(prompts)} prompts")
        return [expand(from_request_output(out), n, params.greedy) for out in outputs]
