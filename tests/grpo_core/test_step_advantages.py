"""Per-fragment (process) advantages against a slow loop; token advantages in the batch, the loss
and the trainer (char → token spans: test_fragments.py).

`advantage="outcome+steps"` adds step_weight × a group-relative advantage per checkable fragment
to the fragment's tokens; "outcome" (the default) must stay bit-identical to the code before.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import grpo_core.update as update_mod  # the micro-batch loss calls grpo_loss there
from grpo_core.advantages import ZERO_VAR_TOL, fragment_advantages
from grpo_core.batch import build_batch, micro_batches
from grpo_core.config import GRPOConfig
from grpo_core.loss import grpo_loss
from grpo_core.rewards import Component
from grpo_core.step_advantages import step_advantages, step_token_advantages
from grpo_core.trainer import Hooks, Item, Sample, Scores, Trainer
from tests.grpo_core.test_advantages import slow_advantages
from tests.grpo_core.test_trainer import applied_gradients, params, same

Frag = tuple[int, int, bool]


class CharTokenizer:
    """One token per character (id = code point); id 0 is an end-of-sequence that decodes to ''."""

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids if i)


def char_sample(text: str) -> Sample:
    return Sample(tuple(ord(ch) for ch in text), text, truncated=False)


# ---------------------------------------------------------------- slow reference


def slow_token_fragment(spans: list[tuple[int, int]], frags: Sequence[Frag]) -> list[int]:
    """Per token: the fragment with the most shared chars (earliest on ties), −1 if none."""
    out = []
    for s, e in spans:
        e = max(e, s + 1)
        best, best_overlap = -1, 0
        for f, (fs, fe, _) in enumerate(frags):
            overlap = min(e, fe) - max(s, fs)
            if overlap > best_overlap:
                best, best_overlap = f, overlap
        out.append(best)
    return out


def slow_step(
    steps: list[Sequence[Frag] | None], gid: list[Any], ddof: int = 0, eps: float = 1e-6
) -> tuple[list[list[float]], list[bool]]:
    """Per sample, each fragment's advantage, and per sample whether its group has a step
    signal. Plain loops: for fragment j, the peers are the group's samples with a fragment j."""
    n = len(steps)
    adv: list[list[float]] = []
    cell_varies = [False] * n
    for i in range(n):
        row = []
        for j, (_, _, c) in enumerate(steps[i] or ()):
            peers = [p for p in range(n) if gid[p] == gid[i] and len(steps[p] or ()) > j]
            cs = [float(steps[p][j][2]) for p in peers]  # type: ignore[index]
            if max(cs) - min(cs) <= ZERO_VAR_TOL:
                row.append(0.0)
                continue
            cell_varies[i] = True
            mean = sum(cs) / len(cs)
            std = math.sqrt(sum((x - mean) ** 2 for x in cs) / (len(cs) - ddof))
            row.append((float(c) - mean) / (std + eps))
        adv.append(row)
    signal = [any(cell_varies[p] for p in range(n) if gid[p] == gid[i]) for i in range(n)]
    return adv, signal


def slow_token_advantages(
    flat: list[Sample],
    group: list[int],
    known: list[bool],
    rewards: list[float],
    steps: list[Sequence[Frag] | None],
    w: float,
) -> tuple[list[list[float]], list[bool]]:
    """Token advantages (outcome + w · fragment's) and informative flags, char tokens."""
    gid: list[Any] = [
        g if k else ("unjudged", i) for i, (g, k) in enumerate(zip(group, known, strict=True))
    ]
    ids = {g: k for k, g in enumerate(dict.fromkeys(gid))}
    outcome = slow_advantages(
        [r if k else 0.0 for r, k in zip(rewards, known, strict=True)],
        [ids[g] for g in gid],
        "grpo",
    )
    frag_adv, signal = slow_step(steps, gid)
    out, informative = [], []
    for i, s in enumerate(flat):
        rs = [rewards[p] for p in range(len(flat)) if gid[p] == gid[i]]
        scale = max(1.0, *(abs(r) for r in rs))  # the tolerance is relative (issue 46)
        informative.append((max(rs) - min(rs) > ZERO_VAR_TOL * scale) or signal[i])
        spans = [(k, k + 1) for k in range(len(s.text))]
        which = slow_token_fragment(spans, steps[i] or ())
        out.append([outcome[i] + w * (frag_adv[i][f] if f >= 0 else 0.0) for f in which])
    return out, informative


