"""Importing external problem files with `pipeline.problems.ingest.read_external`.

Run: `.venv/bin/pytest tests/problems/test_ingest.py -q`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.errors import SieveError
from pipeline.problems import PROBLEM_SCHEMA, split_for
from pipeline.problems.base import problem_id
from pipeline.problems.ingest import read_external, split_gsm_answer

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
        path, "q", "a", family="mine", level_field="lvl", source="hand", heldout_pct=100.0
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
        read_external(path, level_field="lv")


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
    frame = read_external(path, "problem", "solution", level_field="difficulty")
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
    path = tmp_path / "data.csv"
    path.write_text("question,answer\na,1\n")
    with pytest.raises(SieveError, match=r"unsupported file type '\.csv'"):
        read_external(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="no such file"):
        read_external(tmp_path / "nope.jsonl")
