"""Text a user cannot see at ingest: golds made of invisible characters are refused with the
line, and two rows a user sees as the same question are one question (a conflict when their
answers differ, a duplicate when they agree); generated in both directions.

Run: `.venv/bin/pytest tests/problems/test_ingest_text.py -q`.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import SieveError
from pipeline.problems.ingest import conflicting_questions, read_external
from pipeline.problems.text import INVISIBLE_RANGES, invisible, question_key
from pipeline.scoring import verify_batch
from tests.cli_runner import run_cli

# characters that are neither control nor format characters, yet show nothing
BLANK = ["\u3164", "\u2800", "\u034f", "\u115f", "\u1160", "\uffa0", "\u17b4", "\ufe0f"]
SPACES = [chr(c) for c in range(0x2000, 0x200B)] + ["\u3000", "\u00a0", "\u205f", "\u1680"]
FORMAT = ["\u200b", "\u200d", "\ufeff", "\u2060", "\u00ad", "\u2063"]
HIDDEN = BLANK + FORMAT  # invisible and not whitespace


def write_rows(path: Path, rows: list[tuple[str, str]]) -> Path:
    lines = [json.dumps({"question": q, "answer": a}, ensure_ascii=False) for q, a in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def key(text: str) -> str:
    return str(pl.select(question_key(pl.lit(text))).item())


# ---- invisible golds -------------------------------------------------------------------------


@pytest.mark.parametrize("char", BLANK + SPACES + FORMAT, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("shape", ["alone", "thrice", "after a space", "with CGJ", "after ####"])
def test_an_answer_with_nothing_visible_is_refused_with_its_line(
    tmp_path: Path, char: str, shape: str
) -> None:
    answer = {
        "alone": char,
        "thrice": char * 3,
        "after a space": " " + char,
        "with CGJ": char + "\u034f",
        "after ####": "It is 4.\n#### " + char,
    }[shape]
    path = write_rows(tmp_path / "data.jsonl", [("What is 2+2?", "4"), ("What is zero?", answer)])
    message = refusal(path)
    assert message.startswith("data.jsonl:2: "), message
    assert "has no visible character" in message or "empty" in message, message


@pytest.mark.parametrize("char", HIDDEN, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("where", ["end", "start", "middle"])
def test_a_gold_holding_an_invisible_character_is_refused(
    tmp_path: Path, char: str, where: str
) -> None:
    answer = {"end": "42" + char, "start": char + "42", "middle": "4" + char + "2"}[where]
    path = write_rows(tmp_path / "data.jsonl", [("q", answer)])
    message = refusal(path)
    assert message.startswith("data.jsonl:1: answer ") and f"(U+{ord(char):04X})" in message


@pytest.mark.parametrize(
    "answer",
    [
        "42",
        "\u314e",
        "\u2801",
        "caf\u00e9",
        "cafe\u0301",
        "x\u00b2",
        "4\u20090",
        "\u221a2",
        "\u03c0",
    ],
)
def test_visible_golds_near_the_invisible_ones_are_kept(tmp_path: Path, answer: str) -> None:
    """The other direction: a Hangul letter (not the filler), a braille dot (not the blank), a
    combining accent, a thin space between digits are what a user sees."""
    path = write_rows(tmp_path / "data.jsonl", [("q", answer)])
    assert read_external(path, warn=lambda _: None)["answer"].to_list() == [answer]


@given(st.text(st.sampled_from(HIDDEN + SPACES + [" ", "\t"]), min_size=1, max_size=8))
@settings(max_examples=60, derandomize=True)
def test_generated_invisible_golds_are_refused(
    tmp_path_factory: pytest.TempPathFactory, gold: str
) -> None:
    path = write_rows(tmp_path_factory.mktemp("g") / "data.jsonl", [("q", gold)])
    message = refusal(path)
    assert message.startswith("data.jsonl:1: ")


def test_the_invisible_set_covers_the_default_ignorables() -> None:
    """Every code point the ranges list is invisible, and no letter, digit or symbol with a
    glyph is (apart from the blank braille pattern and the Hangul fillers, which have none)."""
    listed = {c for lo, hi in INVISIBLE_RANGES for c in range(lo, hi + 1)}
    assert all(invisible(chr(c)) for c in listed)
    glyphs = [chr(c) for c in range(0x20, 0x3000) if unicodedata.category(chr(c))[0] in "LNS"]
    seen = [c for c in glyphs if invisible(c) and ord(c) not in (0x115F, 0x1160, 0x2800)]
    assert seen == []


# ---- one question as a user sees it ----------------------------------------------------------

QUESTION = "What is 6 times 7?"
VARIANTS = {
    "trailing U+200B": QUESTION + "\u200b",
    "doubled space": QUESTION.replace(" ", "  ", 1),
    "tab": QUESTION.replace(" ", "\t", 1),
    "no-break space": QUESTION.replace(" ", "\u00a0", 1),
    "thin space": QUESTION.replace(" ", "\u2009", 1),
    "leading BOM": "\ufeff" + QUESTION,
    "soft hyphen": QUESTION.replace("times", "ti\u00admes"),
    "CGJ": QUESTION.replace("W", "W\u034f"),
    "Hangul filler": QUESTION + " \u3164",
    "line break": QUESTION.replace(" is", "\nis"),
}
ACCENTED = [
    "Caf\u00e9 has 6 tables of 7. How many seats?",
    "Cafe\u0301 has 6 tables of 7. How many seats?",
]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_near_duplicate_with_another_answer_is_a_conflict(tmp_path: Path, variant: str) -> None:
    rows = [(QUESTION, "42"), ("Other?", "1"), (VARIANTS[variant], "43")]
    message = refusal(write_rows(tmp_path / "data.jsonl", rows))
    assert message.startswith(
        "data.jsonl:3: same question as data.jsonl:1 (written differently: spacing, invisible "
        "characters or Unicode form) with a different answer ('43' here, '42' there)"
    ), message
    frame = read_external(tmp_path / "data.jsonl", allow_conflicts=True)
    assert frame.height == 3 and conflicting_questions(frame) == 1


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_near_duplicate_with_the_same_answer_is_a_duplicate(tmp_path: Path, variant: str) -> None:
    rows = [(QUESTION, "42"), (VARIANTS[variant], "42")]
    frame = read_external(write_rows(tmp_path / "data.jsonl", rows))
    assert frame["question"].to_list() == [QUESTION]  # the first row, as written


@pytest.mark.parametrize("order", [ACCENTED, ACCENTED[::-1]], ids=["NFC first", "NFD first"])
def test_nfc_and_nfd_are_one_question(tmp_path: Path, order: list[str]) -> None:
    rows = [(order[0], "42"), (order[1], "24")]
    assert "same question as data.jsonl:1" in refusal(write_rows(tmp_path / "data.jsonl", rows))


@pytest.mark.parametrize(
    "other",
    ["What is 6 times 8?", "what is 6 times 7?", "What is 6 times 7 ?", "What is 6times 7?",
     "What is 6 times 7", "What is \u0666 times 7?"],
)  # fmt: skip
def test_questions_that_look_different_stay_different(tmp_path: Path, other: str) -> None:
    """The other direction: a changed digit, case, a space added or removed between words,
    punctuation or another script's digit is another question."""
    frame = read_external(write_rows(tmp_path / "data.jsonl", [(QUESTION, "42"), (other, "43")]))
    assert frame.height == 2


