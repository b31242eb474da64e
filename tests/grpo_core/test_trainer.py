"""The trainer loop on the toy task: learning, metrics, exact resume, faults, checkpoints, LoRA."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import grpo_core.trainer as trainer_mod
import grpo_core.update as update_mod  # the micro-batch loss calls grpo_loss there
from grpo_core import checkpoint as ckpt
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Item, Scores, Trainer
from tests.grpo_core.test_advantages import slow_advantages

BASE = {
    "lr": 3e-3,
    "max_new_tokens": 3,
    "checkpoint_every": 0,
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
        hooks=Hooks(warning=lambda msg: None),
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
    real = update_mod.grpo_loss
    calls = {"n": 0}

    def nan_loss(*args: Any, **kw: Any) -> Any:
        loss, m = real(*args, **kw)
        calls["n"] += 1
        return loss * math.nan, m

    t = make(toy, tmp_path, total_steps=10, checkpoint_every=5)
    t.train(max_steps=5)
    saved = params(t)
    monkeypatch.setattr(update_mod, "grpo_loss", nan_loss)
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


def test_nan_in_a_later_iteration_refuses_that_update_only(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """num_iterations = 3: iteration 1 steps, iteration 2's loss is NaN. Its optimiser.step()
    never runs, so parameters and Adam state are exactly those iteration 1 left (no copy is
    taken to undo anything); the step counts as skipped and training goes on."""
    t = make(toy, total_steps=12, num_iterations=3)
    t.train(max_steps=4)
    assert t.optimizer.state, "no trained step in 4 steps: the optimiser has no state yet"
    real_loss, real_step = update_mod.grpo_loss, t.optimizer.step
    calls = {"loss": 0}
    after_step: list[tuple[dict[str, torch.Tensor], list[torch.Tensor]]] = []

    def nan_in_iteration_2(*args: Any, **kw: Any) -> Any:
        loss, m = real_loss(*args, **kw)
        calls["loss"] += 1
        return (loss * math.nan if calls["loss"] == 2 else loss), m  # one micro-batch per it.

    def recording_step(*args: Any, **kw: Any) -> Any:
        out = real_step(*args, **kw)
        after_step.append((params(t), optimiser_state(t)))
        return out

    monkeypatch.setattr(update_mod, "grpo_loss", nan_in_iteration_2)
    monkeypatch.setattr(t.optimizer, "step", recording_step)
    skipped = t.counters.skipped_steps
    while calls["loss"] < 2 and t.step < 12:  # up to the first informative step
        out = t.run_step(t.step)
        t.step += 1
    assert calls["loss"] == 2, "no informative step to poison"
    assert len(after_step) == 1  # iteration 1 stepped; iterations 2 and 3 did not
    assert t.counters.skipped_steps == skipped + 1
    assert not out.skipped and math.isfinite(out.metrics["loss"])  # iteration 1's metrics
    kept_params, kept_state = after_step[0]
    assert same(kept_params, params(t))
    now = optimiser_state(t)
    assert len(now) == len(kept_state)
    assert all(torch.equal(a, b) for a, b in zip(kept_state, now, strict=True))
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


class EvenSamples:
    """A sampler's groups without their odd-numbered samples (the ones `half_unknown` leaves
    unjudged): the same step as if the verifier had never seen them."""

    def __init__(self, inner: Any):
        self.inner = inner

    def sample_groups(self, prompts: Any, sizes: Any, **kw: Any) -> list[list[Any]]:
        return [g[0::2] for g in self.inner.sample_groups(prompts, sizes, **kw)]


def even_first_token(items: Any, samples: Any) -> Scores:
    """1 when a completion starts with an even token id: right about half the time at random
    init, so even 4 judged samples of a group are nearly always informative."""
    correct = [s.token_ids[0] % 2 == 0 for s in samples]
    return Scores([float(c) for c in correct], list(correct))


def half_unknown(items: Any, samples: Any) -> Scores:
    """`even_first_token` with every odd-numbered sample unjudged (reward None, as on an error)."""
    s = even_first_token(items, samples)
    return Scores([None if i % 2 else r for i, r in enumerate(s.rewards)], s.correct)


def spy_advantages(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, torch.Tensor]]:
    """Each step's (N,) group ids, known flags, raw rewards, advantages and informative flags."""
    seen: list[dict[str, torch.Tensor]] = []
    real = trainer_mod.step_advantages

    def spy(
        cfg: Any, comps: Any, step: int, flat: Any, group: Any, known: Any, raw: Any, **kw: Any
    ) -> Any:
        adv, informative = real(cfg, comps, step, flat, group, known, raw, **kw)
        seen.append({"group": group, "known": known, "raw": raw, "adv": adv, "inf": informative})
        return adv, informative

    monkeypatch.setattr(trainer_mod, "step_advantages", spy)
    return seen


