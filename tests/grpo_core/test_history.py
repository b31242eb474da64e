"""Replayed curation samples and the GRESO-style zero-variance skip (grpo_core.history)."""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace
from typing import Any

import pytest
import torch

from grpo_core.config import GRPOConfig
from grpo_core.history import (
    ZeroVarSkip,
    replay_curation,
    skip_zero_variance,
    with_behaviour_logprobs,
)
from grpo_core.trainer import Item, Sample, Scores, Trainer, TrainerError


def cfg(**kw: Any) -> GRPOConfig:
    values = {"beta": 0.02, "beta_schedule": "fixed", **kw}
    return GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, total_steps=4, **values)


class Fixed:
    """A sampler that returns given completions (ids per prompt), whatever the weights."""

    def __init__(self, groups: dict[str, list[Sample]]):
        self.groups, self.calls = groups, 0

    def sample_groups(self, prompts: Any, sizes: Any, **_: Any) -> list[list[Sample]]:
        self.calls += 1
        return [list(self.groups[p]) for p in prompts]


def completions() -> dict[str, list[Sample]]:
    """Informative groups of 4 for "a" and "b" (first letter right in two of four)."""
    tok = "  abcdefABCD"  # VOCAB[i] for i ≥ 2, see conftest
    ids = {"A": (8, 1), "B": (9, 1), "c": (4, 1), "d": (5, 2, 3)}
    out = {}
    for p, right in (("a", "A"), ("b", "B")):
        group = [right, "c", right, "d"]
        out[p] = [Sample(ids[x], "".join(tok[i] for i in ids[x] if i > 1), ids[x][-1] != 1)
                  for x in group]  # fmt: skip
    return out


def two_prompts(step: int) -> list[Item]:
    return [Item("a", "A", 4, key="a"), Item("b", "B", 4, key="b")]


def test_replay_at_step_0_weights_are_exactly_1_and_the_loss_is_the_fresh_groups(
    toy: dict[str, Any],
) -> None:
    groups = completions()
    losses, params = [], []
    for replaying in (False, True):
        model, tok = toy["model"](), toy["tokenizer"]()
        sampler = Fixed(groups)
        collector = replay_curation(groups) if replaying else None
        t = Trainer(model, tok, sampler, toy["reward"], two_prompts, cfg(), collector=collector)
        m = t.run_step(0).metrics
        losses.append(m["loss"])
        params.append(torch.cat([p.detach().flatten() for p in t.model.parameters()]))
        if replaying:
            assert sampler.calls == 0  # nothing sampled: both groups replayed
            assert m["rollouts"] == 0 and m["replayed_rollouts"] == 8
            assert m["logprob_mismatch"] == 0.0  # π_θ = π_ref token by token: every weight 1
            assert m["is_weight_mean"] == 1.0 and m["is_clipped_frac"] == 0.0
        else:
            assert m["rollouts"] == 8 and "logprob_mismatch" not in m
    assert losses[0] == losses[1]
    assert torch.equal(params[0], params[1])  # the same update, bit for bit


def test_replay_only_on_a_prompts_first_visit(toy: dict[str, Any]) -> None:
    groups = completions()
    model, tok = toy["model"](), toy["tokenizer"]()
    sampler = Fixed(groups)
    t = Trainer(model, tok, sampler, toy["reward"], two_prompts, cfg(),
                collector=replay_curation(groups))  # fmt: skip
    first, second = t.run_step(0).metrics, t.run_step(1).metrics
    assert (first["replayed_rollouts"], first["rollouts"]) == (8, 0)
    assert (second["replayed_rollouts"], second["rollouts"]) == (0, 8)
    assert sampler.calls == 1
    # after one update the policy moved: the replay of a later run's step 0 would weigh ≠ 1,
    # but a fresh trainer whose first step is 1 still replays there (first visit since start=1)
    t2 = Trainer(toy["model"](), tok, Fixed(groups), toy["reward"], two_prompts, cfg(),
                 collector=replay_curation(groups, start=1))  # fmt: skip
    assert t2.run_step(1).metrics["replayed_rollouts"] == 8


@pytest.mark.parametrize("extra", [1, 3, 4, 9])
def test_a_stored_group_larger_than_g_replays_its_latest_g(toy: dict[str, Any], extra: int) -> None:
    """A screen then a refine of the same prompt are stored as one group of more than G: the
    replay trains the latest G of them (the refine), so the update is the curriculum's size."""
    groups = completions()
    screen = [Sample((6, 1), "e", False)] * extra  # an earlier screen, stored first
    stored = {k: screen + g for k, g in groups.items()}
    model, tok = toy["model"](), toy["tokenizer"]()
    seen: list[list[str]] = []

    def reward(items: Any, samples: Any) -> Scores:
        seen.append([s.text for s in samples])
        return toy["reward"](items, samples)

    t = Trainer(model, tok, Fixed(groups), reward, two_prompts, cfg(),
                collector=replay_curation(stored))  # fmt: skip
    m = t.run_step(0).metrics
    assert m["replayed_rollouts"] == 8 and m["rollouts"] == 0
    assert seen[0] == [s.text for k in ("a", "b") for s in groups[k]]