@given(
    st.lists(st.sampled_from([" ", "\u00a0", "\t", "\u2003", "\n"]), min_size=1, max_size=3),
    st.lists(st.sampled_from(HIDDEN), max_size=3),
    st.booleans(),
)
@settings(max_examples=80, derandomize=True)
def test_generated_spellings_share_the_key(spaces: list[str], hidden: list[str], nfd: bool) -> None:
    words = ["Caf\u00e9", "has", "6", "tables"]
    spelled = "".join(spaces).join(words) + "".join(hidden)
    spelled = unicodedata.normalize("NFD", spelled) if nfd else spelled
    assert key(spelled) == key(" ".join(words)) == unicodedata.normalize("NFC", " ".join(words))


def test_a_near_duplicate_of_a_stored_question_is_a_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    first = write_rows(tmp_path / "a.jsonl", [("How many eggs?", "56")])
    assert run_cli(["ingest", str(first), "--home", str(home)], capsys)[0] == 0
    second = write_rows(tmp_path / "b.jsonl", [("How  many eggs?\u200b", "57"), ("Other?", "1")])
    code, _, err = run_cli(["ingest", str(second), "--home", str(home)], capsys)
    assert code == 1 and err.strip().startswith(
        "error: b.jsonl: question 'How  many eggs?\\u200b' is already in the ledger with a "
        "different answer ('57' here, '56' from file:a.jsonl)"
    ), err
    third = write_rows(tmp_path / "c.jsonl", [("How many eggs? ", "56")])
    assert run_cli(["ingest", str(third), "--home", str(home)], capsys)[0] == 0


# ---- the plain-number shortcut of the gold check ----------------------------------------------


@given(st.from_regex(r"-?[0-9]{1,40}(\.[0-9]{1,20})?", fullmatch=True))
@settings(max_examples=40, derandomize=True)
def test_a_plain_number_gold_is_paid_against_itself(gold: str) -> None:
    """check_golds does not send plain decimal numbers to the verifier: this is why."""
    verdict = verify_batch([f"\\boxed{{{gold}}}"], [gold], "math")[0]
    assert verdict.correct is True, (gold, verdict)
