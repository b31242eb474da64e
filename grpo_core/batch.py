"""One step's training rows as padded tensors on the model's device, and their micro-batches.

`build_batch` encodes each distinct prompt once and pads: full rows (prompt + completion,
right-padded) for the plain forward, left-padded prompts plus right-padded completions for the
prefix-sharing forward (`grpo_core.logprobs`), and the engine's log-probs when the sampler
reported them. `micro_batches` cuts the batch into parts bounded by `micro_batch_size` rows and
`micro_batch_tokens` padded tokens; the loss is a share-weighted sum over parts
(`grpo_core.update.share`), so the split changes no gradient, only peak memory and how much
padding is computed.

Under a token budget with prefix sharing the split is also chosen for padding: a
part is padded to its longest completion, and a group's completions differ by 10× and more
(one truncated at the budget, the rest a sentence), so most of a prompt-order part can be
padding. `_cheapest_shared_parts` also splits the rows sorted by completion length, cutting
where the padding saved outweighs re-feeding the part's prompts (`_length_parts`, a dynamic
programme over length blocks), and keeps the split with fewer padded tokens.

The advantage is per row (B,), or per completion token (B, Tc) under per-fragment advantages
(`grpo_core.step_advantages.step_token_advantages`); a (N, T) input is cut or zero-padded to Tc.

Test: `.venv/bin/pytest tests/grpo_core/test_batch.py tests/grpo_core/test_trainer_prefix.py -q`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from grpo_core.types import Item, Sample, TrainerError

# Full-row micro-batches group rows of similar length (less padding): a new bucket starts when a
# row is this many times longer than the bucket's shortest and the bucket has this many rows.
BUCKET_STRETCH = 1.25
BUCKET_MIN_ROWS = 32
# Prefix-sharing parts under a token budget: each part costs its padded tokens plus this many
# (the fixed cost of its four model calls and smaller matmuls, in tokens: a guess, measured
# by benchmarks/update_step.py), and rows whose completion lengths are within this ratio of
# each other are never separated (bounds the dynamic programme to ~80 blocks at 8k tokens).
PART_OVERHEAD_TOKENS = 32
LENGTH_STRETCH = 1.125


@dataclass
class Batch:
    """The informative rows of one step, as padded tensors."""

    ids: Tensor  # (B, L) prompt + completion, right-padded
    attn: Tensor  # (B, L)
    starts: Tensor  # (B,) index in the shifted logits of each completion's first token
    comp_mask: Tensor  # (B, Tc)
    adv: Tensor  # (B,) per row, or (B, Tc) per completion token (aligned with comp_mask)
    truncated: Tensor  # (B,) bool
    # each distinct prompt once (prefix sharing): left-padded prompts, and which prompt a row has
    prompt_ids: Tensor | None = None  # (P, Tp)
    prompt_attn: Tensor | None = None  # (P, Tp)
    owner: Tensor | None = None  # (B,) row -> prompt
    comp_ids: Tensor | None = None  # (B, Tc) completion tokens, right-padded
    # the sampling engine's log-probs of the completion tokens (0 where unknown or padding)
    engine_lp: Tensor | None = None  # (B, Tc)
    has_engine: Tensor | None = None  # (B,) bool: this row's engine log-probs are known
    # (B,) bool: replayed rows, sampled by another policy than the step's start: their behaviour
    # log-probs are their engine_lp where has_engine, else the reference's (None: no such row)
    replayed: Tensor | None = None


def padded(
    rows: list[list[int]], pad: int, *, left: bool = False, min_width: int = 0
) -> tuple[Tensor, Tensor]:
    """Token rows as one padded (R, W) long tensor and its 0/1 mask, filled in one assignment.

    The mask's True cells, read row by row, are exactly the rows' tokens in order, so the flat
    concatenation drops into place without a per-row copy.
    """
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (R,)
    width = max(min_width, int(lengths.max()) if len(rows) else 0)
    cols = torch.arange(width)[None, :]  # (1, W)
    mask = cols >= width - lengths[:, None] if left else cols < lengths[:, None]  # (R, W)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    ids[mask] = torch.tensor([t for r in rows for t in r], dtype=torch.long)
    return ids, mask.long()


def _engine_logprobs(samples: Sequence[Sample], width: int) -> tuple[Tensor, Tensor] | None:
    """(B, Tc) engine log-probs (0-padded) and (B,) which rows have them; None if no row has."""
    if all(s.logprobs is None for s in samples):
        return None
    lp = torch.zeros(len(samples), width, dtype=torch.float32)
    for r, s in enumerate(samples):
        if s.logprobs is None:
            continue
        if len(s.logprobs) != len(s.token_ids):
            raise TrainerError(
                f"a sample has {len(s.logprobs)} engine log-probs for {len(s.token_ids)} tokens; "
                "the sampler must report one log-prob per token in token_ids"
            )
        lp[r, : len(s.logprobs)] = torch.tensor(s.logprobs, dtype=torch.float32)
    return lp, torch.tensor([s.logprobs is not None for s in samples])


def _fit_columns(adv: Tensor, width: int) -> Tensor:
    """A (N,) advantage as is; a (N, T) one cut or zero-padded to (N, width)."""
    if adv.dim() == 1:
        return adv
    if adv.shape[1] >= width:
        return adv[:, :width]
    return torch.nn.functional.pad(adv, (0, width - int(adv.shape[1])))  # (N, width)


def build_batch(
    tokenizer: Any,
    items: Sequence[Item],
    samples: Sequence[Sample],
    adv: Tensor,
    pad: int,
    device: torch.device,
) -> Batch:
    """Row i is items[i]'s prompt followed by samples[i]'s tokens, with advantage adv[i]
    ((N,), or (N, T) per completion token)."""
    index: dict[str, int] = {}
    owners = [index.setdefault(it.prompt, len(index)) for it in items]
    encoded = [list(tokenizer(p)["input_ids"]) for p in index]
    comps = [list(s.token_ids) for s in samples]
    ids, attn = padded([encoded[o] + c for o, c in zip(owners, comps, strict=True)], pad)
    comp_ids, comp_mask = padded(comps, pad, min_width=1)  # (B, Tc), right-padded
    # left-padded: every prompt ends at column Tp - 1
    prompt_ids, prompt_attn = padded(encoded, pad, left=True)  # (P, Tp)
    owner = torch.tensor(owners, dtype=torch.long)  # (B,)
    starts = prompt_attn.sum(dim=1)[owner] - 1  # logits at position t predict token t + 1
    truncated = torch.tensor([s.truncated for s in samples])
    engine = _engine_logprobs(samples, int(comp_ids.shape[1]))
    engine_lp, has_engine = engine or (None, None)
    replayed = torch.tensor([s.replayed for s in samples])  # (B,)
    return Batch(
        ids.to(device),
        attn.to(device),
        starts.to(device),
        comp_mask.bool().to(device),
        _fit_columns(adv, int(comp_ids.shape[1])).float().to(device),
        truncated.to(device),
        prompt_ids.to(device),
        prompt_attn.to(device),
        owner.to(device),
        comp_ids.to(device),
        engine_lp.to(device) if engine_lp is not None else None,
        has_engine.to(device) if has_engine is not None else None,
        replayed.to(device) if bool(replayed.any()) else None,
    )


def rows(b: Batch, idx: Tensor, *, cut_prompts: bool = False) -> Batch:
    """The given rows, cut to their own widths, with only the prompts they use.

    `cut_prompts` also drops the prompts' common left padding (token-budget micro-batches).
    """
    width = int(b.attn[idx].sum(dim=1).max())
    comp = b.comp_mask[idx]
    tc = max(1, int(comp.sum(dim=1).max()))
    part = Batch(
        b.ids[idx, :width],
        b.attn[idx, :width],
        b.starts[idx],
        comp[:, :tc],
        b.adv[idx] if b.adv.dim() == 1 else b.adv[idx, :tc],
        b.truncated[idx],
    )
    if b.prompt_ids is not None and b.prompt_attn is not None and b.owner is not None:
        used, part.owner = torch.unique(b.owner[idx], return_inverse=True)
        part.prompt_ids, part.prompt_attn = b.prompt_ids[used], b.prompt_attn[used]
        if cut_prompts:
            keep = int(part.prompt_attn.sum(dim=1).max())
            part.prompt_ids = part.prompt_ids[:, -keep:]
            part.prompt_attn = part.prompt_attn[:, -keep:]
    if b.comp_ids is not None:
        part.comp_ids = b.comp_ids[idx, :tc]
    if b.engine_lp is not None and b.has_engine is not None:
        part.engine_lp, part.has_engine = b.engine_lp[idx, :tc], b.has_engine[idx]
    if b.replayed is not None:
        part.replayed = b.replayed[idx]
    return part


def micro_batches(b: Batch, size: int, tokens: int, share_prefix: bool) -> list[Batch]:
    """The batch as micro-batches of at most `size` rows and `tokens` padded tokens (0 = off).

    Prefix sharing counts each used prompt once and, under a token budget, takes the split of
    fewer padded tokens (`_cheapest_shared_parts`: rows in prompt order, or sorted by length);
    without one it keeps rows in order. Full rows are sorted by length and bucketed
    (`_full_row_parts`). A row alone over the token budget still forms its own micro-batch.
    """
    return [
        rows(b, idx, cut_prompts=tokens > 0) for idx in part_rows(b, size, tokens, share_prefix)
    ]


def part_rows(b: Batch, size: int, tokens: int, share_prefix: bool) -> list[Tensor]:
    """The row indices (into `b`) of each of `micro_batches`' parts, in the same order."""
    if not share_prefix:
        return _full_row_parts(b, size or int(b.ids.shape[0]), tokens)
    if tokens and int(b.ids.shape[0]) > 1:
        return _cheapest_shared_parts(b, size or int(b.ids.shape[0]), tokens)
    return shared_parts(b, size or int(b.ids.shape[0]), tokens)


