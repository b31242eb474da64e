"""Import external problem files (`.jsonl` or `.parquet`) into a problem frame.

GSM8K-style answers (a worked solution ending `#### 42`) are recognised: the answer becomes the
text after the last `####` with thousands separators removed, and the full solution is kept in
params as `solution`. Any bad record raises `SieveError` naming the file and line (or row), and
nothing is returned, so a caller imports all of a file or none of it.
Test: `.venv/bin/pytest tests/problems/test_ingest.py -q`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.errors import SieveError
from pipeline.problems.base import Row, build_frame, check_heldout_pct, make_row, params_json

GSM_MARK = "####"
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?")

# (where, record): `where` is "data.jsonl:17" or "data.parquet row 17", for error messages.
Record = tuple[str, dict[str, Any]]


def split_gsm_answer(text: str) -> tuple[str, str | None]:
    """(canonical answer, full solution or None) for an answer that may end in `#### 42`."""
    if GSM_MARK not in text:
        return text.strip(), None
    final = text.rsplit(GSM_MARK, 1)[1].strip()
    if _THOUSANDS.fullmatch(final):
        final = final.replace(",", "")
    return final, text


def _jsonl_records(path: Path) -> Iterator[Record]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise SieveError(f"{path.name}: not UTF-8 text ({exc.reason})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SieveError(f"{where}: invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise SieveError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield where, record


def _parquet_records(path: Path, fields: list[str]) -> Iterator[Record]:
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars/arrow raise several types for unreadable files
        raise SieveError(f"{path.name}: cannot read Parquet ({type(exc).__name__})") from None
    for field in fields:
        if field not in frame.columns:
            available = ", ".join(frame.columns) or "none"
            raise SieveError(f"{path.name}: no column {field!r}; available: {available}")
    for number, record in enumerate(frame.select(fields).iter_rows(named=True), start=1):
        yield f"{path.name} row {number}", record


def _text_field(record: dict[str, Any], field: str, where: str) -> str:
    """A required non-empty text field; numbers (not booleans) are accepted as their text."""
    if field not in record:
        raise SieveError(f"{where}: missing field {field!r}")
    value = record[field]
    if isinstance(value, bool) or (value is not None and not isinstance(value, str | int | float)):
        raise SieveError(f"{where}: field {field!r} must be text or a number")
    text = "" if value is None else str(value).strip()
    if not text:
        raise SieveError(f"{where}: empty {field!r}")
    return text


def _level(record: dict[str, Any], field: str | None, where: str) -> int:
    if field is None:
        return 0
    if field not in record:
        raise SieveError(f"{where}: missing field {field!r}")
    value = record[field]
    if isinstance(value, bool) or not isinstance(value, int):
        raise SieveError(f"{where}: level field {field!r} must be an integer, got {value!r}")
    return value


def _records(path: Path, fields: list[str]) -> Iterator[Record]:
    if not path.is_file():
        raise SieveError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_records(path)
    if suffix == ".parquet":
        return _parquet_records(path, fields)
    raise SieveError(f"{path.name}: unsupported file type {suffix!r}; use .jsonl or .parquet")


def read_external(
    path: str | Path,
    question_field: str = "question",
    answer_field: str = "answer",
    *,
    family: str = "external",
    level_field: str | None = None,
    source: str | None = None,
    heldout_pct: float = 10.0,
    verifier: str = "math",
) -> pl.DataFrame:
    """Problems from a `.jsonl` or `.parquet` file as a `PROBLEM_SCHEMA` frame.

    Duplicates (same problem id) keep their first occurrence. Raises `SieveError` on any bad
    record, naming the file and line, so nothing is imported from a partly bad file.
    """
    check_heldout_pct(heldout_pct)
    file = Path(path)
    fields = [question_field, answer_field] + ([level_field] if level_field else [])
    label = source if source is not None else f"file:{file.name}"
    rows: dict[str, Row] = {}
    for where, record in _records(file, fields):
        question = _text_field(record, question_field, where)
        answer, solution = split_gsm_answer(_text_field(record, answer_field, where))
        if not answer:
            raise SieveError(f"{where}: empty answer after {GSM_MARK!r}")
        row = make_row(
            source=label,
            family=family,
            level=_level(record, level_field, where),
            params=params_json({} if solution is None else {"solution": solution}),
            question=question,
            answer=answer,
            verifier=verifier,
            heldout_pct=heldout_pct,
        )
        rows.setdefault(row[0], row)
    return build_frame(rows.values())
