"""Device correctness: a few trainer steps and HF sampling with every tensor on the model's device.

Each test runs on "cpu" always and on "cuda" when a CUDA device is present (marked `gpu`; run
only those with `pytest -m gpu tests/test_gpu.py`, or all of it with `benchmarks/gpu_check.sh`).
The model is the tiny policy built from a config (no downloads). A forward pre-hook on every model
the trainer runs (policy, frozen reference, LoRA-wrapped) fails the test if any input tensor is on
another device, so on CUDA a tensor built on the CPU is caught where it enters the model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Item, Sample, Scores, Trainer
from pipeline.policy.model import TinySize, new_tiny_model
from pipeline.sampling.base import SamplingParams
from pipeline.sampling.group_sampler import HFGroupSampler
from pipeline.sampling.hf import HFSampler

CUDA = pytest.param(
    "cuda",
    marks=[
        pytest.mark.gpu,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ],
)
DEVICES = ["cpu", CUDA]
SIZE = TinySize(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2)
PROMPTS = ["12+7=", "3*4=", "9-5=", "20/4="]


def on_device_hook(device: torch.device) -> Any:
    def check(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        for value in [*args, *kwargs.values()]:
            if isinstance(value, torch.Tensor):
                assert value.device.type == device.type, f"input on {value.device}, not {device}"

    return check


class EngineLike:
    """The hf group sampler plus what an engine adds: per-token log-probs and a weight sync."""

    def __init__(self, inner: HFGroupSampler, device: torch.device):
        self.inner, self.device, self.synced = inner, device, 0

    def sample_groups(self, prompts: Sequence[str], sizes: Sequence[int], **kw: Any) -> Any:
        groups = self.inner.sample_groups(prompts, sizes, **kw)
        return [[_with_logprobs(s) for s in g] for g in groups]

    def sync_weights(self, model: torch.nn.Module) -> None:
        assert all(p.device.type == self.device.type for p in model.parameters())
        self.synced += 1


def _with_logprobs(s: Sample) -> Sample:
    return Sample(s.token_ids, s.text, s.truncated, logprobs=(-2.0,) * len(s.token_ids))


def digit_first(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    ok = [s.text[:1].isdigit() for s in samples]
    return Scores([float(c) for c in ok], list(ok))


def make(device: str, tmp: Path | None = None, **kw: Any) -> Trainer:
    model, tok = new_tiny_model(seed=0, size=SIZE)
    model.to(torch.device(device))
    hf = HFSampler(model=model, tokenizer=tok)
    cfg = GRPOConfig(
        **{"lr": 1e-3, "max_new_tokens": 6, "checkpoint_every": 0, "temperature": 1.5, **kw}
    )
    sampler = EngineLike(HFGroupSampler(hf), torch.device(device))
    items = [Item(p, "", 4) for p in PROMPTS]
    t = Trainer(
        model,
        tok,
        sampler,
        digit_first,
        lambda s: items,
        cfg,
        tmp,
        hooks=Hooks(warning=lambda m: None),
    )
    hf.model = t.model  # under LoRA the wrapped model samples, as in pipeline/jobs/train/trainee.py
    hook = on_device_hook(torch.device(device))
    for m in (t.model, t.ref_model):
        if m is not None:
            m.register_forward_pre_hook(hook, with_kwargs=True)
    return t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "kw",
    [
        {"reference": "frozen"},
        {"reference": "frozen", "share_prefix": False, "num_iterations": 2},
        {"reference": "lora_base", "autocast": "bf16", "micro_batch_tokens": 64},
    ],
    ids=["frozen", "full-rows-2-iterations", "lora-bf16-token-budget"],
)
def test_trainer_steps_on_the_models_device(device: str, kw: dict[str, Any]) -> None:
    if kw["reference"] == "lora_base":
        pytest.importorskip("peft")
    t = make(device, total_steps=3, **kw)
    history = t.train()
    trained = [h for h in history if h["trained_samples"] > 0]
    assert trained, "no informative step in 3 steps"
    for h in trained:
        assert math.isfinite(h["loss"]) and math.isfinite(h["grad_norm"])
        assert h["logprob_mismatch"] > 0 and 0 < h["is_weight_mean"] <= t.cfg.tis_cap
    assert t.sampler.synced == 1 + len(trained)  # type: ignore[attr-defined]
    assert all(p.device.type == device for p in t.model.parameters())
    assert all(p.dtype == torch.float32 for p in t.params)


@pytest.mark.parametrize("device", DEVICES)
def test_batches_are_built_on_the_models_device(device: str) -> None:
    t = make(device)
    items = [Item("1+1=", "2", 2)] * 2
    samples = [Sample((5, 6, 7), "", False, logprobs=(-1.0,) * 3), Sample((5,), "", True)]
    b = t._tensors(items, samples, torch.tensor([1.0, -1.0]))
    for f in fields(b):
        value = getattr(b, f.name)
        assert value is None or value.device.type == device, f.name


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_and_resume_on_the_device(device: str, tmp_path: Path) -> None:
    kw = {"total_steps": 4, "checkpoint_every": 2, "save_dtype": "bfloat16"}
    straight = make(device, tmp_path / "a", **kw)
    full = straight.train()
    first = make(device, tmp_path / "b", **kw)
    part1 = first.train(max_steps=2)
    second = make(device, tmp_path / "b", **kw)
    assert second.resume() == 2
    part2 = second.train()
    assert ckpt.list_steps(tmp_path / "b")[-1][0] == 4
    assert all(s["exp_avg"].device.type == device for s in second.optimizer.state.values()), (
        "optimiser state restored off the device"
    )
    if device == "cpu":  # bitwise on CPU; CUDA kernels need not be deterministic here
        assert [h["loss"] for h in full] == [h["loss"] for h in part1 + part2]


@pytest.mark.parametrize("device", DEVICES)
def test_hf_sampler_follows_the_model_object(device: str) -> None:
    model, tok = new_tiny_model(seed=0, size=SIZE)
    model.to(torch.device(device))
    hf = HFSampler(model=model, tokenizer=tok)
    assert hf.device.type == device
    groups = hf.sample(PROMPTS[:2], 3, SamplingParams(1.0, max_new_tokens=5, seed=0))
    assert [len(g) for g in groups] == [3, 3]
    assert all(c.logprob is not None and math.isfinite(c.logprob) for g in groups for c in g)
    with pytest.raises(ValueError, match="move the model first"):
        HFSampler(model=model, tokenizer=tok, device="meta")