def run_fast(
    cfg: GRPOConfig,
    flat: list[Sample],
    group: list[int],
    known: list[bool],
    rewards: list[float],
    steps: Any,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    g = torch.tensor(group)
    k = torch.tensor(known)
    raw = torch.tensor([r if ok else math.nan for r, ok in zip(rewards, known, strict=True)])
    adv, inf = step_advantages(cfg, [Component("reward", 1.0, 0)], 0, flat, g, k, raw)
    return step_token_advantages(cfg, CharTokenizer(), flat, g, k, steps, adv, inf)


STEPS = GRPOConfig(advantage="outcome+steps", step_weight=0.5)


def check(
    flat: list[Sample], group: list[int], known: list[bool], rewards: list[float], steps: Any
) -> None:
    adv, inf, _ = run_fast(STEPS, flat, group, known, rewards, steps)
    want, want_inf = slow_token_advantages(
        flat, group, known, rewards, steps or [None] * len(flat), 0.5
    )
    assert inf.tolist() == want_inf
    for i, row in enumerate(want):
        assert adv[i, : len(row)].tolist() == pytest.approx(row, abs=1e-5), i


# ---------------------------------------------------------------- hand-made groups


def test_ragged_step_counts_and_unjudged_samples_match_the_loop() -> None:
    texts = ["ab+cd=ef", "ab+cd=xy", "ab=", "zzzz", "q1q2", "q1", "q1q2q3"]
    flat = [char_sample(t) for t in texts]
    group = [0, 0, 0, 0, 1, 1, 1]
    known = [True, True, True, False, True, True, True]  # sample 3: verifier error
    rewards = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    steps: list[Sequence[Frag] | None] = [
        ((0, 3, True), (3, 6, True), (6, 8, True)),  # three fragments
        ((0, 3, True), (3, 6, False)),  # two
        ((0, 3, False),),  # one
        ((0, 2, True), (2, 4, False)),  # unjudged: must stay 0 everywhere
        ((0, 2, True), (2, 4, True)),
        ((0, 2, False),),
        None,  # no fragments computed: the outcome advantage on every token
    ]
    check(flat, group, known, rewards, steps)
    adv, inf, m = run_fast(STEPS, flat, group, known, rewards, steps)
    assert adv[3].abs().max() == 0.0  # unjudged
    reward = [Component("reward", 1.0, 0)]
    g, k, r = torch.tensor(group), torch.tensor(known), torch.tensor(rewards)
    outcome, _ = step_advantages(STEPS, reward, 0, flat, g, k, r)
    # index 2 has one sample only -> 0: tokens 6..7 of sample 0 keep the outcome advantage
    assert adv[0, 6:8].tolist() == [outcome[0].item()] * 2
    assert adv[1, 3].item() != outcome[1].item()  # index 1 varies (True / False)
    assert adv[6].tolist() == [outcome[6].item()] * adv.shape[1]  # steps=None
    # group 1's outcomes agree (all 1): its only signal is fragment 0 (True / False)
    assert inf.tolist() == [True, True, True, False, True, True, True]
    assert m["step_signal_share"] == 0.5
    assert m["step_adv_std"] > 0
    assert 0 < m["step_token_share"] < 1


def test_zero_outcome_variance_group_is_informative_only_with_steps() -> None:
    flat = [char_sample(t) for t in ("12+3", "12+4", "9")]
    group, known, rewards = [0, 0, 0], [True] * 3, [0.0, 0.0, 0.0]
    steps: list[Sequence[Frag] | None] = [
        ((0, 2, True), (2, 4, True)),
        ((0, 2, False), (2, 4, True)),
        None,
    ]
    adv, inf, _ = run_fast(GRPOConfig(), flat, group, known, rewards, steps)
    assert adv.dim() == 1 and not inf.any() and adv.abs().max() == 0.0
    adv, inf, m = run_fast(STEPS, flat, group, known, rewards, steps)
    assert inf.all() and m["step_signal_share"] == 1.0
    # fragment 0: c = 1, 0 -> mean 0.5, std 0.5 -> ±0.5 / (0.5 + eps), times w = 0.5;
    # fragment 1 agrees (0); sample 2 has no fragments and outcome advantage 0
    assert adv[0, :2].tolist() == pytest.approx([0.5 * 0.5 / (0.5 + 1e-6)] * 2)
    assert adv[1, :2].tolist() == pytest.approx([-0.5 * 0.5 / (0.5 + 1e-6)] * 2)
    assert adv[:, 2:].abs().max() == 0.0 and adv[2].abs().max() == 0.0
    check(flat, group, known, rewards, steps)


def test_outcome_mode_returns_its_inputs_and_no_metric() -> None:
    adv, inf = torch.tensor([0.5, -0.5]), torch.tensor([True, True])
    flat = [char_sample("a"), char_sample("b")]
    out = step_token_advantages(
        GRPOConfig(), None, flat, torch.tensor([0, 0]), inf, [((0, 1, True),)] * 2, adv, inf
    )
    assert out[0] is adv and out[1] is inf and out[2] == {}


def test_steps_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError, match=r"Scores\.steps has 1 entries for 2 samples"):
        run_fast(
            STEPS, [char_sample("a"), char_sample("b")], [0, 0], [True, True], [1.0, 0.0], [None]
        )


