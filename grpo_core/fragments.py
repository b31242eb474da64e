"""Char spans of a completion's tokens, and which checkable fragment each token belongs to.

The step verifier reports fragments of `Sample.text` as char ranges (`Scores.steps`); the loss
works on `Sample.token_ids`. `token_char_spans` finds each token's [start, end) in the text
from the tokenizer alone (no re-encoding: the sampled ids are what is trained on):

- fast path: every token decoded on its own (one `batch_decode` call); used when the pieces,
  joined, are the text or a prefix of it (char-level tokenizers, most byte-level BPE text);
- otherwise every prefix ids[:k+1] is decoded (one call) and token k ends where that prefix
  stops agreeing with the text (a running max). This covers SentencePiece's dropped leading
  space, tokenisation-space clean-up and a character split over several byte tokens: the
  tokens before the one that completes it get an empty span.

Special tokens (end of sequence) decode to nothing. `token_fragments` gives each token the
index of the fragment it overlaps (most overlap, earliest on a tie; an empty span counts as its
next char) or −1.

Test: `.venv/bin/pytest tests/grpo_core/test_step_advantages.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

Fragment = tuple[int, int, bool]  # (char_start, char_end, correct), as in `Scores.steps`


def _decode_all(tokenizer: Any, rows: list[list[int]]) -> list[str]:
    """Each row decoded without special tokens; falls back to `decode` for minimal tokenizers."""
    if hasattr(tokenizer, "batch_decode"):
        return [str(t) for t in tokenizer.batch_decode(rows, skip_special_tokens=True)]
    try:
        return [str(tokenizer.decode(r, skip_special_tokens=True)) for r in rows]
    except TypeError:  # a decode without the keyword (test tokenizers)
        return [str(tokenizer.decode(r)) for r in rows]


def _agreeing_length(piece: str, text: str) -> int:
    """Length of the common prefix of `piece` and `text` (characters, not path parts)."""
    if text.startswith(piece):
        return len(piece)
    n = min(len(piece), len(text))
    return next((i for i in range(n) if piece[i] != text[i]), n)


def token_char_spans(tokenizer: Any, token_ids: Sequence[int], text: str) -> Tensor:
    """(T, 2) long: [start, end) in `text` of each token of `token_ids` (clipped to the text)."""
    ids = list(token_ids)
    if not ids:
        return torch.zeros(0, 2, dtype=torch.long)
    pieces = _decode_all(tokenizer, [[t] for t in ids])
    if text.startswith("".join(pieces)):
        ends = torch.tensor([len(p) for p in pieces], dtype=torch.long).cumsum(0)  # (T,)
    else:
        prefixes = _decode_all(tokenizer, [ids[: k + 1] for k in range(len(ids))])
        agree = torch.tensor([_agreeing_length(p, text) for p in prefixes], dtype=torch.long)
        ends = torch.cummax(agree, dim=0).values  # (T,)
    ends = ends.clamp(max=len(text))  # (T,)
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])  # (T,)
    return torch.stack([starts, ends], dim=1)  # (T, 2)


def token_fragments(spans: Tensor, fragments: Sequence[Fragment]) -> Tensor:
    """(T,) long: index of the fragment each token overlaps most (earliest on ties), else −1."""
    if not fragments or spans.numel() == 0:
        return torch.full((spans.shape[0],), -1, dtype=torch.long)
    frag = torch.tensor([(s, e) for s, e, _ in fragments], dtype=torch.long)  # (F, 2)
    if bool((frag[:, 0] < 0).any() or (frag[:, 1] < frag[:, 0]).any()):
        raise ValueError(f"fragments need 0 ≤ char_start ≤ char_end, got {list(fragments)}")
    start = spans[:, :1]  # (T, 1)
    end = torch.maximum(spans[:, 1:], start + 1)  # (T, 1): an empty span is its next char
    overlap = torch.minimum(end, frag[None, :, 1]) - torch.maximum(start, frag[None, :, 0])
    overlap = overlap.clamp(min=0)  # (T, F) chars shared by token t and fragment f
    best = overlap.argmax(dim=1)  # (T,) first maximum
    return torch.where(overlap.amax(dim=1) > 0, best, torch.full_like(best, -1))  # (T,)
