"""Importing external problem files with `pipeline.problems.ingest.read_external`, and the
`sieve ingest` command: what is refused (one error line naming file and line, nothing stored),
what is tolerated (unusual line separators inside strings), conflicts and the line-size limit.

Run: `.venv/bin/pytest tests/problems/test_ingest.py -q`.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.problems import PROBLEM_SCHEMA, split_for
from pipeline.problems.base import problem_id
from pipeline.problems.columns import Columns
from pipeline.problems.ingest import (
    MAX_ANSWER_CHARS,
    MAX_LINE_BYTES,
    conflicting_questions,
    read_external,
    split_gsm_answer,
)
from pipeline.scoring.depth import MAX_DEPTH
from pipeline.store import Ledger
from tests.cli_runner import run_cli

GSM_SOLUTION = "Each box holds 617 pens.\n2 * 617 = <<2*617=1234>>1234\n#### 1,234"


def write_jsonl(path: Path, records: list[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def one_line_error(info: pytest.ExceptionInfo[SieveError]) -> str:
    message = str(info.value)
    assert "\n" not in message
    return message


def test_gsm8k_style_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "gsm.jsonl",
        [
            {"question": "How many pens are in 2 boxes?", "answer": GSM_SOLUTION},
            "",
            {"question": "What is 6*7?", "answer": 42},
            {"question": "How many pens are in 2 boxes?", "answer": GSM_SOLUTION},
            "   ",
        ],
    )
    frame = read_external(path)
    assert frame.schema == pl.Schema(PROBLEM_SCHEMA)
    assert frame["answer"].to_list() == ["1234", "42"]
    assert json.loads(frame["params"][0]) == {"solution": GSM_SOLUTION}
    assert json.loads(frame["params"][1]) == {}
    assert set(frame["source"]) == {"file:gsm.jsonl"}
    assert set(frame["family"]) == {"external"}
    assert set(frame["level"]) == {0}
    assert set(frame["verifier"]) == {"math"}
    first = frame.row(0, named=True)
    assert first["problem_id"] == problem_id(first["question"], "1234", "math")
    assert first["split"] == split_for(first["problem_id"])


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so #### 1,234", "1234"),
        ("a #### 3 #### -1,000,000.5", "-1000000.5"),
        ("#### 3, 4", "3, 4"),
        ("#### 17/3 ", "17/3"),
        (" 42 ", "42"),
    ],
)
def test_split_gsm_answer(text: str, answer: str) -> None:
    assert split_gsm_answer(text)[0] == answer


def test_options(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [{"q": "1+1", "a": "2", "lvl": 3}, {"q": "2+2", "a": "4", "lvl": 5}],
    )
    frame = read_external(
        path, Columns("q", "a", level="lvl"), family="mine", source="hand", heldout_pct=100.0
    )
    assert frame["level"].to_list() == [3, 5]
    assert set(frame["source"]) == {"hand"}
    assert set(frame["family"]) == {"mine"}
    assert set(frame["split"]) == {"heldout"}


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "data.jsonl",
        [{"question": "a", "answer": "1"}, {"question": "b", "answer": "2"}, '{"question": "c" '],
    )
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line_error(info)
    assert message.startswith("data.jsonl:3: invalid JSON (")


def test_missing_field_names_field_and_line(tmp_path: Path) -> None:
    records = [{"question": "a", "answer": "1"}, {"question": "b"}]
    path = write_jsonl(tmp_path / "data.jsonl", records)
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert one_line_error(info) == "data.jsonl:2: missing field 'answer'"


@pytest.mark.parametrize(
    ("record", "fragment"),
    [
        ({"question": " ", "answer": "1"}, "data.jsonl:1: empty 'question'"),
        ({"question": "a", "answer": ""}, "data.jsonl:1: empty 'answer'"),
        ({"question": "a", "answer": "work #### "}, "data.jsonl:1: empty answer after '####'"),
        ({"question": "a", "answer": ["1"]}, "must be text or a number"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_records(tmp_path: Path, record: Any, fragment: str) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [record])
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert fragment in one_line_error(info)


def test_level_must_be_int(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"question": "a", "answer": "1", "lv": "2"}])
    with pytest.raises(SieveError, match=r"data\.jsonl:1: level field 'lv' must be an integer"):
        read_external(path, Columns(level="lv"))


def test_parquet_round_trip(tmp_path: Path) -> None:
    source = pl.DataFrame(
        {
            "problem": ["1+1", "How far?", "1+1"],
            "solution": ["2", "It is 2 km.\n#### 2,000", "2"],
            "difficulty": [1, 4, 1],
            "extra": ["x", "y", "z"],
        }
    )
    path = tmp_path / "set.parquet"
    source.write_parquet(path)
    frame = read_external(path, Columns("problem", "solution", level="difficulty"))
    assert frame.schema == pl.Schema(PROBLEM_SCHEMA)
    assert frame.select("question", "answer", "level").rows() == [
        ("1+1", "2", 1),
        ("How far?", "2000", 4),
    ]
    assert set(frame["source"]) == {"file:set.parquet"}


def test_parquet_missing_column_lists_available(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    pl.DataFrame({"question": ["a"], "label": ["1"]}).write_parquet(path)
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert one_line_error(info) == "set.parquet: no column 'answer'; available: question, label"


def test_parquet_empty_answer_names_row(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    pl.DataFrame({"question": ["a", "b"], "answer": ["1", None]}).write_parquet(path)
    with pytest.raises(SieveError, match=r"set.parquet row 2: empty 'answer'"):
        read_external(path)


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "data.tsv"
    path.write_text("question\tanswer\na\t1\n")
    with pytest.raises(SieveError, match=r"unsupported file type '\.tsv'"):
        read_external(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="no such file"):
        read_external(tmp_path / "nope.jsonl")


def write_lines(path: Path, lines: list[str], newline: str = "\n") -> Path:
    """Raw JSONL text, written as given (no escaping), one entry a line."""
    path.write_bytes((newline.join(lines) + newline).encode("utf-8", "surrogatepass"))
    return path


GOOD = '{"question": "1+1", "answer": "2"}'
GOOD_LV = '{"question": "1+1", "answer": "2", "lv": 1}'  # for cases that read a level field "lv"


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\u0085", "\x0c", "\x0b", "\x1c", "\r"])
def test_unusual_line_separators_inside_strings_import(tmp_path: Path, sep: str) -> None:
    """Only `\\n` ends a record: U+2028, U+0085, a form feed etc. inside a string stay in it."""
    question = f"first part{sep}second part"
    lines = [GOOD, json.dumps({"question": question, "answer": "7"}, ensure_ascii=False)]
    if sep in "\x0c\x0b\x1c\r":  # json.dumps escapes these; write them raw as lax writers do
        lines.append('{"question": "raw' + sep + 'control", "answer": "8"}')
    lines.append('{"question": "broken"')
    path = write_lines(tmp_path / "data.jsonl", lines)
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert one_line_error(info).startswith(f"data.jsonl:{len(lines)}: invalid JSON")
    frame = read_external(write_lines(tmp_path / "ok.jsonl", lines[:-1]))
    assert question in frame["question"].to_list()
    assert frame.height == len(lines) - 1


def test_crlf_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "win.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + (GOOD + "\r\n" + '{"question": "a", "answer": 3}\r\n').encode()
    )
    frame = read_external(path)
    assert frame.select("question", "answer").rows() == [("1+1", "2"), ("a", "3")]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("NaN", "nan"),
        ("Infinity", "inf"),
        ("-Infinity", "-inf"),
        ("1e999", "inf"),
        ('"nan"', "'nan'"),
        ('"-inf"', "'-inf'"),
        ('"Infinity"', "'Infinity'"),
        ('"so #### NaN"', "'NaN'"),
    ],
)
def test_non_finite_answer_refused(tmp_path: Path, value: str, shown: str) -> None:
    path = write_lines(
        tmp_path / "data.jsonl", [GOOD, '{"question": "q", "answer": ' + value + "}"]
    )
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line_error(info)
    assert message.startswith("data.jsonl:2: ") and "not a finite number" in message
    assert shown in message


def test_non_finite_parquet_answer_refused(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    pl.DataFrame({"question": ["a", "b"], "answer": [1.5, float("nan")]}).write_parquet(path)
    with pytest.raises(SieveError, match=r"^set\.parquet row 2: answer 'NaN' is not a finite"):
        read_external(path)


def test_infinity_symbol_is_an_answer(tmp_path: Path) -> None:
    """LaTeX `\\infty` is a symbolic answer math-verify can judge, not a float spelling."""
    path = write_jsonl(
        tmp_path / "data.jsonl", [{"question": "lim 1/x^2 at 0?", "answer": "\\infty"}]
    )
    assert read_external(path)["answer"].to_list() == ["\\infty"]


def test_answer_length_cap(tmp_path: Path) -> None:
    at_cap = "9" * MAX_ANSWER_CHARS
    long_solution = "step. " * 2000 + "#### 5"
    records = [
        {"question": "big", "answer": at_cap},
        {"question": "worked", "answer": long_solution},
    ]
    frame = read_external(write_jsonl(tmp_path / "ok.jsonl", records))
    assert frame["answer"].to_list() == [at_cap, "5"]  # the cap is on the final answer
    over = [*records, {"question": "bigger", "answer": at_cap + "9"}]
    with pytest.raises(SieveError) as info:
        read_external(write_jsonl(tmp_path / "data.jsonl", over))
    message = one_line_error(info)
    assert message.startswith("data.jsonl:3: answer is 1,001 characters long; at most 1,000")


def test_five_thousand_digit_integer_answer(tmp_path: Path) -> None:
    """A JSON integer past Python's int() limit (a traceback before) is refused by length."""
    path = write_lines(tmp_path / "data.jsonl", ['{"question": "q", "answer": ' + "7" * 5000 + "}"])
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert one_line_error(info).startswith("data.jsonl:1: answer is 5,000 characters long")
    # ... and the same number in a field nobody reads does not stop the import
    path = write_lines(
        tmp_path / "ok.jsonl", ['{"question": "q", "answer": 1, "x": ' + "7" * 5000 + "}"]
    )
    assert read_external(path).height == 1


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (
            '{"question": "\\ud800", "answer": "1"}',
            "field 'question' holds a lone surrogate (U+D800)",
        ),
        (
            '{"question": "a", "answer": "x\\udfff"}',
            "field 'answer' holds a lone surrogate (U+DFFF)",
        ),
        ('{"question": "a", "answer": "1", "lv": 2147483648}', "level field 'lv' is out of range"),
        ('{"question": "a", "answer": "1", "lv": -2147483649}', "level field 'lv' is out of range"),
        ('{"question": "a", "answer": "1", "lv": ' + "9" * 5000 + "}", "'lv' is out of range"),
        ('{"question": "a", "answer": "1", "lv": 2.0}', "level field 'lv' must be an integer"),
        ("[" * 200_000 + "]" * 200_000, "invalid JSON (nested too deeply)"),
    ],
)
def test_bad_values_name_the_line(tmp_path: Path, line: str, fragment: str) -> None:
    level = '"lv"' in line
    path = write_lines(tmp_path / "data.jsonl", [GOOD_LV if level else GOOD, line])
    with pytest.raises(SieveError) as info:
        read_external(path, Columns(level="lv" if level else None))
    message = one_line_error(info)
    assert message.startswith("data.jsonl:2: ") and fragment in message