@st.composite
def groups_with_steps(draw: st.DrawFn) -> tuple[Any, ...]:
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    group = [g for g, n in enumerate(sizes) for _ in range(n)]
    flat, known, rewards, steps = [], [], [], []
    for _ in group:
        text = draw(st.text(alphabet="ab+=1", max_size=10))
        flat.append(char_sample(text))
        known.append(draw(st.booleans()) or draw(st.booleans()))
        rewards.append(draw(st.sampled_from([0.0, 1.0, 0.5])))
        cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=5)))
        frags = tuple((a, b, draw(st.booleans())) for a, b in itertools.pairwise(cuts))
        steps.append(None if draw(st.integers(0, 5)) == 0 else frags)
    return flat, group, known, rewards, steps


@settings(max_examples=60, deadline=None)
@given(groups_with_steps())
def test_vectorised_token_advantages_match_the_slow_loop(case: tuple[Any, ...]) -> None:
    check(*case)


def test_fragment_advantages_use_the_configured_std() -> None:
    c = torch.tensor([1.0, 0.0, 0.0, 1.0])
    g, j = torch.tensor([0, 0, 0, 1]), torch.tensor([0, 0, 0, 0])
    adv, inf = fragment_advantages(c, g, j, ddof=1, eps=0.0)
    std = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    assert adv[:3].tolist() == pytest.approx([(2 / 3) / std, -(1 / 3) / std, -(1 / 3) / std])
    assert inf.tolist() == [True, True, True, False] and adv[3] == 0.0


# ---------------------------------------------------------------- batch and loss


def test_token_advantages_broadcast_from_rows_give_the_same_loss_bitwise() -> None:
    torch.manual_seed(0)
    logp = torch.randn(3, 5, requires_grad=True)
    old = (logp + 0.1 * torch.randn(3, 5)).detach()
    adv = torch.tensor([1.0, -0.5, 0.25])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]).bool()
    inf = torch.tensor([True, True, False])
    trunc = torch.tensor([False, True, False])
    grads = []
    for a, i in ((adv, inf), (adv[:, None].expand(3, 5).clone(), inf)):
        loss, met = grpo_loss(logp, old, a, mask, i, truncated=trunc, ref_logp=old, beta=0.1)
        (g,) = torch.autograd.grad(loss, logp)
        grads.append((loss.detach(), g, met))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert grads[0][2] == grads[1][2]


