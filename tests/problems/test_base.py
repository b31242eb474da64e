"""Ids, splits, schema and frame building in `pipeline.problems.base`.

Run: `.venv/bin/pytest tests/problems/test_base.py -q`.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from fractions import Fraction

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.problems.base import (
    PROBLEM_SCHEMA,
    build_frame,
    canonical_number,
    check_heldout_pct,
    format_levels,
    make_row,
    problem_id,
    split_for,
)


def test_problem_id_is_sha256_prefix_of_joined_fields() -> None:
    expected = hashlib.sha256(b"1+1\x1f2\x1fmath").hexdigest()[:16]
    assert problem_id("1+1", "2", "math") == expected
    assert len(expected) == 16
    assert problem_id("1+1", "2", "code") != expected


def test_split_for_uses_the_id_prefix() -> None:
    assert split_for("00000000aaaaaaaa") == "heldout"  # 0 % 10000 < 1000
    assert split_for("000003e8ffffffff") == "train"  # 1000 is not < 1000
    assert split_for("000003e7ffffffff") == "heldout"  # 999
    assert split_for("00000000aaaaaaaa", heldout_pct=0.0) == "train"
    assert split_for("ffffffffffffffff", heldout_pct=100.0) == "heldout"


def test_schema_column_order() -> None:
    assert list(PROBLEM_SCHEMA) == [
        "problem_id",
        "source",
        "family",
        "level",
        "params",
        "question",
        "answer",
        "verifier",
        "split",
        "created_at",
    ]
    assert PROBLEM_SCHEMA["level"] == pl.Int32
    assert PROBLEM_SCHEMA["created_at"] == pl.Datetime("us", "UTC")


def test_build_frame_has_the_schema_even_when_empty() -> None:
    assert build_frame([]).schema == pl.Schema(PROBLEM_SCHEMA)
    row = make_row(
        source="s",
        family="f",
        level=3,
        params="{}",
        question="1+1",
        answer="2",
        verifier="math",
        heldout_pct=10.0,
    )
    stamp = datetime(2024, 1, 2, tzinfo=UTC)
    frame = build_frame([row, row], created_at=stamp)
    assert frame.schema == pl.Schema(PROBLEM_SCHEMA)
    assert frame.height == 2
    assert frame["created_at"].to_list() == [stamp, stamp]
    assert frame["problem_id"][0] == problem_id("1+1", "2", "math")


@pytest.mark.parametrize(
    ("value", "text"),
    [(42, "42"), (-3, "-3"), (Fraction(17, 3), "17/3"), (Fraction(-2, 4), "-1/2"), (0, "0")],
)
def test_canonical_number(value: Fraction | int, text: str) -> None:
    assert canonical_number(value) == text


def test_format_levels() -> None:
    assert format_levels([3, 1, 2, 4]) == "1-4"
    assert format_levels([1, 3, 5]) == "1, 3, 5"


@pytest.mark.parametrize("pct", [-1.0, 100.5])
def test_heldout_pct_range(pct: float) -> None:
    with pytest.raises(SieveError, match="heldout_pct"):
        check_heldout_pct(pct)
