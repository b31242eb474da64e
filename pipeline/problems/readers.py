"""An input file's records, in order and in bounded memory: JSONL and CSV here (`jsonl_rows`,
`csv_rows`), Parquet and saved datasets in `tables.py`; `pipeline.problems.ingest` picks the
reader by suffix (a folder is a dataset saved with `datasets`' `save_to_disk`).

Each reader yields `(number, record)`: the number is what a user finds in the file (a JSONL or
CSV line, the line where a CSV record starts; a Parquet or dataset row, 1-based) and
`Rows.where(number)` names it in an error (`data.jsonl:17`, `data.parquet row 17`).

- JSONL is split on `\\n` only (read as bytes, never `str.splitlines`, which also breaks at
  U+2028, U+0085 or a form feed inside a string); a line over the limit is refused without
  reading the rest of it; raw control characters inside strings are tolerated; JSON numbers are
  kept as their literal text (`JsonNumber`), integers past Python's `int()` limit as `BigInt`.
- CSV has a header row; every record has as many cells as the header. Cells are text (a level
  cell holding an integer is read as that integer); a record, however many lines its quoted
  cells span, is at most the limit.

Test: `.venv/bin/pytest tests/problems/test_ingest.py tests/problems/test_ingest_formats.py -q`.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pipeline.core.errors import SieveError
from pipeline.problems.columns import Columns

Warn = Callable[[str], None]
Record = tuple[int, dict[str, Any]]  # (line or row number, the record's fields)
_INT_DIGITS = 4300  # Python's default limit for int() on a string of digits
_INTEGER = re.compile(r"\s*[+-]?\d{1,30}\s*")


@dataclass(frozen=True)
class Limits:
    """How much of a file is read: `cell` bounds one JSONL line, CSV record or Parquet/dataset
    cell; `total` bounds a Parquet file's or dataset's text in the read columns, in all."""

    cell: int
    total: int


@dataclass(frozen=True)
class Rows:
    """The records of one input, in file order; `where(number)` names one for an error, and
    `split_of(number)` is a saved DatasetDict's split of it (None for every other input)."""

    records: Iterator[Record]
    where: Callable[[int], str]
    split_of: Callable[[int], str] | None = None


def _open(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except OSError as exc:
        raise SieveError(f"{path.name}: cannot read ({exc.strerror})") from None


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SieveError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _too_long(where: str, limit: int, what: str = "line") -> SieveError:
    return SieveError(f"{where}: {what} longer than {limit:,} bytes (raise --max-line-bytes)")


# -- JSONL -----------------------------------------------------------------------------------
class BigInt(str):
    """A JSON integer too long for `int()`, kept as its digits (only a problem if it is used)."""


class JsonNumber(str):
    """A JSON number with a fraction or exponent, kept as the literal text of the file."""


def _parse_int(digits: str) -> int | str:
    return int(digits) if len(digits) <= _INT_DIGITS else BigInt(digits)


def _json_record(raw: bytes, where: str) -> dict[str, Any]:
    """One JSONL line as a JSON object; `SieveError` naming `where` otherwise."""
    text = _decode(raw, where)
    try:
        record = json.loads(text, strict=False, parse_int=_parse_int, parse_float=JsonNumber)
    except json.JSONDecodeError as exc:
        raise SieveError(f"{where}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise SieveError(f"{where}: invalid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise SieveError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def jsonl_rows(path: Path, limit: int) -> Rows:
    """The records of a JSONL file, each named `NAME:LINE`."""
    return Rows(_jsonl_records(path, limit), lambda n: f"{path.name}:{n}")


def _jsonl_records(path: Path, limit: int) -> Iterator[Record]:
    with _open(path) as f:
        number = 0
        while raw := f.readline(limit + 1):  # never more than one limit's worth
            number += 1
            where = f"{path.name}:{number}"
            if len(raw.removesuffix(b"\n")) > limit:
                raise _too_long(where, limit)
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if raw.strip():
                yield number, _json_record(raw, where)


# -- CSV -------------------------------------------------------------------------------------
class _Lines:
    """The decoded lines of a CSV file for `csv.reader`, counting lines and the bytes of the
    record being read (`start()` begins a record)."""

    def __init__(self, f: IO[bytes], name: str, limit: int) -> None:
        self.f, self.name, self.limit = f, name, limit
        self.number = 0  # lines read so far
        self.first = 1  # line where the current record starts
        self.size = 0  # bytes of the current record so far

    def start(self) -> None:
        self.first, self.size = self.number + 1, 0

    def __iter__(self) -> Iterator[str]:
        while raw := self.f.readline(self.limit + 1):
            self.number += 1
            where = f"{self.name}:{self.number}"
            if len(raw.rstrip(b"\r\n")) > self.limit:
                raise _too_long(where, self.limit)
            self.size += len(raw)
            if self.size > self.limit + 2:  # a record over several lines (its last newline free)
                raise _too_long(f"{self.name}:{self.first}", self.limit, "record")
            if self.number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            yield _decode(raw, where)


def csv_rows(path: Path, columns: Columns, limit: int) -> Rows:
    """The records of a CSV file with a header row, each named `NAME:LINE` (its first line)."""
    return Rows(_csv_records(path, columns, limit), lambda n: f"{path.name}:{n}")


def _csv_records(path: Path, columns: Columns, limit: int) -> Iterator[Record]:
    # csv's own cap on a cell (128 KiB by default, process-wide) must not undercut ours
    csv.field_size_limit(max(csv.field_size_limit(), limit))
    with _open(path) as f:
        lines = _Lines(f, path.name, limit)
        reader = csv.reader(lines)
        header: list[str] | None = None
        while True:
            lines.start()
            try:
                cells = next(reader, None)
            except csv.Error as exc:
                raise SieveError(f"{path.name}:{lines.first}: invalid CSV ({exc})") from None
            if cells is None:
                return
            if not cells:
                continue  # a blank line
            if header is None:
                header = _csv_header(cells, columns, path.name)
                continue
            if len(cells) != len(header):
                raise SieveError(
                    f"{path.name}:{lines.first}: {len(cells)} cells; the header has "
                    f"{len(header)} (a quote left open?)"
                )
            record: dict[str, Any] = dict(zip(header, cells, strict=True))
            if columns.level is not None and _INTEGER.fullmatch(record[columns.level]):
                record[columns.level] = int(record[columns.level])
            yield lines.first, record


def _csv_header(cells: list[str], columns: Columns, name: str) -> list[str]:
    for field in columns.fields():
        if field not in cells:
            raise SieveError(f"{name}: no column {field!r}; available: {', '.join(cells)}")
        if cells.count(field) > 1:
            raise SieveError(f"{name}: the header names column {field!r} twice")
    return cells