def test_level_at_int32_bounds_is_kept(tmp_path: Path) -> None:
    records = [{"q": "a", "a": "1", "lv": 2**31 - 1}, {"q": "b", "a": "1", "lv": -(2**31)}]
    frame = read_external(write_jsonl(tmp_path / "data.jsonl", records), Columns("q", "a", "lv"))
    assert frame["level"].to_list() == [2**31 - 1, -(2**31)]


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(GOOD.encode() + b"\n" + b'{"question": "caf\xe9", "answer": "1"}\n')
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert one_line_error(info).startswith("data.jsonl:2: not UTF-8 text (invalid continuation")


def test_conflicting_answers_refused_unless_allowed(tmp_path: Path) -> None:
    records = [
        {"question": "What is 6*7?", "answer": "42"},
        {"question": "How far?", "answer": "It is 2 km.\n#### 2,000"},
        {"question": "What is 6*7?", "answer": "43"},
        {"question": "How far?", "answer": "#### 2000"},  # same final answer: a duplicate
        {"question": "Pick one", "answer": "A"},
        {"question": "Pick one", "answer": "B"},
        {"question": "What is 6*7?", "answer": "44"},
    ]
    path = write_jsonl(tmp_path / "data.jsonl", records)
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line_error(info)
    assert message.startswith("data.jsonl:3: same question as data.jsonl:1 with a different answer")
    assert "('43' here, '42' there)" in message
    assert "2 question(s) with conflicting answers" in message and "--allow-conflicts" in message
    frame = read_external(path, allow_conflicts=True)
    assert frame.height == 6  # only the 2,000 / 2000 duplicate is dropped
    assert conflicting_questions(frame) == 2