def applied_gradients(t: Trainer) -> list[list[torch.Tensor]]:
    """The (clipped) gradient of every optimiser step `t` takes, recorded just before it."""
    grads: list[list[torch.Tensor]] = []

    def record(*_: Any) -> None:
        grads.append([torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in t.params])

    t.optimizer.register_step_pre_hook(record)
    return grads


def test_verifier_errors_carry_no_advantage(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unjudged sample gets advantage exactly 0 and adds nothing to the loss or gradient (the
    step equals the same step without it), while the judged samples of its group keep the
    group-relative advantage of their own rewards."""
    seen = spy_advantages(monkeypatch)
    t = make(toy, reward=half_unknown, total_steps=2)
    grads = applied_gradients(t)
    history = t.train()
    assert all(h["verifier_errors"] == 4 * 8 / 2 for h in history)
    for step in seen:
        known, adv, inf = step["known"], step["adv"], step["inf"]
        assert known.tolist() == [True, False] * (4 * 8 // 2)
        assert torch.equal(adv[~known], torch.zeros_like(adv[~known]))  # exactly 0, not ~1e-9
        assert not inf[~known].any()  # so out of the batch and the loss's denominator
        want = slow_advantages(step["raw"][known].tolist(), step["group"][known].tolist(), "grpo")
        assert adv[known].tolist() == pytest.approx(want, rel=1e-6, abs=1e-9)
    trained = [int(step["inf"].sum()) for step in seen]
    assert [h["trained_samples"] for h in history] == trained
    assert trained[0] > 0, "no informative group at step 0: nothing to compare"

    without = make(toy, reward=even_first_token, total_steps=2)  # the unjudged never drawn
    without.sampler = EvenSamples(without.sampler)
    grads_without = applied_gradients(without)
    history_without = without.train()
    assert len(grads) == len(grads_without) == sum(n > 0 for n in trained)
    for step_grads, step_grads_without in zip(grads, grads_without, strict=True):
        for g, g_without in zip(step_grads, step_grads_without, strict=True):
            assert torch.allclose(g, g_without, rtol=1e-5, atol=1e-9)
    for h, h_without in zip(history, history_without, strict=True):
        assert h["loss"] == pytest.approx(h_without["loss"], rel=1e-6, abs=1e-9)
        assert h["trained_samples"] == h_without["trained_samples"]


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
    """Groups of G = 4, 16 and 2 in one step: each is normalised with its own mean and std (a
    slow per-group loop agrees; one pooled group would not) and all of them go into the step's
    single update."""
    cfg = GRPOConfig(**{**BASE, "total_steps": 2})
    model, tok = toy["model"](), toy["tokenizer"]()
    sizes = {"a": 4, "b": 16, "c": 2}
    right = {"a": 1, "b": 5, "c": 1}  # the first k samples of a group are right: every group
    # is informative, with its own mean (1/4, 5/16, 1/2) and std

    def ragged(step: int) -> list[Item]:
        return [Item("a", "A", 4), Item("b", "B", 16), Item("c", "C", 2)]

    def first_k_right(items: Any, samples: Any) -> Scores:
        index: dict[str, int] = {}
        rewards: list[float | None] = []
        for it in items:
            j = index[it.prompt] = index.get(it.prompt, -1) + 1
            rewards.append(float(j < right[it.prompt]))
        return Scores(rewards, [r == 1.0 for r in rewards])

    t = Trainer(model, tok, toy["sampler"](model, tok), first_k_right, ragged, cfg)
    rows: list[tuple[list[str], list[float]]] = []
    to_tensors = t._tensors

    def spy(items: list[Item], samples: Any, adv: torch.Tensor) -> Any:
        rows.append(([it.prompt for it in items], adv.tolist()))
        return to_tensors(items, samples, adv)

    t._tensors = spy  # type: ignore[method-assign]
    updates = applied_gradients(t)
    history = t.train()
    assert history[-1]["rollouts_total"] == 2 * (4 + 16 + 2)

    prompts = [p for p, g in sizes.items() for _ in range(g)]
    rewards = [float(j < right[p]) for p, g in sizes.items() for j in range(g)]
    group = [list(sizes).index(p) for p in prompts]
    want = slow_advantages(rewards, group, "grpo")
    assert want != pytest.approx(slow_advantages(rewards, [0] * len(rewards), "grpo"), abs=1e-3)
    assert len(rows) == len(updates) == 2  # one update per step, holding every group
    for step_prompts, adv in rows:
        assert step_prompts == prompts
        assert adv == pytest.approx(want, rel=1e-6, abs=1e-9)
    assert [h["trained_samples"] for h in history] == [4 + 16 + 2] * 2
