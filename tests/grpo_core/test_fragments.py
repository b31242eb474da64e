"""Char spans of completion tokens (`grpo_core.fragments`) for char-level, byte-level BPE and
SentencePiece-style tokenizers, and the token → fragment overlap rules, against plain loops."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import pytest
import torch

from grpo_core.fragments import token_char_spans, token_fragments
from tests.grpo_core.test_step_advantages import slow_token_fragment

SMOLLM = Path("/tmp/sieve-real-model/models/smollm2-135m")


def test_overlap_rules_of_token_fragments() -> None:
    spans = torch.tensor([[0, 2], [2, 5], [5, 5], [5, 6], [6, 8], [9, 10]])
    frags = ((0, 3, True), (3, 7, False), (7, 8, True))
    # token 1 shares 1 char with f0, 2 with f1; the empty token 2 counts as char 5 (f1);
    # token 4 ties f1/f2 (1 char each) -> the earlier; token 5 is outside every fragment
    assert token_fragments(spans, frags).tolist() == [0, 1, 1, 1, 1, -1]
    assert token_fragments(spans, frags).tolist() == slow_token_fragment(spans.tolist(), frags)
    assert token_fragments(spans, ()).tolist() == [-1] * 6
    with pytest.raises(ValueError, match="char_start ≤ char_end"):
        token_fragments(spans, ((4, 2, True),))


def test_spans_with_the_tiny_char_tokenizer() -> None:
    from pipeline.policy.model import new_tiny_model

    _, tok = new_tiny_model()
    text = "12 + 30 = 42\nso x=7"
    ids = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
    spans = token_char_spans(tok, ids, text)
    assert spans.tolist() == [[k, k + 1] for k in range(len(text))] + [[len(text), len(text)]]


class ByteTokenizer:
    """UTF-8 bytes as tokens (a character may span several), decoded with replacement chars."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


class SentencePieceLike:
    """Word pieces with '▁' for a space; decoding drops the leading space (as Llama's does)."""

    vocab: ClassVar[list[str]] = ["▁x", "▁=", "▁7", ",", "▁so", "▁y", "▁2"]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(self.vocab[i] for i in ids).replace("▁", " ").lstrip(" ")


def tiles(spans: torch.Tensor, text: str) -> bool:
    s = spans.tolist()
    return (
        s[0][0] == 0
        and s[-1][1] == len(text)
        and all(a[1] == b[0] for a, b in itertools.pairwise(s))
    )


def test_spans_when_a_character_spans_several_tokens() -> None:
    text = "é=2 → ok"
    ids = list(text.encode())
    spans = token_char_spans(ByteTokenizer(), ids, text)
    assert tiles(spans, text)
    # é is 2 bytes: the first gets an empty span, which still joins é's fragment
    assert spans[:2].tolist() == [[0, 0], [0, 1]]
    assert spans[5:8].tolist() == [[4, 4], [4, 4], [4, 5]]  # → (char 4) is 3 bytes
    which = token_fragments(spans, ((0, 1, True), (4, 5, False)))
    assert which.tolist() == [0, 0, -1, -1, -1, 1, 1, 1, -1, -1, -1]


def test_spans_when_single_token_decodes_drop_spaces() -> None:
    tok = SentencePieceLike()
    ids = [0, 1, 2, 3, 4, 5, 1, 6]
    text = tok.decode(ids)
    assert text == "x = 7, so y = 2"
    spans = token_char_spans(tok, ids, text).tolist()
    assert [text[s:e] for s, e in spans] == ["x", " =", " 7", ",", " so", " y", " =", " 2"]


@pytest.mark.skipif(not (SMOLLM / "tokenizer.json").exists(), reason="no local SmolLM2")
def test_spans_with_a_byte_level_bpe_tokenizer() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(SMOLLM)
    for text in ("Step 1: 12 * 3 = 36\nStep 2: 36 + 6 = 42", "café → 3·4 = 12 ✓ naïve"):
        ids = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
        spans = token_char_spans(tok, ids, text)
        assert tiles(spans, text), text
        assert spans[-1].tolist() == [len(text), len(text)]  # end of sequence
        for (s, e), t in zip(spans.tolist(), ids[:-1], strict=False):
            piece = tok.decode([t])
            if "\ufffd" not in piece:
                assert text[s:e] == piece
        start = text.index("= ")
        which = token_fragments(spans, ((start, len(text), True),))
        inside = [
            k for k, (s, e) in enumerate(spans.tolist()) if max(e, s + 1) > start and s < len(text)
        ]
        assert which.ge(0).nonzero().squeeze(1).tolist() == inside