def test_same_question_same_answer_is_a_duplicate(tmp_path: Path) -> None:
    records = [{"question": "q", "answer": "1"}, {"question": " q ", "answer": 1}]
    frame = read_external(write_jsonl(tmp_path / "data.jsonl", records))
    assert frame.height == 1 and conflicting_questions(frame) == 0


def test_line_size_limit(tmp_path: Path) -> None:
    line = '{"question": "q", "answer": "1", "pad": "' + "x" * 100 + '"}'
    size = len(line.encode())
    path = write_lines(tmp_path / "data.jsonl", [GOOD, line])
    assert read_external(path, max_line_bytes=size).height == 2  # the newline does not count
    with pytest.raises(SieveError) as info:
        read_external(path, max_line_bytes=size - 1)
    assert one_line_error(info) == (
        f"data.jsonl:2: line longer than {size - 1:,} bytes (raise --max-line-bytes)"
    )
    with pytest.raises(SieveError, match="--max-line-bytes must be a positive"):
        read_external(path, max_line_bytes=0)


def test_huge_line_refused_without_reading_it(tmp_path: Path) -> None:
    """A 32 MiB line meets the 1 MiB default limit; at most about one limit is ever read."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.write(GOOD.encode() + b'\n{"question": "q", "answer": "')
        chunk = b"x" * (1 << 20)
        for _ in range(32):
            f.write(chunk)
        f.write(b'"}\n')
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(SieveError) as info:
            read_external(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert one_line_error(info).startswith(f"huge.jsonl:2: line longer than {MAX_LINE_BYTES:,}")
    assert peak < 4 * MAX_LINE_BYTES, peak
    assert time.monotonic() - start < 5


# ---- the `sieve ingest` command: one error line, nothing stored, the new options ----


def run_ingest(args: list[str], home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr on failure else stdout) of `sieve ingest ARGS --home HOME`."""
    code, out, err = run_cli(["ingest", *args, "--home", str(home)], capsys)
    return code, err if code else out


