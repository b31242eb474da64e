"""`Ledger.write_parts`: one table's rows in parts inside one transaction (`sieve ingest` of
millions of problems), all or nothing, a key repeated across parts keeping its first row.

Run: `.venv/bin/pytest tests/store/test_ledger_parts.py -q`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.problems import generate
from pipeline.store import Ledger


def parts(frame: pl.DataFrame, size: int) -> Iterator[pl.DataFrame]:
    return (frame.slice(start, size) for start in range(0, frame.height, size))


def test_parts_land_together_and_a_repeated_key_keeps_its_first_row() -> None:
    frame = generate("arith", [1, 2], 30, seed=0)
    with Ledger.memory() as ledger:
        twice = pl.concat([frame, frame.with_columns(family=pl.lit("copy"))])
        assert ledger.write_parts("problems", parts(twice, 7)) == frame.height
        stored = ledger.sql("SELECT family FROM problems")
        assert set(stored["family"]) == {"arith"} and stored.height == frame.height
        assert ledger.write_parts("problems", parts(frame, 11)) == 0  # all stored already


def test_a_failing_part_leaves_nothing_and_the_ledger_usable() -> None:
    frame = generate("arith", [1], 20, seed=1)
    broken = frame.slice(10).with_columns(split=pl.lit("nowhere"))  # fails the CHECK
    with Ledger.memory() as ledger:
        before = ledger.checksum("problems")
        with pytest.raises(Exception, match="CHECK constraint"):
            ledger.write_parts("problems", [frame.slice(0, 10), broken])
        assert ledger.checksum("problems") == before
        assert ledger.write_parts("problems", [frame]) == frame.height  # the view was dropped


def test_a_read_only_ledger_refuses(tmp_path: Path) -> None:
    home = tmp_path
    with Ledger.open(home):
        pass
    with Ledger.open(home, read_only=True) as ledger, pytest.raises(SieveError, match="read-only"):
        ledger.write_parts("problems", [])
