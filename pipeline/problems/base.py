"""Common pieces of problem frames: content ids, the held-out split, the schema, frame building.

A problem is identified by a hash of its content (question, answer, verifier), and its split is a
pure function of that id, so a held-out problem stays held out however and whenever it is made.
Test: `.venv/bin/pytest tests/problems -q`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal, Protocol

import polars as pl

from pipeline.core.errors import SieveError

Split = Literal["train", "heldout"]

PROBLEM_SCHEMA: dict[str, pl.DataType] = {
    "problem_id": pl.Utf8(),
    "source": pl.Utf8(),
    "family": pl.Utf8(),
    "level": pl.Int32(),
    "params": pl.Utf8(),
    "question": pl.Utf8(),
    "answer": pl.Utf8(),
    "verifier": pl.Utf8(),
    "split": pl.Utf8(),
    "created_at": pl.Datetime("us", "UTC"),
}

# A row as the builders hand it over: every column except `created_at`, in schema order.
Row = tuple[str, str, str, int, str, str, str, str, str]
ROW_COLUMNS: tuple[str, ...] = tuple(PROBLEM_SCHEMA)[:-1]


class Family(Protocol):
    """What a problem family module provides (see `pipeline.problems.arith` for an example)."""

    NAME: str
    LEVELS: dict[int, str]

    def make(self, level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]: ...


def problem_id(question: str, answer: str, verifier: str) -> str:
    """Content hash of a problem: the first 16 hex chars of sha256(question, answer, verifier)."""
    text = "\x1f".join((question, answer, verifier))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def check_heldout_pct(heldout_pct: float) -> None:
    """Raise `SieveError` unless 0 <= heldout_pct <= 100."""
    if not 0.0 <= heldout_pct <= 100.0:
        raise SieveError(f"heldout_pct must be between 0 and 100, got {heldout_pct}")


def split_for(pid: str, heldout_pct: float = 10.0) -> Split:
    """The split of a problem, fixed by its id: about `heldout_pct` percent are held out."""
    return "heldout" if int(pid[:8], 16) % 10000 < heldout_pct * 100 else "train"


def canonical_number(value: Fraction | int) -> str:
    """Canonical answer text: "42", "-3", "17/3", "-1/2" (always reduced)."""
    frac = Fraction(value)
    if frac.denominator == 1:
        return str(frac.numerator)
    return f"{frac.numerator}/{frac.denominator}"


def params_json(params: dict[str, Any]) -> str:
    """Params as compact JSON text with sorted keys, so equal params give equal text."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def make_row(
    *,
    source: str,
    family: str,
    level: int,
    params: str,
    question: str,
    answer: str,
    verifier: str,
    heldout_pct: float,
) -> Row:
    """One problem row (without `created_at`): computes the id and the split."""
    pid = problem_id(question, answer, verifier)
    split = split_for(pid, heldout_pct)
    return (pid, source, family, level, params, question, answer, verifier, split)


def build_frame(rows: Iterable[Row], created_at: datetime | None = None) -> pl.DataFrame:
    """A `PROBLEM_SCHEMA` frame from rows in one go; `created_at` defaults to now (UTC)."""
    stamp = created_at if created_at is not None else datetime.now(UTC)
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) or [[] for _ in ROW_COLUMNS]
    data = {name: list(col) for name, col in zip(ROW_COLUMNS, columns, strict=True)}
    schema = {name: PROBLEM_SCHEMA[name] for name in ROW_COLUMNS}
    frame = pl.DataFrame(data, schema=schema)
    return frame.with_columns(pl.lit(stamp).cast(PROBLEM_SCHEMA["created_at"]).alias("created_at"))


def empty_frame() -> pl.DataFrame:
    """A problem frame with no rows."""
    return pl.DataFrame(schema=PROBLEM_SCHEMA)


def format_levels(levels: Iterable[int]) -> str:
    """Levels as compact text: "1-9" when contiguous, else "1, 3, 5"."""
    ordered = sorted(levels)
    if ordered and ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(str(level) for level in ordered)


def check_level(family: str, levels: dict[int, str], level: int) -> None:
    """Raise `SieveError` unless `level` is one of the family's levels."""
    if level not in levels:
        raise SieveError(f"level {level} not in {family} levels {format_levels(levels)}")