def problems_checksum(home: Path) -> tuple[int, int]:
    with Ledger.open(home, read_only=True) as ledger:
        return ledger.checksum("problems")


BAD_FILES = {
    "surrogate": ['{"question": "\\ud800", "answer": "1"}'],
    "nan": ['{"question": "q", "answer": NaN}'],
    "digits": ['{"question": "q", "answer": ' + "1" * 5000 + "}"],
    "conflict": ['{"question": "q", "answer": "1"}', '{"question": "q", "answer": "2"}'],
    "level": ['{"question": "q", "answer": "1", "lv": 4294967296}'],
    "long line": ['{"question": "' + "q" * 2000 + '", "answer": "1"}'],
}


REASONS = {
    "surrogate": "lone surrogate",
    "nan": "not a finite number",
    "digits": "5,000 characters long",
    "conflict": "same question as bad.jsonl:2",
    "level": "out of range",
    "long line": "line longer than 1,000 bytes",
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_cli_bad_file_is_one_line_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    home = tmp_path / "home"
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"question": "seed", "answer": "1"}])
    assert run_ingest([str(seed)], home, capsys)[0] == 0
    before = problems_checksum(home)
    level = case == "level"
    lines = [GOOD_LV if level else GOOD, *BAD_FILES[case]]  # nothing of a bad file is stored
    path = write_lines(tmp_path / "bad.jsonl", lines)
    extra = ["--level-field", "lv"] if level else []
    extra += ["--max-line-bytes", "1000"] if case == "long line" else []
    code, err = run_ingest([str(path), *extra], home, capsys)
    shown = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(shown) == 1, err
    assert shown[0].startswith(f"error: bad.jsonl:{len(lines)}: "), shown[0]
    assert REASONS[case] in shown[0]
    assert problems_checksum(home) == before


