"""The character tokenizer round-trips everything the problem families produce."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer

from pipeline.policy.tokenizer import BOS, CHARSET, build_tokenizer
from pipeline.problems import generate_mix


def test_every_character_the_families_produce_round_trips(tmp_path: Path) -> None:
    tok = build_tokenizer()
    problems = generate_mix(None, 4000, seed=1)
    texts = problems["question"].to_list() + problems["answer"].to_list()
    used = set("".join(texts)) | {"="}
    assert used <= set(CHARSET), used - set(CHARSET)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in [*texts, "".join(sorted(used))]:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.convert_tokens_to_ids(BOS)
        assert len(ids) == len(text) + 1  # one token per character, plus <bos>
        assert tok.decode(ids, skip_special_tokens=True) == text
        assert loaded(text)["input_ids"] == ids


def test_unknown_characters_map_to_unk() -> None:
    tok = build_tokenizer()
    ids = tok("é", add_special_tokens=False)["input_ids"]
    assert ids == [tok.unk_token_id]
