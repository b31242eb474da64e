"""The vllm backend without a GPU: the missing-vLLM error, and the mapping to and from real vLLM
objects (`vllm.SamplingParams`, `vllm.RequestOutput`, `vllm.CompletionOutput`).

The mapping tests skip where vLLM is not installed (the main venv); run them with
`make -f Makefile.vllm test-vllm`, which builds `.venv-vllm`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest

from pipeline.errors import SieveError
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.vllm import (
    INSTALL_HINT,
    VLLMSampler,
    expand,
    from_request_output,
    to_vllm_params,
)


@pytest.fixture(scope="module")
def vllm() -> ModuleType:
    return pytest.importorskip("vllm")


def test_missing_vllm_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now fails, installed or not
    with pytest.raises(SieveError) as info:
        VLLMSampler("some/model")
    assert str(info.value) == INSTALL_HINT
    assert "\n" not in str(info.value)


def test_expand_repeats_a_greedy_answer() -> None:
    one = Completion("a", (1,), "stop", -0.5)
    assert expand([one], 3, greedy=True) == [one, one, one]
    assert expand([one], 1, greedy=False) == [one]
    with pytest.raises(SieveError, match="returned 1 completions for a prompt, not 2"):
        expand([one], 2, greedy=False)


def test_sampling_params_map_to_vllm(vllm: Any) -> None:
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=24, seed=5, stop=("\n\n",))
    got = to_vllm_params(params, 4)
    assert isinstance(got, vllm.SamplingParams)
    assert (got.n, got.temperature, got.top_p, got.max_tokens, got.seed) == (4, 0.7, 0.9, 24, 5)
    assert got.top_k == vllm.SamplingParams().top_k  # vLLM's own "no filter"
    assert got.stop == ["\n\n"]
    assert got.logprobs == 0  # the sampled token only: enough for cumulative_logprob
    assert got.sampling_type == vllm.sampling_params.SamplingType.RANDOM_SEED


def test_top_k_passes_through(vllm: Any) -> None:
    assert to_vllm_params(SamplingParams(top_k=5), 2).top_k == 5


def test_greedy_maps_to_vllm_greedy_with_one_answer(vllm: Any) -> None:
    got = to_vllm_params(SamplingParams(temperature=0.0, top_p=0.5, top_k=3), 4)
    assert got.sampling_type == vllm.sampling_params.SamplingType.GREEDY
    assert (got.n, got.temperature) == (1, 0.0)  # vLLM refuses n > 1 when greedy


def test_n_below_one_is_rejected(vllm: Any) -> None:
    with pytest.raises(SieveError, match="n \\(samples per prompt\\)"):
        to_vllm_params(SamplingParams(), 0)


def _choice(vllm: Any, index: int, text: str, reason: str | None, lp: float | None) -> Any:
    return vllm.CompletionOutput(
        index=index,
        text=text,
        token_ids=[ord(c) for c in text],
        cumulative_logprob=lp,
        logprobs=None,
        finish_reason=reason,
    )


def _request(vllm: Any, choices: list[Any], request_id: str = "0") -> Any:
    return vllm.RequestOutput(
        request_id=request_id,
        prompt="p",
        prompt_token_ids=[1, 2],
        prompt_logprobs=None,
        outputs=choices,
        finished=True,
    )


def test_request_output_maps_to_completions(vllm: Any) -> None:
    output = _request(
        vllm,
        [
            _choice(vllm, 2, "cut", "abort", None),
            _choice(vllm, 0, "done", "stop", -1.25),
            _choice(vllm, 1, "long", "length", -3.0),
        ],
    )
    assert from_request_output(output) == [
        Completion("done", tuple(map(ord, "done")), "stop", -1.25),
        Completion("long", tuple(map(ord, "long")), "length", -3.0),
        Completion("cut", tuple(map(ord, "cut")), "stop", None),
    ]


class FakeLLM:
    """Stands in for `vllm.LLM`: answers with real RequestOutputs and records the params."""

    def __init__(self, vllm: Any) -> None:
        self.vllm = vllm
        self.seen: list[Any] = []

    def generate(self, prompts: Sequence[str], params: Any, *, use_tqdm: bool) -> list[Any]:
        self.seen.append(params)
        return [
            _request(
                self.vllm,
                [_choice(self.vllm, i, f"{p}{i}", "stop", -1.0) for i in range(params.n)],
                str(k),
            )
            for k, p in enumerate(prompts)
        ]


def _sampler(llm: FakeLLM) -> VLLMSampler:
    sampler = VLLMSampler.__new__(VLLMSampler)  # no GPU: skip loading, keep the real sample()
    sampler.model_name, sampler.llm = "fake", llm
    return sampler


def test_sample_groups_by_prompt_and_repeats_greedy(vllm: Any) -> None:
    llm = FakeLLM(vllm)
    sampler = _sampler(llm)
    got = sampler.sample(["a", "b"], 3, SamplingParams(temperature=1.0))
    assert [[c.text for c in group] for group in got] == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]
    greedy = sampler.sample(["a"], 3, SamplingParams(temperature=0.0))
    assert [c.text for c in greedy[0]] == ["a0", "a0", "a0"]
    assert [p.n for p in llm.seen] == [3, 1]