def test_build_batch_carries_token_advantages_through_micro_batches() -> None:
    tok_call = lambda p: {"input_ids": [ord(c) for c in p]}  # noqa: E731
    samples = [char_sample("abc"), char_sample("a"), char_sample("ab")]
    items = [Item("p", "", 3), Item("p", "", 3), Item("q", "", 3)]
    adv = torch.arange(15, dtype=torch.float32).reshape(3, 5)  # wider than the completions
    b = build_batch(tok_call, items, samples, adv, 0, torch.device("cpu"))
    assert b.adv.shape == b.comp_mask.shape == (3, 3) and torch.equal(b.adv, adv[:, :3])
    parts = micro_batches(b, 1, 0, True)
    assert [p.adv.tolist() for p in parts] == [[[0.0, 1.0, 2.0]], [[5.0]], [[10.0, 11.0]]]
    narrow = build_batch(tok_call, items, samples, adv[:, :2], 0, torch.device("cpu"))
    assert narrow.adv[:, 2].tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- config


def test_config_refuses_unknown_modes_and_bad_weights() -> None:
    assert GRPOConfig().advantage == "outcome" and GRPOConfig().step_weight == 0.5
    with pytest.raises(
        ValueError, match=r"advantage must be one of \['outcome', 'outcome\+steps'\], got 'steps'"
    ):
        GRPOConfig(advantage="steps")  # type: ignore[arg-type]
    for bad in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="step_weight"):
            GRPOConfig(step_weight=bad)


# ---------------------------------------------------------------- trainer


