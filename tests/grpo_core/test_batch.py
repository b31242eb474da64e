"""Micro-batches by token budget: every part within the budget, the same gradient as one batch."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.batch import (
    PART_OVERHEAD_TOKENS as OVERHEAD,
)
from grpo_core.batch import Batch, build_batch, micro_batches, part_rows, shared_parts
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Item, Sample, Trainer, TrainerError
from tests.grpo_core.conftest import (
    EOS,
    ToySampler,
    ToyTokenizer,
    first_letter_reward,
    toy_batches,
    toy_model,
)

PROMPTS = ("ab", "abcdef", "c", "dcba")


def rows() -> tuple[list[Item], list[Sample]]:
    """Four prompts of different lengths, groups of 4, completions of 1..8 tokens."""
    gen = torch.Generator().manual_seed(0)
    items, samples = [], []
    for prompt in PROMPTS:
        for _ in range(4):
            n = int(torch.randint(1, 9, (1,), generator=gen))
            toks = torch.randint(2, 12, (n,), generator=gen).tolist()
            if n % 2:
                toks[-1] = EOS
            items.append(Item(prompt, "A", 4))
            samples.append(Sample(tuple(toks), "", truncated=toks[-1] != EOS))
    return items, samples


def trainer(**kw: object) -> Trainer:
    model = toy_model(3)
    tok = ToyTokenizer()
    cfg = GRPOConfig(checkpoint_every=0, lr=1e-2, **kw)  # type: ignore[arg-type]
    return Trainer(
        model, tok, ToySampler(model, tok), first_letter_reward, toy_batches(), cfg,
        hooks=Hooks(warning=lambda m: None),
    )  # fmt: skip


def batch(t: Trainer) -> Batch:
    items, samples = rows()
    adv = torch.linspace(-1.0, 1.0, len(items))
    return build_batch(t.tokenizer, items, samples, adv, t.pad_id, t.device)


def cost(part: Batch, share_prefix: bool) -> int:
    if share_prefix:
        assert part.prompt_ids is not None and part.comp_ids is not None
        return part.prompt_ids.numel() + part.comp_ids.numel()
    return part.ids.numel()


@pytest.mark.parametrize("share_prefix", [True, False])
def test_token_budget_bounds_every_micro_batch_and_keeps_every_row(share_prefix: bool) -> None:
    b = batch(trainer())
    budget = 30
    parts = micro_batches(b, 0, budget, share_prefix)
    assert len(parts) > 2
    for part in parts:
        assert cost(part, share_prefix) <= budget or part.ids.shape[0] == 1
    kept = sorted(tuple(r) for p in parts for r in (p.adv[:, None]).tolist())
    assert kept == sorted(tuple(r) for r in b.adv[:, None].tolist())  # each row exactly once
    capped = micro_batches(b, 3, budget, share_prefix)  # both bounds hold together
    assert all(p.ids.shape[0] <= 3 for p in capped) and len(capped) >= len(parts)


@pytest.mark.parametrize("share_prefix", [True, False])
@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "dr_grpo"])
def test_token_budget_gives_the_unsplit_gradient(share_prefix: bool, aggregation: str) -> None:
    grads = []
    for tokens in (0, 30):
        t = trainer(micro_batch_tokens=tokens, share_prefix=share_prefix, aggregation=aggregation)
        ctx = t._step_inputs(0, batch(t))
        assert (len(ctx.parts) == 1) == (tokens == 0)
        metrics = t._backward(ctx)
        assert isinstance(metrics, dict)
        grads.append([p.grad.clone() for p in t.params if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    for whole, split in zip(*grads, strict=True):
        assert torch.allclose(whole, split, atol=1e-6, rtol=1e-5)


def test_engine_logprobs_must_match_the_tokens() -> None:
    t = trainer()
    items, samples = rows()
    samples[0] = Sample(samples[0].token_ids, "", samples[0].truncated, logprobs=(-1.0,) * 99)
    with pytest.raises(TrainerError, match="one log-prob per token"):
        build_batch(t.tokenizer, items, samples, torch.zeros(len(items)), t.pad_id, t.device)


def slow_shared_parts(
    prompt_len: list[int], owner: list[int], comp_len: list[int], size: int, tokens: int
) -> list[list[int]]:
    """The obviously-correct greedy split: re-measure each candidate part from scratch."""
    bounds, start = [0], 0
    for i in range(1, len(owner)):
        used = set(owner[start : i + 1])
        tp = max(prompt_len[o] for o in used)
        cost = len(used) * tp + (i + 1 - start) * max(comp_len[start : i + 1])
        if i - start >= size or (tokens and cost > tokens):
            bounds.append(i)
            start = i
    bounds.append(len(owner))
    return [list(range(s, e)) for s, e in itertools.pairwise(bounds)]


def shared_batch(prompt_len: list[int], owner: list[int], comp_len: list[int]) -> Batch:
    """Only the fields `shared_parts` reads: prompt masks, owners, completion masks."""
    tp, tc = max(prompt_len), max(comp_len)
    prompt_attn = (torch.arange(tp)[None, :] >= tp - torch.tensor(prompt_len)[:, None]).long()
    comp_mask = torch.arange(tc)[None, :] < torch.tensor(comp_len)[:, None]  # (B, Tc)
    n = len(owner)
    zeros = torch.zeros(n, 1, dtype=torch.long)
    return Batch(
        zeros, zeros, zeros[:, 0], comp_mask, torch.zeros(n), torch.zeros(n, dtype=torch.bool),
        prompt_attn=prompt_attn, owner=torch.tensor(owner),
    )  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=1, max_size=6),  # prompt lengths
    st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9)), min_size=1, max_size=300),
    st.integers(1, 400),
    st.sampled_from([0, 5, 20, 60, 200]),
)
def test_shared_parts_match_the_slow_greedy_split(
    prompt_len: list[int], rows_: list[tuple[int, int]], size: int, tokens: int
) -> None:
    """Owners may repeat out of order (a prompt asked twice); budgets from 1 row to none."""
    owner = [o % len(prompt_len) for o, _ in rows_]
    comp_len = [c for _, c in rows_]
    got = [
        p.tolist() for p in shared_parts(shared_batch(prompt_len, owner, comp_len), size, tokens)
    ]
    assert got == slow_shared_parts(prompt_len, owner, comp_len, size, tokens)


def split_cost(
    prompt_len: list[int], owner: list[int], comp_len: list[int], part: list[int]
) -> int:
    """A part's padded tokens, measured from scratch: used prompts × the longest of them + rows ×
    the longest completion, plus the per-part overhead the split counts."""
    used = {owner[r] for r in part}
    longest_prompt = max(prompt_len[o] for o in used)
    return len(used) * longest_prompt + len(part) * max(comp_len[r] for r in part) + OVERHEAD


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=1, max_size=6),  # prompt lengths
    st.lists(st.tuples(st.integers(0, 5), st.integers(1, 60)), min_size=2, max_size=200),
    st.integers(1, 400),
    st.sampled_from([5, 20, 60, 200, 5000]),
)
def test_budget_split_keeps_every_row_once_within_bounds_and_pads_no_more(
    prompt_len: list[int], rows_: list[tuple[int, int]], size: int, tokens: int
) -> None:
    """The split under a budget (`part_rows`, prompt order or length order): each row exactly
    once, at most `size` rows and `tokens` padded tokens a part (or one row alone), and never
    more padded tokens than the prompt-order greedy split."""
    owner = [o % len(prompt_len) for o, _ in rows_]
    comp_len = [c for _, c in rows_]
    b = shared_batch(prompt_len, owner, comp_len)
    parts = [p.tolist() for p in part_rows(b, size, tokens, True)]
    assert sorted(r for p in parts for r in p) == list(range(len(owner)))
    for p in parts:
        padded = split_cost(prompt_len, owner, comp_len, p) - OVERHEAD
        assert len(p) <= size and (padded <= tokens or len(p) == 1)
    greedy = slow_shared_parts(prompt_len, owner, comp_len, size, tokens)
    cost = sum(split_cost(prompt_len, owner, comp_len, p) for p in parts)
    assert cost <= sum(split_cost(prompt_len, owner, comp_len, p) for p in greedy)


def test_a_long_completion_gets_its_own_part_when_the_budget_does_not_bind() -> None:
    """Two groups of four sharing 115-token prompts, one completion cut at 256 tokens: in
    prompt order the whole batch is one part padded to 256 (2,278 tokens); by length the 256-token
    row goes alone and the rest pad to 60 (1,021 tokens)."""
    prompt_len, owner = [115, 115], [0, 0, 0, 0, 1, 1, 1, 1]
    comp_len = [12, 15, 40, 256, 10, 20, 30, 60]
    parts = [
        p.tolist() for p in part_rows(shared_batch(prompt_len, owner, comp_len), 0, 4096, True)
    ]
    assert sorted(map(sorted, parts)) == [[0, 1, 2, 4, 5, 6, 7], [3]]
    padded = sum(split_cost(prompt_len, owner, comp_len, p) - OVERHEAD for p in parts)
    assert padded == 2 * 115 + 7 * 60 + 115 + 256 < 2 * 115 + 8 * 256


def skewed_rows() -> tuple[list[Item], list[Sample]]:
    """Four prompts, groups of 4; in each group one completion 6× longer than the others."""
    gen = torch.Generator().manual_seed(3)
    items, samples = [], []
    for g, prompt in enumerate(PROMPTS):
        for r in range(4):
            n = 18 if r == g % 4 else int(torch.randint(1, 4, (1,), generator=gen))
            toks = torch.randint(2, 12, (n,), generator=gen).tolist()
            toks[-1] = EOS if r % 2 else toks[-1]
            items.append(Item(prompt, "A", 4))
            samples.append(Sample(tuple(toks), "", truncated=toks[-1] != EOS))
    return items, samples


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "dr_grpo"])
def test_length_split_gives_the_whole_batch_gradient(aggregation: str) -> None:
    """A budget that one part would meet, but the length split pads less: several parts, and
    every parameter's gradient equal to the whole batch's (float32 summation order only)."""
    grads, counts = [], []
    for tokens in (0, 1000):
        t = trainer(micro_batch_tokens=tokens, aggregation=aggregation, beta_schedule="fixed")
        items, samples = skewed_rows()
        adv = torch.linspace(-1.0, 1.0, len(items))
        b = build_batch(t.tokenizer, items, samples, adv, t.pad_id, t.device)
        ctx = t._step_inputs(0, b)
        counts.append(len(ctx.parts))
        assert isinstance(t._backward(ctx), dict)
        grads.append(
            {k: p.grad.clone() for k, p in t.model.named_parameters() if p.grad is not None}
        )
    assert counts[0] == 1 and counts[1] > 1
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for k, g in grads[0].items():
        torch.testing.assert_close(grads[1][k], g, rtol=1e-5, atol=1e-6, msg=k)