def test_cli_allow_conflicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    path = write_lines(tmp_path / "two.jsonl", BAD_FILES["conflict"])
    code, err = run_ingest([str(path)], home, capsys)
    assert code == 1 and "--allow-conflicts" in err
    code, out = run_ingest([str(path), "--allow-conflicts"], home, capsys)
    assert code == 0 and "1 question(s) kept with more than one answer" in out
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.checksum("problems")[0] == 2


# --- numbers kept exactly (issue 32 point 5) --------------------------------------------------


@pytest.mark.parametrize(
    "literal",
    ["3.14159265358979323846", "123456789012345678901234567890.5", "1e-7", "0.1", "2.50"],
)
def test_json_numbers_keep_their_literal_text(tmp_path: Path, literal: str) -> None:
    path = write_lines(tmp_path / "data.jsonl", ['{"question": "q", "answer": ' + literal + "}"])
    assert read_external(path)["answer"].to_list() == [literal]


@pytest.mark.parametrize("literal", ["1e-999", "-2.5e-400", "0.000e-99999"])
def test_underflowing_numbers_are_refused_zero_is_not(tmp_path: Path, literal: str) -> None:
    path = write_lines(tmp_path / "data.jsonl", ['{"question": "q", "answer": ' + literal + "}"])
    if literal.startswith("0.000"):  # a zero written with an exponent is zero, not an underflow
        assert read_external(path)["answer"].to_list() == [literal]
        return
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line_error(info)
    assert message.startswith("data.jsonl:1: ") and "underflows" in message


def test_underflowing_text_answer_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"question": "q", "answer": "1e-999"}])
    with pytest.raises(SieveError, match="underflows"):
        read_external(path)


def test_parquet_float32_reads_as_its_shortest_text_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "set.parquet"
    answers = pl.Series("answer", [0.1, 2.5, 123456.7], dtype=pl.Float32)
    pl.DataFrame({"question": ["a", "b", "c"], "answer": answers}).write_parquet(path)
    warnings: list[str] = []
    frame = read_external(path, warn=warnings.append)
    assert frame["answer"].to_list() == ["0.1", "2.5", "123456.7"]
    assert len(warnings) == 1 and "float32" in warnings[0] and "'answer'" in warnings[0]