def with_steps(reward: Any) -> Any:
    """`reward` plus one fragment per character; a fragment is correct when upper case."""

    def fn(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        s = reward(items, samples)
        steps = [tuple((k, k + 1, ch.isupper()) for k, ch in enumerate(x.text)) for x in samples]
        return Scores(s.rewards, s.correct, steps)

    return fn


def even_first(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    correct = [bool(s.token_ids) and s.token_ids[0] % 2 == 0 for s in samples]
    return Scores([float(c) for c in correct], list(correct))


def never(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    return Scores([0.0] * len(samples), [False] * len(samples))


def make(toy: dict[str, Any], reward: Any, **kw: Any) -> Trainer:
    cfg = GRPOConfig(lr=3e-3, max_new_tokens=3, checkpoint_every=0, **kw)
    model, tok = toy["model"](), toy["tokenizer"]()
    return Trainer(
        model,
        tok,
        toy["sampler"](model, tok),
        reward,
        toy["batches"](),
        cfg,
        None,
        hooks=Hooks(warning=lambda m: None),
    )


def test_outcome_mode_is_bit_identical_with_or_without_steps(toy: dict[str, Any]) -> None:
    runs = []
    for reward in (even_first, with_steps(even_first)):
        t = make(toy, reward)
        history = t.train(3)
        runs.append((params(t), [h["loss"] for h in history], set(history[0])))
    assert same(runs[0][0], runs[1][0]) and runs[0][1] == runs[1][1]
    assert runs[0][2] == runs[1][2] and not {"step_signal_share", "step_adv_std"} & runs[0][2]


def test_steps_mode_without_fragments_trains_like_outcome_mode(toy: dict[str, Any]) -> None:
    a, b = make(toy, even_first), make(toy, even_first, advantage="outcome+steps")
    ha, hb = a.train(3), b.train(3)
    assert same(params(a), params(b)) and [h["loss"] for h in ha] == [h["loss"] for h in hb]
    assert all(h["step_signal_share"] == 0.0 and h["step_adv_std"] == 0.0 for h in hb)


Seen = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def logp_grads(monkeypatch: pytest.MonkeyPatch) -> Seen:
    """Each loss call's (advantage, completion mask, d loss / d logp)."""
    seen: Seen = []
    real = update_mod.grpo_loss

    def spy(logp: torch.Tensor, old: torch.Tensor, adv: torch.Tensor, *a: Any, **kw: Any) -> Any:
        def hook(g: torch.Tensor) -> None:
            seen.append((adv.detach().clone(), a[0].clone(), g.clone()))

        logp.register_hook(hook)
        return real(logp, old, adv, *a, **kw)

    monkeypatch.setattr(update_mod, "grpo_loss", spy)
    return seen


def test_steps_change_the_gradient_exactly_on_fragment_tokens(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = logp_grads(monkeypatch)
    kw = {"reference": "none", "beta": 0.0, "beta_schedule": "fixed", "total_steps": 1}
    make(toy, with_steps(even_first), **kw).train()
    ((a_out, mask, g_out),) = seen
    seen.clear()
    t = make(toy, with_steps(even_first), advantage="outcome+steps", step_weight=0.5, **kw)
    hist = t.train()
    ((a_steps, mask_steps, g_steps),) = seen
    assert a_out.dim() == 1 and a_steps.shape == mask.shape, "the same rows in both modes"
    assert torch.equal(mask, mask_steps)
    moved = ((a_steps - a_out[:, None]).abs() > 1e-6) & mask  # (B, T) fragment signal
    assert moved.any() and (mask & ~moved).any()
    assert torch.equal(g_steps[~moved], g_out[~moved])  # bitwise where no fragment signal
    assert (g_steps[moved] != g_out[moved]).all()
    n = mask.sum()  # token_mean at ratio 1: d loss / d logp = −A / valid tokens
    assert torch.allclose(g_out, -a_out[:, None] * mask / n, atol=1e-7)
    assert torch.allclose(g_steps, -a_steps * mask / n, atol=1e-7)
    assert hist[0]["step_token_share"] > 0 and hist[0]["step_adv_std"] > 0


def test_groups_with_only_a_step_signal_are_trained(toy: dict[str, Any]) -> None:
    plain = make(toy, with_steps(never)).train(2)
    assert all(h["trained_samples"] == 0 for h in plain)  # every outcome agrees: nothing to learn
    t = make(toy, with_steps(never), advantage="outcome+steps")
    before = params(t)
    grads = applied_gradients(t)
    hist = t.train(2)
    assert all(h["trained_samples"] > 0 and h["step_signal_share"] > 0 for h in hist), hist
    assert grads and not same(before, params(t))


@pytest.mark.parametrize(("coef", "start", "step", "computed"), [
    (0.0, 0, 5, False),  # weight 0: off
    (0.5, 10, 5, False),  # not started yet
    (0.5, 10, 10, True),
])  # fmt: skip
def test_an_inactive_reward_component_is_not_computed(
    monkeypatch: pytest.MonkeyPatch, coef: float, start: int, step: int, computed: bool
) -> None:
    import grpo_core.step_advantages as scoring

    calls: list[int] = []
    real = scoring.repetition_penalty

    def counted(token_ids: Any, ngram: int = 3) -> torch.Tensor:
        calls.append(len(token_ids))
        return real(token_ids, ngram)

    monkeypatch.setattr(scoring, "repetition_penalty", counted)
    cfg = GRPOConfig(repetition_coef=coef, repetition_start_step=start)
    comps = [Component("reward", 1.0, 0), Component("repetition", coef, start)]
    flat = [char_sample(t) for t in ("aaaa", "abcd", "abab", "dcba")]
    raw = torch.tensor([1.0, 0.0, 1.0, 0.0])
    g, k = torch.tensor([0, 0, 0, 0]), torch.ones(4, dtype=torch.bool)
    adv, _ = step_advantages(cfg, comps, step, flat, g, k, raw)
    assert calls == ([4] if computed else [])
    plain, _ = step_advantages(cfg, comps[:1], step, flat, g, k, raw)
    assert torch.equal(adv, plain) != computed  # the penalty changes the advantages when on
