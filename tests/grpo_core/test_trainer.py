"""The trainer loop on the toy task: learning, metrics, exact resume, faults, checkpoints, LoRA."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import grpo_core.trainer as trainer_mod
from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, Scores, Trainer

BASE = {
    "lr": 3e-3,
    "max_new_tokens": 3,
    "checkpoint_every": 0,
    "prompts_per_step": 4,
}
METRICS = {
    "reward_mean", "reward_std", "pass_rate", "zero_var_share", "adv_std", "kl", "beta",
    "clip_low_frac", "clip_high_frac", "entropy", "completion_len", "truncated_share",
    "grad_norm", "skipped_steps", "loss", "time_sample", "time_score", "time_update",
}  # fmt: skip


def make(toy: dict[str, Any], tmp: Path | None = None, reward: Any = None, **kw: Any) -> Trainer:
    cfg = GRPOConfig(**{**BASE, **kw})
    model = toy["model"]()
    tok = toy["tokenizer"]()
    return Trainer(
        model,
        tok,
        toy["sampler"](model, tok),
        reward or toy["reward"],
        toy["batches"](),
        cfg,
        tmp,
        warn=lambda msg: None,
    )


def params(t: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in t.model.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def test_grpo_raises_the_pass_rate_on_the_toy_task(toy: dict[str, Any]) -> None:
    t = make(toy, total_steps=60, beta_schedule="fixed", beta=0.0)
    history = t.train()
    first = sum(h["pass_rate"] for h in history[:10]) / 10
    last = sum(h["pass_rate"] for h in history[-10:]) / 10
    assert last > first + 0.1, (first, last)


def test_every_step_reports_the_documented_metrics(toy: dict[str, Any]) -> None:
    history = make(toy, total_steps=6).train()
    for h in history:
        assert h.keys() >= METRICS
    trained = [h for h in history if h["trained_samples"] > 0]
    assert trained, "no informative step in 6 steps"
    for h in trained:
        assert all(math.isfinite(h[k]) for k in METRICS), h
        assert 0 <= h["zero_var_share"] < 1
        assert h["kl"] >= 0 and h["beta"] > 0
    assert history[-1]["rollouts_total"] == 6 * 4 * 8


def test_resume_reproduces_the_uninterrupted_run_bitwise(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    kw = {"total_steps": 8, "num_iterations": 2, "beta_schedule": "adaptive", "beta": 0.05}
    straight = make(toy, tmp_path / "a", **kw)
    full = straight.train()
    first = make(toy, tmp_path / "b", **kw)
    part1 = first.train(max_steps=4)
    assert ckpt.list_steps(tmp_path / "b")[-1][0] == 4
    second = make(toy, tmp_path / "b", **kw)
    assert second.resume() == 4
    part2 = second.train()
    losses = [h["loss"] for h in full]
    assert losses == [h["loss"] for h in part1 + part2]  # bitwise: exact float equality
    assert [h["kl"] for h in full] == [h["kl"] for h in part1 + part2]
    assert same(params(straight), params(second))


def test_nan_reward_skips_the_step_and_leaves_parameters_untouched(toy: dict[str, Any]) -> None:
    def poisoned(items: Any, samples: Any) -> Scores:
        scores = toy["reward"](items, samples)
        return Scores([math.nan, *scores.rewards[1:]], scores.correct)

    t = make(toy, reward=poisoned, total_steps=3)
    before = params(t)
    history = t.train()
    assert [h["skipped_steps"] for h in history] == [1, 2, 3]
    assert same(before, params(t))
    assert all(bool(torch.isfinite(p).all()) for p in t.model.parameters())


def test_nan_loss_skips_and_no_checkpoint_comes_from_a_bad_state(
    toy: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = trainer_mod.grpo_loss
    calls = {"n": 0}

    def nan_loss(*args: Any, **kw: Any) -> Any:
        loss, m = real(*args, **kw)
        calls["n"] += 1
        return loss * math.nan, m

    t = make(toy, tmp_path, total_steps=10, checkpoint_every=5)
    t.train(max_steps=5)
    saved = params(t)
    monkeypatch.setattr(trainer_mod, "grpo_loss", nan_loss)
    history = t.train()
    assert calls["n"] > 0
    skipped = sum(math.isnan(h["loss"]) for h in history)
    assert skipped > 0 and history[-1]["skipped_steps"] == skipped
    assert same(saved, params(t))  # every update of steps 5..9 was discarded
    with torch.no_grad():
        next(t.model.parameters()).fill_(math.nan)
    with pytest.raises(trainer_mod.TrainerError, match="non-finite weights"):
        t.save_checkpoint()


def optimiser_state(t: Trainer) -> list[torch.Tensor]:
    return [v.clone() for s in t.optimizer.state.values() for v in s.values()]


def test_nan_in_a_later_iteration_restores_parameters_and_optimiser(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """num_iterations = 3: iteration 1 steps the optimiser, iteration 2 fails; both undone."""
    t = make(toy, total_steps=12, num_iterations=3)
    t.train(max_steps=4)
    assert t.optimizer.state, "no trained step in 4 steps: the optimiser has no state yet"
    before, state_before = params(t), optimiser_state(t)
    steps_before = [int(s["step"]) for s in t.optimizer.state.values()]
    real = trainer_mod.grpo_loss
    calls = {"n": 0}

    def nan_in_iteration_2(*args: Any, **kw: Any) -> Any:
        loss, m = real(*args, **kw)
        calls["n"] += 1
        return (loss * math.nan if calls["n"] % 3 == 2 else loss), m  # one micro-batch per it.

    monkeypatch.setattr(trainer_mod, "grpo_loss", nan_in_iteration_2)
    history = t.train(max_steps=4)
    assert calls["n"] >= 2, "no informative step to poison"
    assert history[-1]["skipped_steps"] == sum(math.isnan(h["loss"]) for h in history) > 0
    assert same(before, params(t))
    after = optimiser_state(t)
    assert len(after) == len(state_before)
    assert all(torch.equal(a, b) for a, b in zip(state_before, after, strict=True))
    assert [int(s["step"]) for s in t.optimizer.state.values()] == steps_before
    monkeypatch.setattr(trainer_mod, "grpo_loss", real)  # and training goes on from there
    assert any(h["trained_samples"] > 0 for h in t.train(max_steps=4))


def test_non_finite_gradient_is_skipped(toy: dict[str, Any]) -> None:
    t = make(toy, total_steps=4)
    handle = next(t.model.parameters()).register_hook(lambda g: g * math.inf)
    before = params(t)
    history = t.train()
    handle.remove()
    trained = [h for h in history if not math.isnan(h["loss"]) and h["trained_samples"] > 0]
    assert not trained
    assert history[-1]["skipped_steps"] >= 1
    assert same(before, params(t))


def test_constant_rewards_give_empty_steps_without_updates(toy: dict[str, Any]) -> None:
    def constant(items: Any, samples: Any) -> Scores:
        return Scores([1.0] * len(samples), [True] * len(samples))

    t = make(toy, reward=constant, total_steps=3)
    before = params(t)
    history = t.train()
    assert all(h["zero_var_share"] == 1.0 and h["trained_samples"] == 0 for h in history)
    assert t.counters.empty_steps == 3 and t.counters.skipped_steps == 0
    assert same(before, params(t))


def test_verifier_errors_carry_no_advantage(toy: dict[str, Any]) -> None:
    def half_unknown(items: Any, samples: Any) -> Scores:
        s = toy["reward"](items, samples)
        rewards = [None if i % 2 else r for i, r in enumerate(s.rewards)]
        return Scores(rewards, s.correct)

    history = make(toy, reward=half_unknown, total_steps=2).train()
    assert all(h["verifier_errors"] == 4 * 8 / 2 for h in history)


@pytest.mark.parametrize("share_prefix", [True, False])
def test_micro_batches_give_the_same_update(toy: dict[str, Any], share_prefix: bool) -> None:
    # 3 Adam steps of size ~lr. Other batch shapes round differently (gradients agree to ~5e-7
    # relative); Adam turns that into a visible move only for weights whose gradient is ~0, and
    # by far less than a step. A real difference in the update moves weights by ~lr.
    tol = 1e-2 * BASE["lr"]
    for agg in ("token_mean", "seq_mean", "dr_grpo"):
        kw = {"total_steps": 3, "aggregation": agg, "share_prefix": share_prefix}
        whole = make(toy, **kw)
        whole.train()
        parts = make(toy, micro_batch_size=3, **kw)
        parts.train()
        for k, v in params(whole).items():
            assert torch.allclose(v, params(parts)[k], atol=tol), (agg, k)


def test_checkpoints_keep_the_last_k_and_a_crash_mid_write_keeps_the_previous(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    t = make(toy, tmp_path, total_steps=8, checkpoint_every=2, keep_checkpoints=2)
    t.train(max_steps=6)
    assert [s for s, _ in ckpt.list_steps(tmp_path)] == [4, 6]

    def crash(name: str) -> None:
        if name == "train.checkpoint.mid_write":
            raise KeyboardInterrupt(name)  # what a kill looks like to the code after it

    t.crash_point = crash
    with pytest.raises(KeyboardInterrupt):
        t.train()
    assert [s for s, _ in ckpt.list_steps(tmp_path)] == [4, 6]
    assert list(tmp_path.glob(".tmp-*"))  # the half-written folder is not a checkpoint
    resumed = make(toy, tmp_path, total_steps=8, checkpoint_every=2, keep_checkpoints=2)
    assert resumed.resume() == 6


def test_corrupt_or_truncated_checkpoint_is_refused_and_an_older_one_used(
    toy: dict[str, Any], tmp_path: Path
) -> None:
    t = make(toy, tmp_path, total_steps=4, checkpoint_every=2)
    t.train()
    newest = ckpt.step_dir(tmp_path, 4)
    weights = next(newest.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ckpt.CheckpointError, match="truncated"):
        ckpt.load_state(newest)
    warnings: list[str] = []
    found = ckpt.latest_valid(tmp_path, warnings.append)
    assert found is not None and found[0] == ckpt.step_dir(tmp_path, 2)
    assert len(warnings) == 1 and "truncated" in warnings[0]
    state = ckpt.step_dir(tmp_path, 2) / ckpt.STATE
    state.write_bytes(state.read_bytes()[:-1] + b"x")
    with pytest.raises(ckpt.CheckpointError, match="corrupt"):
        ckpt.load_state(ckpt.step_dir(tmp_path, 2))


def test_incompatible_checkpoint_gives_one_clear_line(toy: dict[str, Any], tmp_path: Path) -> None:
    make(toy, tmp_path, total_steps=2).train()
    cfg = GRPOConfig(**{**BASE, "total_steps": 4})
    tok = toy["tokenizer"]()
    other = toy["model"](hidden=48)
    t = Trainer(
        other, tok, toy["sampler"](other, tok), toy["reward"], toy["batches"](), cfg, tmp_path
    )
    with pytest.raises(ckpt.CheckpointError, match="does not fit this model") as err:
        t.resume()
    assert "\n" not in str(err.value)
    shutil.rmtree(tmp_path)
    with pytest.raises(trainer_mod.TrainerError, match="no usable checkpoint"):
        t.resume()


def test_lora_reference_is_the_base_model(toy: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("peft")
    t = make(toy, tmp_path, total_steps=3, reference="lora_base", lr=1e-2)
    base = {
        k: v.clone() for k, v in t.model.get_base_model().state_dict().items() if "lora" not in k
    }
    history = t.train()
    assert any(h["trained_samples"] > 0 for h in history)
    after = t.model.get_base_model().state_dict()
    assert all(torch.equal(v, after[k]) for k, v in base.items())  # only adapters trained
    merged = ckpt.step_dir(tmp_path, 3)
    assert (merged / "config.json").exists()
    again = make(toy, tmp_path, total_steps=3, reference="lora_base")
    assert again.resume() == 3
    frozen = make(toy, tmp_path, total_steps=3)
    with pytest.raises(ckpt.CheckpointError, match="reference='lora_base'"):
        frozen.resume()


def test_empty_batch_is_an_error(toy: dict[str, Any]) -> None:
    cfg = GRPOConfig(**BASE)
    model, tok = toy["model"](), toy["tokenizer"]()
    t = Trainer(model, tok, toy["sampler"](model, tok), toy["reward"], lambda s: [], cfg)
    with pytest.raises(trainer_mod.TrainerError, match="no items"):
        t.run_step(0)


def test_groups_of_different_sizes_in_one_batch(toy: dict[str, Any]) -> None:
    cfg = GRPOConfig(**{**BASE, "total_steps": 2})
    model, tok = toy["model"](), toy["tokenizer"]()

    def ragged(step: int) -> list[Item]:
        return [Item("a", "A", 4), Item("b", "B", 16), Item("c", "C", 2)]

    t = Trainer(model, tok, toy["sampler"](model, tok), toy["reward"], ragged, cfg)
    history = t.train()
    assert history[-1]["rollouts_total"] == 2 * (4 + 16 + 2)
