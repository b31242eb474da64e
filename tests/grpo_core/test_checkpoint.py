"""Checkpoint layout: weights at the save dtype, resume state only in the newest, LoRA adapters."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Trainer, TrainerError

BASE = {"lr": 3e-3, "max_new_tokens": 3, "checkpoint_every": 2}


def make(toy: dict[str, Any], root: Path, warn: Any = None, **kw: Any) -> Trainer:
    cfg = GRPOConfig(**{**BASE, **kw})
    model, tok = toy["model"](), toy["tokenizer"]()
    sampler = toy["sampler"](model, tok)
    return Trainer(
        model, tok, sampler, toy["reward"], toy["batches"](), cfg, root,
        hooks=Hooks(warning=warn or (lambda m: None)),
    )  # fmt: skip


def listed(path: Path) -> set[str]:
    return set(json.loads((path / ckpt.MANIFEST).read_text()))


def weight_dtypes(path: Path) -> set[torch.dtype]:
    from safetensors.torch import load_file

    return {v.dtype for v in load_file(path / "model.safetensors").values()}


def test_only_the_newest_checkpoint_keeps_the_optimiser(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    make(toy, tmp_path, total_steps=6).train()
    steps = ckpt.list_steps(tmp_path)
    assert [s for s, _ in steps] == [2, 4, 6]
    for step, path in steps:
        has = step == 6
        assert (path / ckpt.RESUME).is_dir() == has
        assert (f"{ckpt.RESUME}/{ckpt.OPTIMIZER}" in listed(path)) == has
        state = ckpt.load_state(path)  # every one still verifies
        assert ("optimizer" in state) == has
        assert not (path / ckpt.ADAPTER).exists()  # no LoRA, no adapter folder
    assert weight_dtypes(steps[-1][1]) == {torch.float32}  # auto = the parameters' dtype


def test_dropping_resume_state_is_safe_at_any_kill_point(
    toy: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make(toy, tmp_path, total_steps=2).train()
    path = ckpt.step_dir(tmp_path, 2)

    def killed(*args: Any, **kw: Any) -> None:
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:  # killed before the new manifest replaces the old one
        m.setattr(os, "replace", killed)
        with pytest.raises(KeyboardInterrupt):
            ckpt.drop_resume(path)
    assert "optimizer" in ckpt.load_state(path)  # untouched and still complete
    with monkeypatch.context() as m:  # killed after the manifest, before the files went
        m.setattr(ckpt.shutil, "rmtree", killed)
        with pytest.raises(KeyboardInterrupt):
            ckpt.drop_resume(path)
    assert (path / ckpt.RESUME / ckpt.OPTIMIZER).is_file()
    assert "optimizer" not in ckpt.load_state(path)  # unlisted files are not trusted
    ckpt.drop_resume(path)
    assert not (path / ckpt.RESUME).exists()


def test_bf16_checkpoints_halve_the_weights_and_resume_stays_bitwise(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    kw = {"total_steps": 8, "checkpoint_every": 2, "save_dtype": "bfloat16"}
    straight = make(toy, tmp_path / "a", **kw)
    full = straight.train()
    first = make(toy, tmp_path / "b", **kw)
    part1 = first.train(max_steps=4)
    newest = ckpt.step_dir(tmp_path / "b", 4)
    older = ckpt.step_dir(tmp_path / "b", 2)
    assert weight_dtypes(newest) == weight_dtypes(older) == {torch.bfloat16}
    assert f"{ckpt.RESUME}/{ckpt.MASTER}" in listed(newest)
    assert not (older / ckpt.RESUME).exists()
    fp32 = (tmp_path / "a" / "step-000008" / "resume" / ckpt.MASTER).stat().st_size
    assert (newest / "model.safetensors").stat().st_size < 0.6 * fp32
    second = make(toy, tmp_path / "b", **kw)
    assert second.resume() == 4
    part2 = second.train()
    assert [h["loss"] for h in full] == [h["loss"] for h in part1 + part2]
    assert all(
        torch.equal(a, b)
        for a, b in zip(straight.model.parameters(), second.model.parameters(), strict=True)
    )


def test_a_bf16_folder_is_a_plain_bf16_model_of_the_rounded_weights(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    from transformers import AutoModelForCausalLM

    seen: list[torch.nn.Module] = []
    t = make(toy, tmp_path, total_steps=2, save_dtype="bfloat16")
    t.hooks = Hooks(extra=lambda folder, model: seen.append(model))
    t.train()
    loaded = AutoModelForCausalLM.from_pretrained(ckpt.step_dir(tmp_path, 2))
    assert all(p.dtype == torch.bfloat16 for p in loaded.parameters())
    ours = dict(t.model.named_parameters())
    assert all(p.dtype == torch.float32 for p in ours.values())  # training stays fp32
    for name, p in loaded.named_parameters():
        assert torch.equal(p, ours[name].detach().to(torch.bfloat16)), name
    assert seen and all(p.dtype == torch.bfloat16 for p in seen[-1].parameters())


def test_an_older_checkpoint_resumes_weights_only_with_a_warning(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    t = make(toy, tmp_path, total_steps=4)
    t.train()
    weights = ckpt.step_dir(tmp_path, 4) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-10])  # the newest is corrupt
    warnings: list[str] = []
    again = make(toy, tmp_path, warn=warnings.append, total_steps=6)
    assert again.resume() == 2
    assert any("truncated" in w for w in warnings)
    assert any("fresh optimiser moments" in w and "not an exact" in w for w in warnings)
    assert not again.optimizer.state
    assert any(h["trained_samples"] > 0 for h in again.train())


def test_lora_checkpoints_hold_a_merged_folder_and_a_peft_adapter(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("peft")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    kw = {"total_steps": 4, "reference": "lora_base", "lr": 1e-2}
    t = make(toy, tmp_path, **kw)
    t.train()
    path = ckpt.step_dir(tmp_path, 4)
    assert (path / "config.json").is_file()  # a plain model folder, adapters merged in
    assert (path / ckpt.ADAPTER / "adapter_config.json").is_file()
    assert {f"{ckpt.RESUME}/{ckpt.OPTIMIZER}", "adapter/adapter_model.safetensors"} <= listed(path)
    assert f"{ckpt.RESUME}/{ckpt.MASTER}" not in listed(path)  # the adapter is full precision
    merged = AutoModelForCausalLM.from_pretrained(path)
    with_adapter = PeftModel.from_pretrained(toy["model"](), path / ckpt.ADAPTER)
    ids = torch.tensor([[2, 3, 4, 5]])
    with torch.no_grad():
        a = merged(input_ids=ids).logits
        b = with_adapter(input_ids=ids).logits
    assert torch.allclose(a, b, atol=1e-5)
    again = make(toy, tmp_path, **kw)
    assert again.resume() == 4
    trained = {k: v for k, v in t.model.state_dict().items() if "lora" in k}
    restored = again.model.state_dict()
    assert trained and all(torch.equal(v, restored[k]) for k, v in trained.items())


def test_the_trainer_hands_out_its_state_and_takes_back_only_its_own(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    from grpo_core import state as ckpt_state

    a = make(toy, tmp_path, total_steps=2)
    a.train()
    st = a.state()
    assert (st.step, st.model, st.optimizer, st.whole) == (2, a.model, a.optimizer, a.model)
    st.counters.rollouts = -1  # a copy: the trainer's counters are untouched
    assert a.counters.rollouts > 0

    b = make(toy, tmp_path, total_steps=4)
    back = ckpt_state.resume(b.state(), tmp_path, None, print)  # loads into b's objects
    assert back.step == 2 and back.counters == a.counters and b.step == 0
    with pytest.raises(TrainerError, match="handed out"):
        a.load_state(back)  # b's model and optimiser, not a's
    b.load_state(back)
    assert b.step == 2 and b.counters == a.counters
    for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_a_carried_run_continues_moments_schedules_and_reference_exactly(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    """`Trainer.carry` (a night that continues the last): 2 steps, a new trainer on the saved
    weights carrying moments, lr and β schedules (offset 2) and the first weights as reference,
    2 more steps on the next batches = 4 steps in one run, bitwise, with the lr warm-up and the
    β ramp both crossing the boundary; without carry the weights differ."""
    from transformers import LlamaForCausalLM

    from grpo_core.seeds import derive_seed

    kw = {"total_steps": 4, "checkpoint_every": 0, "lr_warmup_steps": 3, "beta": 0.05,
          "beta_start": 0.2, "beta_warmup_steps": 3}  # fmt: skip
    straight = make(toy, tmp_path / "a", **kw)
    first_weights = {k: v.clone() for k, v in straight.model.state_dict().items()}
    straight.train()

    def second(carry: bool) -> Trainer:
        night1 = make(toy, tmp_path / f"n1{carry}", **{**kw, "total_steps": 2})
        night1.train()
        saved = ckpt.step_dir(tmp_path / f"n1{carry}", 2)
        cfg = GRPOConfig(**{**BASE, **kw, "total_steps": 2})
        tok = toy["tokenizer"]()
        model = LlamaForCausalLM.from_pretrained(saved).eval()
        batches = toy["batches"]()
        t = Trainer(
            model, tok, toy["sampler"](model, tok), toy["reward"], lambda s: batches(s + 2),
            cfg, tmp_path / f"n2{carry}", hooks=Hooks(warning=lambda m: None),
        )  # fmt: skip
        t.step_seed = lambda s, r=0: derive_seed(cfg.seed, "step", s + 2, r)  # type: ignore[method-assign]
        if carry:
            assert t.carry(saved, 2, first_weights)
        t.train()
        return t

    carried, fresh = second(True), second(False)
    same = [torch.equal(a, b) for a, b in zip(straight.model.parameters(),
                                              carried.model.parameters(), strict=True)]  # fmt: skip
    assert all(same)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(straight.model.parameters(), fresh.model.parameters(), strict=True)
    )
    assert carried.scheduler.get_last_lr() == straight.scheduler.get_last_lr()


def test_carry_needs_the_newest_checkpoint(toy: dict[str, Any], tmp_path: Path) -> None:
    make(toy, tmp_path, total_steps=4).train()
    t = make(toy, tmp_path / "b")
    assert not t.carry(ckpt.step_dir(tmp_path, 2), 2)  # an older one kept no moments
    assert t.schedule_offset == 0