def _shared_lengths(b: Batch) -> tuple[np.ndarray, np.ndarray]:
    """(2, B) prompt and completion (≥ 1) length of each row, and (B,) its prompt index."""
    assert b.prompt_attn is not None and b.owner is not None
    owner = b.owner.cpu()
    prompt_len = b.prompt_attn.sum(dim=1).cpu()[owner].numpy()  # (B,)
    mask = b.comp_mask.cpu().numpy().view(np.uint8)  # (B, Tc)
    comp_len = mask.sum(axis=1, dtype=np.int64).clip(min=1)  # (B,)
    return np.stack([prompt_len, comp_len]), owner.numpy()


def _padded_cost(lens: np.ndarray, owner: np.ndarray, idx: np.ndarray) -> int:
    """A prefix-sharing part's padded tokens (its prompts cut to the longest, its completions
    padded to the longest) plus `PART_OVERHEAD_TOKENS`."""
    used = len(np.unique(owner[idx]))
    longest = lens[:, idx].max(axis=1)  # (2,)
    return int(used * longest[0] + len(idx) * longest[1]) + PART_OVERHEAD_TOKENS


def _cheapest_shared_parts(b: Batch, size: int, tokens: int) -> list[Tensor]:
    """The prompt-order split (`shared_parts`) or the length-sorted one (`_length_parts`),
    whichever computes fewer padded tokens (`_padded_cost`); the prompt order on a tie."""
    by_prompt = shared_parts(b, size, tokens)
    lens, owner = _shared_lengths(b)
    by_length = _length_parts(lens, owner, size, tokens)
    cost_prompt = sum(_padded_cost(lens, owner, p.cpu().numpy()) for p in by_prompt)
    cost_length = sum(_padded_cost(lens, owner, p) for p in by_length)
    if cost_length >= cost_prompt:
        return by_prompt
    return [torch.from_numpy(p).to(b.ids.device) for p in by_length]


