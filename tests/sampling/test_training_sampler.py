"""Training samplers without a real engine (`pipeline.sampling.group_sampler`): the vLLM and openai
group samplers against fakes, the weights they push (LoRA merged), and their one-line errors.

`FakeEngine` stands in for an in-process `VLLMSampler`: it holds its own copy of a tiny model,
samples with it, reports each token's log-prob the way vLLM does (end-of-sequence token included,
with its log-prob) and takes pushed weights, so a short `grpo_core.trainer.Trainer` run shows the
push reaching the engine. The real engine: tests/test_train_vllm.py under `make test-vllm`.

Test: `.venv/bin/pytest tests/sampling/test_training_sampler.py -q` (~20 s).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from grpo_core.config import GRPOConfig
from grpo_core.trainer import Sample, Trainer
from pipeline.core.errors import SieveError
from pipeline.policy.model import new_tiny_model
from pipeline.sampling import EngineOptions
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.engine import EngineLog, TokenCompletion
from pipeline.sampling.group_sampler import (
    OPENAI_WARNING,
    OpenAIGroupSampler,
    VLLMGroupSampler,
    by_size,
    engine_sample,
    engine_weights,
    make_group_sampler,
    training_engine,
    with_eos,
)
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.openai import parse_choices
from pipeline.sampling.vllm import VLLMSampler
from tests.sampling.server import running


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    model, tokenizer = new_tiny_model(seed=0)
    return model.eval(), tokenizer


class FakeEngine:
    """An in-process engine: its own model copy, vLLM-style samples, pushed weights."""

    def __init__(self, model: Any, tokenizer: Any, dtype: torch.dtype = torch.float32) -> None:
        self.model = copy.deepcopy(model).eval()
        self.tokenizer = tokenizer
        self.llm = SimpleNamespace(
            llm_engine=SimpleNamespace(model_config=SimpleNamespace(dtype=dtype))
        )
        self.hf = HFSampler(model=self.model, tokenizer=tokenizer, model_name="fake")
        self.calls: list[tuple[list[list[int]], list[int], SamplingParams]] = []
        self.pushed: list[dict[str, torch.Tensor]] = []
        self.follow = True  # False: take pushes but keep the old weights (a broken push)

    def sample_ids(
        self, prompt_ids: Sequence[Sequence[int]], sizes: Sequence[int], params: SamplingParams
    ) -> list[list[Completion]]:
        self.calls.append(([list(p) for p in prompt_ids], list(sizes), params))
        out = []
        for ids, g in zip(prompt_ids, sizes, strict=True):
            text = self.tokenizer.decode(ids)
            [group] = self.hf.sample([text], g, params)
            out.append([self._as_vllm(list(ids), c, params.temperature) for c in group])
        return out

    def _as_vllm(self, prompt: list[int], c: Completion, temperature: float) -> TokenCompletion:
        """vLLM keeps the end-of-sequence token and its log-prob; `processed_logprobs` are of
        logits / temperature."""
        ids = c.token_ids + ((self.tokenizer.eos_token_id,) if c.finish_reason == "stop" else ())
        with torch.no_grad():
            logits = self.model(torch.tensor([prompt + list(ids)])).logits[0]
        logp = torch.log_softmax(logits[len(prompt) - 1 : -1].float() / temperature, dim=-1)
        lp = logp.gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)
        return TokenCompletion(
            c.text, ids, c.finish_reason, float(lp.sum()), token_logprobs=tuple(lp.tolist())
        )

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        got = dict(weights)
        self.pushed.append(got)
        if self.follow:
            self.model.load_state_dict(got, strict=False)


# --- vLLM samples --------------------------------------------------------------------------------


def test_vllm_samples_keep_the_engines_ids_and_logprobs(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    engine = FakeEngine(model, tokenizer)
    sampler = VLLMGroupSampler(engine, tokenizer)
    prompts = ["12+7=", "3*4="]
    groups = sampler.sample_groups(prompts, [2, 3], temperature=0.7, max_new_tokens=6, seed=5)
    [(ids, sizes, params)] = engine.calls
    assert ids == [list(tokenizer(p)["input_ids"]) for p in prompts]  # the trainer's tokens
    assert sizes == [2, 3]
    assert (params.temperature, params.max_new_tokens, params.seed) == (0.7, 6, 5)
    assert [len(g) for g in groups] == [2, 3]
    for s in (s for g in groups for s in g):
        assert s.logprobs is not None and len(s.logprobs) == len(s.token_ids)
        assert s.truncated == (len(s.token_ids) == 6 and s.token_ids[-1] != tokenizer.eos_token_id)


def test_an_engine_eos_is_not_appended_twice() -> None:
    stopped = TokenCompletion("ab", (5, 6, 2), "stop", -1.0, token_logprobs=(-0.1, -0.2, -0.7))
    assert engine_sample(stopped) == Sample((5, 6, 2), "ab", False, (-0.1, -0.2, -0.7))
    cut = TokenCompletion("ab", (5, 6), "length", -1.0, token_logprobs=(-0.1, -0.2))
    assert engine_sample(cut) == Sample((5, 6), "ab", True, (-0.1, -0.2))
    plain = Completion("ab", (5, 6), "length", -1.0)  # an engine that sends no log-probs
    assert engine_sample(plain).logprobs is None


def test_sample_ids_sends_token_prompts_and_reads_per_token_logprobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.sampling.vllm as vllm_backend

    monkeypatch.setattr(  # no vllm in this venv: the request is whatever the mapping makes
        vllm_backend, "to_vllm_params", lambda p, n, per_request_seed: SimpleNamespace(n=n)
    )

    def step(token: int, lp: float) -> dict[int, Any]:
        return {token: SimpleNamespace(logprob=lp), 99: SimpleNamespace(logprob=-9.0)}

    def choice(i: int, ids: list[int], steps: list[dict[int, Any]] | None) -> Any:
        return SimpleNamespace(
            index=i, text="t", token_ids=ids, cumulative_logprob=-1.0, logprobs=steps,
            finish_reason="stop",
        )  # fmt: skip

    class LLM:
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def generate(self, inputs: list[Any], params: Any, *, use_tqdm: bool) -> list[Any]:
            self.seen.append((inputs, params))
            return [
                SimpleNamespace(outputs=[choice(1, [4, 2], [step(4, -0.5), step(2, -0.25)]),
                                         choice(0, [3], [step(3, -1.5)])]),
                SimpleNamespace(outputs=[choice(0, [7, 8], [step(7, -0.1)])]),  # one missing
            ]  # fmt: skip

    sampler = VLLMSampler.__new__(VLLMSampler)
    sampler.llm, sampler.dead, sampler.per_request_seed = LLM(), None, False
    sampler.log = EngineLog(tmp_path / "engine.log")
    got = sampler.sample_ids([[1, 2], [3]], [2, 1], SamplingParams(temperature=1.0))
    inputs, params = sampler.llm.seen[0]
    assert inputs == [{"prompt_token_ids": [1, 2]}, {"prompt_token_ids": [3]}]
    assert [p.n for p in params] == [2, 1]  # one engine call, each prompt its own n
    assert [[c.token_ids for c in g] for g in got] == [[(3,), (4, 2)], [(7, 8)]]
    assert [[c.token_logprobs for c in g] for g in got] == [  # type: ignore[attr-defined]
        [(-1.5,), (-0.5, -0.25)],
        [None],
    ]
    with pytest.raises(SieveError, match="2 prompts but 1 group sizes"):
        sampler.sample_ids([[1], [2]], [1], SamplingParams(1.0))


# --- weight pushes -------------------------------------------------------------------------------


def test_sync_weights_pushes_the_live_tensors(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    engine = FakeEngine(model, tokenizer)
    sampler = VLLMGroupSampler(engine, tokenizer)
    sampler.sync_weights(model)
    [pushed] = engine.pushed
    own = model.state_dict()
    assert pushed.keys() == own.keys()
    assert all(pushed[k].data_ptr() == own[k].data_ptr() for k in own)  # same dtype: no copy
    assert len(sampler.sync_seconds) == 1
    half = VLLMGroupSampler(FakeEngine(model, tokenizer, torch.bfloat16), tokenizer)
    half.sync_weights(model)
    assert {v.dtype for v in half.sampler.pushed[0].values()} == {torch.bfloat16}


def test_lora_is_merged_into_the_base_names(tiny: tuple[Any, Any]) -> None:
    peft = pytest.importorskip("peft")
    model, _ = tiny
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    wrapped = peft.get_peft_model(copy.deepcopy(model), lora)
    expected = copy.deepcopy(wrapped).merge_and_unload().state_dict()
    pushed = dict(engine_weights(wrapped))
    assert pushed.keys() == expected.keys() == model.state_dict().keys()
    changed = [k for k in expected if not torch.equal(expected[k], model.state_dict()[k])]
    assert changed and all("proj" in k for k in changed)  # the adapters did move the weights
    for k, v in expected.items():
        torch.testing.assert_close(pushed[k], v, rtol=0, atol=1e-6)
    with wrapped.disable_adapter():  # adapters switched off: the base weights go out
        assert all(torch.equal(v, model.state_dict()[k]) for k, v in engine_weights(wrapped))


def test_a_two_step_run_keeps_the_engine_on_the_trainers_weights(tiny: tuple[Any, Any]) -> None:
    from grpo_core.config import GRPOConfig
    from grpo_core.trainer import Item, Scores, Trainer

    model, tokenizer = tiny
    cfg = GRPOConfig(
        total_steps=2, max_new_tokens=6, lr=1e-2, reference="none",
        beta=0.0, beta_schedule="fixed", checkpoint_every=0, seed=0,
    )  # fmt: skip
    items = [Item("1+1=", "2", 4), Item("2+3=", "5", 4)]

    def reward(owners: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        values: list[float | None] = [float(i % 2) for i in range(len(samples))]  # informative
        return Scores(values, [bool(v) for v in values])

    def run(follow: bool) -> tuple[FakeEngine, list[dict[str, float]]]:
        policy = copy.deepcopy(model)
        engine = FakeEngine(policy, tokenizer)
        engine.follow = follow
        trainer = Trainer(
            policy, tokenizer, VLLMGroupSampler(engine, tokenizer), reward, lambda s: items, cfg
        )
        return engine, trainer.train()

    engine, history = run(follow=True)
    assert len(engine.pushed) >= 2  # once at the start, then after the step's update
    assert history[1]["logprob_mismatch"] < 1e-4, history
    _, stale_history = run(follow=False)  # pushes that do not land show up as a mismatch
    assert stale_history[1]["logprob_mismatch"] > 10 * max(history[1]["logprob_mismatch"], 1e-6)


# --- openai --------------------------------------------------------------------------------------


def test_openai_logprobs_line_up_with_token_ids_or_are_dropped() -> None:
    def payload(ids: list[int] | None, lps: list[Any] | None) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "text": "x", "finish_reason": "stop"}
        if ids is not None:
            choice["token_ids"] = ids
        if lps is not None:
            choice["logprobs"] = {"token_logprobs": lps}
        return {"choices": [choice]}

    def per_token(ids: list[int] | None, lps: list[Any] | None) -> Any:
        [c] = parse_choices(payload(ids, lps), 1, per_token=True)
        assert isinstance(c, TokenCompletion)
        return c.token_logprobs

    assert per_token([5, 2], [-0.5, -0.25]) == (-0.5, -0.25)
    assert per_token([5, 2], [-0.75]) is None  # a summed logprob stands in for the list
    assert per_token([5, 2], [None, -0.25]) is None
    assert per_token(None, [-0.5, -0.25]) is None  # no ids: nothing to line up with
    [plain] = parse_choices(payload([5], [-0.5]), 1)
    assert type(plain) is Completion


def test_with_eos_appends_a_missing_eos_and_then_drops_the_logprobs() -> None:
    lacks = TokenCompletion("ab", (5, 6), "stop", -1.0, token_logprobs=(-0.1, -0.2))
    assert with_eos(lacks, 2) == Sample((5, 6, 2), "ab", False, None)
    has = TokenCompletion("ab", (5, 2), "stop", -1.0, token_logprobs=(-0.1, -0.2))
    assert with_eos(has, 2) == Sample((5, 2), "ab", False, (-0.1, -0.2))
    cut = TokenCompletion("ab", (5, 6), "length", -1.0, token_logprobs=(-0.1, -0.2))
    assert with_eos(cut, 2) == Sample((5, 6), "ab", True, (-0.1, -0.2))


class IdsSampler:
    """Answers `p!` with token ids and stops; `ids=False`: like a server that sends none."""

    backend = "fake"
    model_name = "served"

    def __init__(self, ids: bool = True) -> None:
        self.ids = ids

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        ids = (33, 34) if self.ids else ()
        return [[Completion(f"{p}!", ids, "stop", -1.0) for _ in range(n)] for p in prompts]


def test_openai_training_warns_once_and_samples_groups(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    warnings: list[str] = []
    with running(IdsSampler()) as (_, url):
        sampler = make_group_sampler(
            "openai", model, tokenizer, "served", base_urls=[url], warn=warnings.append
        )
        groups = sampler.sample_groups(
            ["a", "b"], [1, 2], temperature=1.0, max_new_tokens=4, seed=0
        )
    assert warnings == [OPENAI_WARNING] and "\n" not in OPENAI_WARNING
    assert not hasattr(sampler, "sync_weights")
    eos = tokenizer.eos_token_id
    assert [[s.token_ids for s in g] for g in groups] == [[(33, 34, eos)], [(33, 34, eos)] * 2]
    with running(IdsSampler(ids=False)) as (_, url):
        bare = OpenAIGroupSampler(_openai(url), eos)
        with pytest.raises(SieveError, match="returned no token ids"):
            bare.sample_groups(["a"], [1], temperature=1.0, max_new_tokens=4, seed=0)


def _openai(url: str) -> Any:
    from pipeline.sampling.openai import OpenAISampler

    return OpenAISampler(url, "served", token_logprobs=True)


# --- options and errors --------------------------------------------------------------------------


def test_training_engine_follows_the_trainers_dtype(tiny: tuple[Any, Any]) -> None:
    model, _ = tiny
    assert training_engine(None, model).dtype == "float32"  # vLLM's auto is bf16 on CPU
    assert training_engine(EngineOptions(dtype="bfloat16"), model).dtype == "bfloat16"
    half = copy.deepcopy(model).to(torch.bfloat16)
    assert training_engine(EngineOptions(kv_cache_gib=1), half).dtype == "bfloat16"
    assert training_engine(None, torch.float32).dtype == "float32"  # before the trainee loads


def test_openai_without_base_urls_is_one_line(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    with pytest.raises(SieveError, match=r"^the openai backend needs --base-url"):
        make_group_sampler("openai", model, tokenizer, "m")
    with pytest.raises(SieveError, match=r"^unknown backend 'tpu'; valid: hf, vllm, openai$"):
        make_group_sampler("tpu", model, tokenizer, "m")


def test_vllm_without_vllm_is_one_line(
    tiny: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed, in either venv
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # restored after the test
    (tmp_path / "config.json").write_text("{}")
    model, tokenizer = tiny
    with pytest.raises(SieveError) as info:
        make_group_sampler("vllm", model, tokenizer, str(tmp_path))
    assert str(info.value).startswith("the vllm backend needs vLLM") and "\n" not in str(info.value)


def test_weights_go_only_into_an_in_process_engine(tmp_path: Path) -> None:
    sampler = VLLMSampler.__new__(VLLMSampler)
    core = type("SyncMPClient", (), {})()
    sampler.llm = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=core))
    sampler.dead, sampler.log = None, EngineLog(tmp_path / "engine.log")
    with pytest.raises(SieveError, match=r"^weights can only be pushed into an in-process"):
        sampler.load_weights(iter(()))


def test_a_failed_push_is_one_line_naming_the_log(tmp_path: Path) -> None:
    class LLM:
        llm_engine = SimpleNamespace(engine_core=type("InprocClient", (), {})())

        def collective_rpc(self, method: str, kwargs: dict[str, Any]) -> None:
            assert method == "reload_weights" and kwargs["is_checkpoint_format"] is True
            raise RuntimeError("size mismatch for weight\nsecond line")

    sampler = VLLMSampler.__new__(VLLMSampler)
    sampler.llm, sampler.dead = LLM(), None
    sampler.log = EngineLog(tmp_path / "engine.log")
    with pytest.raises(SieveError) as info:
        sampler.load_weights(iter(()))
    message = str(info.value)
    assert message.startswith("vLLM could not load the new weights: RuntimeError: size mismatch")
    assert "\n" not in message and str(tmp_path / "engine.log") in message


def test_step_and_group_size_seeds_never_collide(tiny: tuple[Any, Any]) -> None:
    # The seeds a trained run hands its sampler: Trainer.step_seed per (step, round), then one
    # per group size. With the old arithmetic (seed + step + g) step 0 at G = 16 and step 8 at
    # G = 8 drew the same stream; derived through grpo_core.seeds every pair is its own.
    model, tok = tiny
    trainer = Trainer(model, tok, IdsSampler(), lambda o, s: [], lambda step: [], GRPOConfig())
    seen: list[int] = []

    class Recording(IdsSampler):
        def sample(
            self, prompts: Sequence[str], n: int, params: SamplingParams
        ) -> list[list[Completion]]:
            seen.append(params.seed)
            return super().sample(prompts, n, params)

    for step in range(32):
        for round_ in range(2):
            by_size(
                Recording(), ["a", "b", "c"], [8, 16, 8], 1.0, 3, trainer.step_seed(step, round_)
            )
    assert len(seen) == 32 * 2 * 2
    assert len(set(seen)) == len(seen)