def test_parquet_float64_and_decimal_answers_are_exact(tmp_path: Path) -> None:
    import decimal

    path = tmp_path / "set.parquet"
    exact = [decimal.Decimal("3.14159265358979323846"), decimal.Decimal("2.50")]
    frame = pl.DataFrame(
        {
            "question": ["a", "b"],
            "answer": pl.Series(exact, dtype=pl.Decimal(38, 20)),
            "other": [0.1, 1 / 3],
        }
    )
    frame.write_parquet(path)
    assert read_external(path)["answer"].to_list() == ["3.14159265358979323846", "2.5"]
    floats = tmp_path / "floats.parquet"
    frame.select("question", pl.col("other").alias("answer")).write_parquet(floats)
    assert read_external(floats)["answer"].to_list() == ["0.1", repr(1 / 3)]


@pytest.mark.parametrize("content", [b"", b"  \n\n \t\n"])
def test_an_empty_jsonl_warns(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    warnings: list[str] = []
    assert read_external(path, warn=warnings.append).height == 0
    assert warnings == ["empty.jsonl: no records; nothing to import"]


def test_a_zero_row_parquet_warns(tmp_path: Path) -> None:
    path = tmp_path / "none.parquet"
    pl.DataFrame(schema={"question": pl.Utf8, "answer": pl.Utf8}).write_parquet(path)
    warnings: list[str] = []
    assert read_external(path, warn=warnings.append).height == 0
    assert warnings == ["none.parquet: no records; nothing to import"]


def _nested(kind: str, depth: int) -> str:
    text = "x"
    for _ in range(depth):
        text = {
            "frac": f"\\frac{{{text}}}{{2}}",
            "sqrt": f"\\sqrt{{{text}+1}}",
            "call": f"f({text})+1",
            "bracket": f"[{text}, 1]",
            "left": f"\\left({text}\\right)^{{2}}",
        }[kind]
    return text


@pytest.mark.parametrize("kind", ["frac", "sqrt", "call", "bracket", "left"])
@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 20, 40])
def test_a_gold_nested_deeper_than_the_verifier_reads_is_refused(
    tmp_path: Path, kind: str, depth: int
) -> None:
    path = write_jsonl(
        tmp_path / "data.jsonl",
        [{"question": "easy", "answer": "2"}, {"question": "deep", "answer": _nested(kind, depth)}],
    )
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line_error(info)
    assert message.startswith("data.jsonl: answer")
    assert f"nests brackets deeper than {MAX_DEPTH}" in message and "1 such answer(s)" in message


@pytest.mark.parametrize("kind", ["frac", "sqrt", "call", "bracket", "left"])
def test_a_gold_nested_within_the_bound_imports(tmp_path: Path, kind: str) -> None:
    path = write_jsonl(tmp_path / "data.jsonl", [{"question": "q", "answer": _nested(kind, 3)}])
    assert read_external(path, warn=lambda _: None).height == 1


def test_a_number_inside_redundant_brackets_is_peeled_and_imports(tmp_path: Path) -> None:
    nested = "(" * 400 + "1" + ")" * 400  # once refused (every verdict timed out); now read as 1
    path = write_jsonl(
        tmp_path / "data.jsonl",
        [{"question": "easy", "answer": "2"}, {"question": "deep", "answer": nested}],
    )
    assert read_external(path).height == 2


def test_a_gold_not_accepted_against_itself_warns(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "data.jsonl",
        [{"question": "ok", "answer": "12"}, {"question": "retracted", "answer": "5, not 6"}],
    )
    warnings: list[str] = []
    frame = read_external(path, warn=warnings.append)
    assert frame.height == 2
    assert len(warnings) == 1 and warnings[0].startswith("data.jsonl: 1 answer(s) are not accepted")
    assert "'5, not 6'" in warnings[0]


def test_sieve_ingest_prints_its_warnings_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n")
    code, _, err = run_cli(["ingest", str(empty), "--home", str(tmp_path / "home")], capsys)
    assert code == 0
    assert err.splitlines() == ["warning: empty.jsonl: no records; nothing to import"]