def test_replay_without_a_reference_is_refused(toy: dict[str, Any]) -> None:
    groups = completions()
    model, tok = toy["model"](), toy["tokenizer"]()
    t = Trainer(
        model, tok, Fixed(groups), toy["reward"], two_prompts,
        cfg(reference="none", beta=0.0), collector=replay_curation(groups),
    )  # fmt: skip
    with pytest.raises(TrainerError, match="reference log-probs"):
        t.run_step(0)


def test_skip_probability_grows_with_the_streak_and_keeps_a_floor() -> None:
    s = ZeroVarSkip(rate=0.5, max_skip=0.9)
    ps = [s.p_skip(k) for k in range(8)]
    assert ps[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(ps))
    assert max(ps) < 0.9
    # over many keys, a long streak is skipped at ≈ its probability, never always
    s.streaks = {f"k{i}": 20 for i in range(2000)}
    share = sum(s.skips(f"k{i}", 3) for i in range(2000)) / 2000
    assert 0.86 < share < 0.94
    with pytest.raises(ValueError, match="re-explored"):
        ZeroVarSkip(max_skip=1.0)


def scores(rewards: list[float]) -> Scores:
    """A group's scores, right where the reward is (about) 1."""
    return Scores([float(r) for r in rewards], [r >= 1.0 for r in rewards])


def test_observe_extends_and_resets_streaks() -> None:
    s = ZeroVarSkip(streaks={"a": 2, "b": 3})
    items = [Item("a", "A", 8, key="a"), Item("b", "B", 8, key="b"), Item("c", "C", 8, key="c")]
    parts = [scores([0.0] * 8), scores([0.0] * 7 + [1.0]), scores([1.0] * 7 + [1.0 + 1e-9])]
    s.observe(items, parts, 1e-6)
    assert s.streaks == {"a": 3, "b": 0, "c": 1}


def test_a_small_screen_adds_its_share_of_a_full_group() -> None:
    """Issue 46 point 6: one 0/4 screen is half the evidence of a 0/8 group (P(0/4 | p = 0.15)
    = 0.52), so it adds half a visit to the streak, not a whole one (p_skip 0.45)."""
    s = ZeroVarSkip()
    items = [Item("s", "S", 4, key="s"), Item("t", "T", 8, key="t")]
    s.observe(items, [scores([0.0] * 4), scores([0.0] * 8)], 1e-6)
    assert s.streaks == {"s": 0.5, "t": 1}
    assert s.p_skip(s.streaks["s"]) < s.p_skip(s.streaks["t"]) == pytest.approx(0.45)
    assert s.p_skip(0.5) == pytest.approx(0.9 * (1 - 0.5**0.5))
    flags = ZeroVarSkip()  # the ledger's visits: sizes where the caller knows them
    flags.observe_flags(["s", "s", "t", "u"], [True, True, True, True], [4, 2, 32, None])
    assert flags.streaks == {"s": 0.75, "t": 1, "u": 1}  # ≥ 8 (or unknown): one whole visit
    flags.observe_flags(["s"], [False], [4])
    assert flags.streaks["s"] == 0


def test_full_groups_count_exactly_as_before() -> None:
    """A history of groups of 8 (or more) gives the integer streaks and p_skip of before."""
    s = ZeroVarSkip(rate=0.5, max_skip=0.9)
    flat, mixed, big = scores([0.0] * 8), scores([1.0] + [0.0] * 7), scores([1.0] * 16)
    visits = [("a", flat), ("b", flat), ("a", flat), ("a", big), ("b", mixed), ("a", flat)]
    for key, part in visits:
        s.observe([Item(key, key, len(part.rewards), key=key)], [part], 1e-6)
    assert s.streaks == {"a": 4, "b": 0}
    assert all(type(v) is int for v in s.streaks.values())
    assert s.p_skip(s.streaks["a"]) == 0.9 * (1.0 - 0.5**4)
    ints = ZeroVarSkip()
    ints.observe_flags(["a", "a"], [True, True])  # no sizes: whole visits, as before
    assert ints.streaks == {"a": 2} and type(ints.streaks["a"]) is int