def _length_parts(lens: np.ndarray, owner: np.ndarray, size: int, tokens: int) -> list[np.ndarray]:
    """Rows sorted by completion length (then prompt), cut into ranges by a dynamic programme
    over blocks of rows within `LENGTH_STRETCH` of each other, each range then split greedily
    to `size` rows and the token budget (`_part_end`). A range's estimated cost: its padded
    tokens, its prompts once more per extra budget split, `PART_OVERHEAD_TOKENS` per part."""
    order = np.lexsort((owner, lens[1]))  # (B,) ascending completion length
    srt, own = lens[:, order], owner[order]  # (2, B), (B,)
    bounds = [0]
    while bounds[-1] < len(order):  # blocks: ≤ log(max/min) / log(stretch) of them
        limit = LENGTH_STRETCH * srt[1, bounds[-1]]
        bounds.append(int(np.searchsorted(srt[1], limit, side="right")))
    starts = np.array(bounds[:-1])
    k = len(starts)
    rows_k = np.diff(bounds)  # (K,)
    longest_c = srt[1, np.array(bounds[1:]) - 1]  # (K,) sorted: a block's last row is its longest
    longest_p = np.maximum.reduceat(srt[0], starts)  # (K,)
    prompts = np.unique(own, return_inverse=True)[1]  # (B,) dense prompt ids
    uses = np.zeros((k, int(prompts.max()) + 1), dtype=bool)  # (K, P)
    uses[np.repeat(np.arange(k), rows_k), prompts] = True
    best, cut = np.full(k + 1, np.inf), np.zeros(k + 1, dtype=np.int64)
    best[0] = 0.0
    for s in range(k):  # ranges of blocks s..e-1, every e > s at once
        used = np.logical_or.accumulate(uses[s:], axis=0).sum(axis=1)  # (K - s,)
        tp = np.maximum.accumulate(longest_p[s:])
        rows = np.cumsum(rows_k[s:])
        padded = used * tp + rows * longest_c[s:]
        splits = np.maximum(np.ceil(padded / tokens), np.ceil(rows / size))
        cost = best[s] + padded + (splits - 1) * used * tp + splits * PART_OVERHEAD_TOKENS
        better = cost < best[s + 1 :]
        best[s + 1 :][better], cut[s + 1 :][better] = cost[better], s
    ranges, e = [], k
    while e > 0:
        ranges.append((bounds[cut[e]], bounds[e]))
        e = int(cut[e])
    prev = _previous_same(torch.from_numpy(own)).numpy()  # (B,) in the sorted order
    parts = []
    for lo, hi in reversed(ranges):
        while lo < hi:
            end = _part_end(lo, min(hi, lo + size), tokens, srt, prev)
            parts.append(order[lo:end])
            lo = end
    return parts


