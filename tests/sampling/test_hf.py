"""The hf backend: grouping, reproducibility, finish reasons, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.core.errors import SieveError
from pipeline.policy.model import load_policy
from pipeline.sampling.base import SamplingParams
from pipeline.sampling.hf import HFSampler

PROMPTS = ["12+3=", "7*8=", "Pipe A fills a tank in 6 hours. How long?="]


@pytest.fixture(scope="module")
def sampler(tiny_model_dir: Path) -> HFSampler:
    return HFSampler(tiny_model_dir, device="cpu")


def texts(groups: list) -> list[list[str]]:
    return [[c.text for c in g] for g in groups]


def test_n_completions_per_prompt_in_order(sampler: HFSampler) -> None:
    groups = sampler.sample(PROMPTS, 4, SamplingParams(1.0, max_new_tokens=6, seed=1))
    assert [len(g) for g in groups] == [4, 4, 4]
    for group in groups:
        for c in group:
            assert c.n_tokens <= 6 and c.finish_reason in ("stop", "length")
            assert c.logprob is not None and c.logprob <= 0


def test_same_seed_same_completions_and_batching_does_not_leak(sampler: HFSampler) -> None:
    params = SamplingParams(1.0, max_new_tokens=6, seed=7)
    first = texts(sampler.sample(PROMPTS, 3, params))
    assert texts(sampler.sample(PROMPTS, 3, params)) == first
    other = texts(sampler.sample(PROMPTS, 3, SamplingParams(1.0, max_new_tokens=6, seed=8)))
    assert other != first


def test_greedy_samples_agree_and_match_a_one_prompt_call(sampler: HFSampler) -> None:
    params = SamplingParams(temperature=0, max_new_tokens=5)
    groups = sampler.sample(PROMPTS, 2, params)
    for prompt, group in zip(PROMPTS, groups, strict=True):
        assert group[0].text == group[1].text
        alone = sampler.sample([prompt], 1, params)[0][0]
        assert alone.token_ids == group[0].token_ids  # left padding changes nothing


def test_length_and_stop_finish_reasons(tiny_model_dir: Path) -> None:
    model, tokenizer = load_policy(tiny_model_dir)
    eos = tokenizer.eos_token_id
    sampler = HFSampler(model=model, tokenizer=tokenizer, device="cpu")
    params = SamplingParams(temperature=0, max_new_tokens=4)
    greedy = sampler.sample(["1+1="], 1, params)[0][0]
    if eos not in greedy.token_ids:  # random weights: it runs to the limit
        assert greedy.finish_reason == "length" and greedy.n_tokens == 4
    stop = greedy.text[1:]
    cut = sampler.sample(["1+1="], 1, SamplingParams(temperature=0, stop=(stop,)))
    assert cut[0][0].finish_reason == "stop"
    assert cut[0][0].text == greedy.text[: greedy.text.find(stop)]
    with torch.no_grad():  # make <eos> the most likely next token everywhere
        head = torch.nn.Linear(model.config.hidden_size, model.config.vocab_size)
        head.weight.zero_()
        head.bias.zero_()
        head.bias[eos] = 10.0
        model.lm_head = head
    stopped = sampler.sample(["1+1="], 2, params)[0]
    assert [(c.text, c.finish_reason, c.n_tokens) for c in stopped] == [("", "stop", 0)] * 2


def test_bad_input(sampler: HFSampler) -> None:
    with pytest.raises(SieveError, match=r"n .samples per prompt. must be"):
        sampler.sample(PROMPTS, 0, SamplingParams(1.0))
    with pytest.raises(SieveError, match="exceeds the model"):
        sampler.sample(["9" * 400], 1, SamplingParams(1.0))
    with pytest.raises(SieveError, match="max_new_tokens"):
        SamplingParams(1.0, max_new_tokens=0)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_shared_prefill_gives_the_same_completions(
    tiny_model_dir: Path, temperature: float
) -> None:
    shared = HFSampler(tiny_model_dir, device="cpu")
    plain = HFSampler(tiny_model_dir, device="cpu", share_prefill=False)
    params = SamplingParams(temperature=temperature, max_new_tokens=6, seed=11)
    a, b = shared.sample(PROMPTS, 5, params), plain.sample(PROMPTS, 5, params)
    assert texts(a) == texts(b)
    for ga, gb in zip(a, b, strict=True):
        for x, y in zip(ga, gb, strict=True):
            assert x.token_ids == y.token_ids and x.finish_reason == y.finish_reason
            assert x.logprob == pytest.approx(y.logprob, abs=1e-3)


def _forced_logprob(sampler: HFSampler, prompt: str, ids: tuple[int, ...]) -> float:
    """log p(ids | prompt) under the model, recomputed by one teacher-forced forward."""
    head = sampler.tokenizer(prompt)["input_ids"]
    full = torch.tensor([head + list(ids)])
    with torch.no_grad():
        logits = sampler.model(input_ids=full).logits[0].float()  # (T, V)
    logp = torch.log_softmax(logits[len(head) - 1 : -1], dim=-1)
    return float(logp.gather(-1, torch.tensor(ids)[:, None]).sum())


@pytest.mark.parametrize("stop", [(), ("1",)])
def test_reported_logprob_is_that_of_the_kept_tokens(tiny_model_dir: Path, stop: tuple) -> None:
    sampler = HFSampler(tiny_model_dir, device="cpu")
    params = SamplingParams(temperature=1.0, max_new_tokens=16, seed=5, stop=stop)
    groups = sampler.sample(PROMPTS, 32, params)
    reasons = [c.finish_reason for g in groups for c in g]
    assert "stop" in reasons and "length" in reasons  # rows cut early and rows run to the end
    for prompt, group in zip(PROMPTS, groups, strict=True):
        for c in group:
            assert c.logprob is not None
            forced = _forced_logprob(sampler, prompt, c.token_ids)
            assert c.logprob == pytest.approx(forced, abs=1e-4)
            if stop:
                assert "1" not in c.text


def test_logprobs_are_untempered_under_temperature_top_k_top_p(tiny_model_dir: Path) -> None:
    """The warpers shape what is drawn, not the log-prob reported (see the module docstring)."""
    sampler = HFSampler(tiny_model_dir, device="cpu")
    params = SamplingParams(temperature=0.7, top_k=20, top_p=0.9, max_new_tokens=12, seed=3)
    for prompt, group in zip(PROMPTS, sampler.sample(PROMPTS, 8, params), strict=True):
        for c in group:
            assert c.logprob == pytest.approx(
                _forced_logprob(sampler, prompt, c.token_ids), abs=1e-4
            )


def test_greedy_matches_plain_generate(sampler: HFSampler) -> None:
    params = SamplingParams(temperature=0, max_new_tokens=8)
    for prompt, group in zip(PROMPTS, sampler.sample(PROMPTS, 2, params), strict=True):
        ids = torch.tensor([sampler.tokenizer(prompt)["input_ids"]])
        with torch.no_grad():
            plain = sampler.model.generate(
                ids, do_sample=False, max_new_tokens=8, pad_token_id=sampler.tokenizer.pad_token_id
            )[0, ids.shape[1] :].tolist()
        eos = sampler.tokenizer.eos_token_id
        plain = plain[: plain.index(eos)] if eos in plain else plain
        assert list(group[0].token_ids) == plain
        assert group[0].logprob == pytest.approx(
            _forced_logprob(sampler, prompt, group[0].token_ids), abs=1e-4
        )


def test_logit_budget_caps_rows_per_micro_batch(tiny_model_dir: Path) -> None:
    """A step's logits are rows x vocab floats: the logit budget bounds the rows of a batch."""
    wide = HFSampler(tiny_model_dir, device="cpu")
    vocab = wide.vocab
    narrow = HFSampler(tiny_model_dir, device="cpu", logit_budget=2 * 3 * vocab)  # 2 prompts x 3
    params = SamplingParams(temperature=0, max_new_tokens=4)
    encoded = [wide.tokenizer(p)["input_ids"] for p in PROMPTS]
    order = [0, 1, 2]
    assert narrow._micro_batches(order, encoded, 3, params) == [[0, 1], [2]]
    assert wide._micro_batches(order, encoded, 3, params) == [[0, 1, 2]]
    assert [[c.token_ids for c in g] for g in narrow.sample(PROMPTS, 3, params)] == [
        [c.token_ids for c in g] for g in wide.sample(PROMPTS, 3, params)
    ]