def test_skipped_prompts_are_counted_and_cost_nothing(toy: dict[str, Any]) -> None:
    groups = completions()
    groups = {**groups, "a": [replace(x, token_ids=(4, 1), text="c") for x in groups["a"]]}
    skip = ZeroVarSkip(streaks={"a": 50}, rate=1.0, max_skip=0.99, seed=0)
    model, tok = toy["model"](), toy["tokenizer"]()
    t = Trainer(model, tok, Fixed(groups), toy["reward"], two_prompts, cfg(),
                collector=skip_zero_variance(skip))  # fmt: skip
    history = [t.run_step(s).metrics for s in range(4)]
    skipped = [h["skipped_zero_var"] for h in history]
    # "a" is skipped with probability 0.99 at each step (its draws are fixed by (seed, step, key))
    expected = [float(skip.skips("a", s)) for s in range(4)]
    assert skipped == expected and sum(skipped) >= 3
    for h, sk in zip(history, skipped, strict=True):
        assert h["rollouts"] == 4 * (2 - sk)  # only the prompts sampled are paid for
    assert skip.streaks["b"] == 0  # "b" stays informative


def _moved_reference(t: Trainer) -> None:
    """Make the trainer's reference differ from its policy, as a later night's does (the
    reference stays the base weights while training moved the policy)."""
    ref = copy.deepcopy(t.model).eval().requires_grad_(False)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    t.ref_model = t.policy.ref_model = ref


def test_replay_with_behaviour_logprobs_weighs_by_the_sampling_weights(
    toy: dict[str, Any],
) -> None:
    """Samples drawn from the current weights, not the reference's: with their behaviour
    log-probs the IS weights are 1 and the update is the fresh-sample update; weighed by the
    reference instead (what replay did before) the update differs."""
    groups, prompts = completions(), {"a": "a", "b": "b"}
    params, metrics = {}, {}
    for mode in ("fresh", "behaviour", "reference"):
        torch.manual_seed(0)
        model, tok = toy["model"](), toy["tokenizer"]()
        stored = groups
        if mode == "behaviour":
            stored = with_behaviour_logprobs(model, tok, cfg(), prompts, groups)
            samples = [x for g in stored.values() for x in g]
            assert all(len(x.logprobs or ()) == len(x.token_ids) for x in samples)
        collector = None if mode == "fresh" else replay_curation(stored)
        t = Trainer(model, tok, Fixed(groups), toy["reward"], two_prompts, cfg(),
                    collector=collector)  # fmt: skip
        _moved_reference(t)
        metrics[mode] = t.run_step(0).metrics
        params[mode] = torch.cat([p.detach().flatten() for p in t.model.parameters()])
    start = torch.cat([p.detach().flatten() for p in toy["model"]().parameters()])
    step = (params["fresh"] - start).norm()
    assert step > 0
    assert (params["behaviour"] - params["fresh"]).norm() < 1e-4 * step
    assert (params["reference"] - params["fresh"]).norm() > 1e-2 * step
    assert metrics["behaviour"]["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert abs(metrics["reference"]["is_weight_mean"] - 1.0) > 1e-3
    assert metrics["behaviour"]["replayed_rollouts"] == 8


def test_replay_with_behaviour_logprobs_needs_no_reference(toy: dict[str, Any]) -> None:
    model, tok = toy["model"](), toy["tokenizer"]()
    stored = with_behaviour_logprobs(model, tok, cfg(), {"a": "a", "b": "b"}, completions())
    t = Trainer(
        model, tok, Fixed(completions()), toy["reward"], two_prompts,
        cfg(reference="none", beta=0.0), collector=replay_curation(stored),
    )  # fmt: skip
    m = t.run_step(0).metrics
    assert m["replayed_rollouts"] == 8 and m["is_weight_mean"] == pytest.approx(1.0, abs=1e-5)


def test_replay_reports_which_groups_selected_their_prompt_and_which_were_flat(
    toy: dict[str, Any],
) -> None:
    """Issue 46 point 5: each step counts its replayed groups, those that were the samples
    that selected their prompt (`selecting`; None: all), and the zero-variance ones among
    replayed and fresh groups, so a run can tell its replay's selection bias."""
    groups = completions()
    flat_b = [replace(x, token_ids=(4, 1), text="c") for x in groups["b"]]  # all wrong: flat
    stored = {"a": groups["a"], "b": flat_b}
    for selecting, expected in ((None, 2.0), ({"a"}, 1.0)):
        model, tok = toy["model"](), toy["tokenizer"]()
        t = Trainer(model, tok, Fixed(groups), toy["reward"], two_prompts, cfg(),
                    collector=replay_curation(stored, selecting=selecting))  # fmt: skip
        first, second = t.run_step(0).metrics, t.run_step(1).metrics
        assert (first["replayed_groups"], first["replayed_flat_groups"]) == (2.0, 1.0)
        assert first["replayed_selecting_groups"] == expected
        assert (first["fresh_groups"], first["fresh_flat_groups"]) == (0.0, 0.0)
        assert (second["replayed_groups"], second["replayed_selecting_groups"]) == (0.0, 0.0)
        assert (second["fresh_groups"], second["fresh_flat_groups"]) == (2.0, 0.0)
