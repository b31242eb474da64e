"""Text a reader cannot see, and the identity of a question as a reader sees it.

A character is *invisible* when it is whitespace, a control or format character (Unicode
categories Cc, Cf), a Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties: U+034F
COMBINING GRAPHEME JOINER, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, variation
selectors, ...) or U+2800 BRAILLE PATTERN BLANK, which is a graphic character with an empty
glyph. A gold made only of such characters looks empty and one holding them looks like another
answer, so ingest refuses both.

Two questions are the same question when their `question_key` is equal: invisible characters
removed, every run of whitespace one space, the ends trimmed, then Unicode NFC (so `e` + U+0301 is
`é`). The key decides duplicates and conflicts only; the question is stored as written.

Test: `.venv/bin/pytest tests/problems/test_ingest_text.py -q`.
"""

from __future__ import annotations

import unicodedata

import polars as pl

# Default_Ignorable_Code_Point (Unicode 15.1 DerivedCoreProperties.txt), plus U+2800 (blank glyph)
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_INVISIBLE = frozenset(c for lo, hi in INVISIBLE_RANGES for c in range(lo, hi + 1))
# the same set for the regex engine polars uses (Rust `regex`: `\p{..}`, `\x{..}`)
_INVISIBLE_CLASS = (
    r"[\p{Cc}\p{Cf}" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in INVISIBLE_RANGES) + "]"
)


def hidden(char: str) -> bool:
    """True for an invisible character that is not whitespace (U+200B, U+3164, U+034F, ...)."""
    return ord(char) in _INVISIBLE or unicodedata.category(char) in ("Cc", "Cf")


def invisible(char: str) -> bool:
    """True for whitespace or a `hidden` character."""
    return char.isspace() or hidden(char)


def question_key(question: pl.Expr) -> pl.Expr:
    """The identity of a question (see the module doc) as a polars expression: one definition
    for a file's rows and the ledger's."""
    return (
        question.str.replace_all(r"\s", " ")
        .str.replace_all(_INVISIBLE_CLASS, "")
        .str.replace_all(" {2,}", " ")
        .str.strip_chars(" ")
        .str.normalize("NFC")
    )


def key_hashes(questions: pl.Series, rows: int = 100_000) -> pl.Series:
    """The hash of each question's `question_key`, computed `rows` at a time: the key's
    intermediate texts of millions of questions never exist at once. Equal keys give equal
    hashes; equal hashes are compared by their keys wherever it matters."""
    parts = [
        questions.slice(start, rows).to_frame("q").select(question_key(pl.col("q")).hash(seed=0))
        for start in range(0, len(questions), rows)
    ]
    return pl.concat([p.to_series() for p in parts]) if parts else pl.Series([], dtype=pl.UInt64)