def shared_parts(b: Batch, size: int, tokens: int) -> list[Tensor]:
    """Consecutive rows; a part costs used prompts × longest prompt + rows × longest completion.

    Greedy: a part grows until its next row would pass `size` rows or the token budget. The
    cost of every prefix of a candidate window comes from cumulative counts and maxima, and the
    window doubles until the part ends, so the work is linear in the rows (one Python
    iteration per window, not per row).
    """
    assert b.prompt_attn is not None and b.owner is not None
    n = int(b.ids.shape[0])
    index = torch.arange(n, device=b.ids.device)  # (B,); the parts are slices of it
    if not tokens or not n:  # parts of `size` rows (one empty part for no rows)
        return [index[s : s + size] for s in range(0, n, size)] or [index]
    owner = b.owner.cpu()
    prompt_len = b.prompt_attn.sum(dim=1).cpu()[owner].numpy()  # (B,) each row's prompt length
    mask = b.comp_mask.cpu().numpy().view(np.uint8)  # (B, Tc); numpy's row sums scale linearly
    comp_len = mask.sum(axis=1, dtype=np.int64).clip(min=1)  # (B,)
    prev = _previous_same(owner).numpy()  # (B,) the last earlier row with the same prompt, or -1
    lens = np.stack([prompt_len, comp_len])  # (2, B)
    bounds = [0]
    while bounds[-1] < n:
        start = bounds[-1]
        bounds.append(_part_end(start, min(n, start + size), tokens, lens, prev))
    return list(index.split([e - s for s, e in itertools.pairwise(bounds)]))


def _previous_same(owner: Tensor) -> Tensor:
    """(B,) for each row the index of the last earlier row with the same owner, -1 if none."""
    order = torch.argsort(owner, stable=True)  # (B,) rows grouped by owner, in row order
    sorted_owner = owner[order]
    prev_sorted = torch.full_like(order, -1)
    same = sorted_owner[1:] == sorted_owner[:-1]  # (B - 1,)
    prev_sorted[1:] = torch.where(same, order[:-1], prev_sorted[1:])
    return torch.empty_like(order).index_copy_(0, order, prev_sorted)  # (B,)


def _part_end(start: int, limit: int, tokens: int, lens: np.ndarray, prev: np.ndarray) -> int:
    """The row after the part that starts at `start`: at most `limit`, and the first row whose
    inclusion would cost more than `tokens`; the first row always fits. `lens` (2, B): prompt
    and completion lengths per row. (numpy: the windows are small, torch's per-call overhead
    would dominate.)"""
    width = 64
    while True:
        stop = min(limit, start + width)
        used = np.cumsum(prev[start:stop] < start)  # (W,) distinct prompts of rows start..i
        longest = np.maximum.accumulate(lens[:, start:stop], axis=1)  # (2, W) so far
        cost = used * longest[0] + np.arange(1, stop - start + 1) * longest[1]  # (W,) rows ..i
        over = cost[1:] > tokens  # (W - 1,) the rows after the first that would break it
        first = int(over.argmax()) if over.size else 0
        if over.size and over[first]:
            return start + 1 + first
        if stop >= limit:
            return limit
        width *= 2


def _full_row_parts(b: Batch, size: int, tokens: int) -> list[Tensor]:
    """Rows sorted by length, split where a bucket's longest row would exceed `BUCKET_STRETCH` ×
    its shortest (and the bucket holds at least `BUCKET_MIN_ROWS`), at `size` rows, or where
    rows × longest row would pass the token budget."""
    n = int(b.ids.shape[0])
    lengths = b.attn.sum(dim=1)  # (B,)
    order = torch.argsort(lengths, stable=True)
    sorted_len = lengths[order].tolist()
    parts, start = [], 0
    for i in range(1, n + 1):
        full = i - start >= size
        stretch = (
            i < n
            and i - start >= BUCKET_MIN_ROWS
            and sorted_len[i] > BUCKET_STRETCH * max(sorted_len[start], 1)
        )
        over = bool(tokens) and i < n and (i - start + 1) * sorted_len[i] > tokens
        if i == n or full or stretch or over:
            parts.append(order[start:i])
            start = i
    return parts
