"""A home that cannot be turned against its user (issue 32, point 1): links planted beside the
ledger (a shared data folder) are refused with one line naming them, and their targets keep
their bytes. The writer lease is opened without following a link and used only as a regular
file with no other hard link; DuckDB's side files (`.wal`, `.wal.recovery`, `.wal.checkpoint`)
are checked the same way before any connection opens the ledger, read-only ones included.

Test: `pytest tests/store/test_side_files.py`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.core.errors import SieveError
from pipeline.store import Ledger

PRECIOUS = "someone else's file\n"
SIDE = [".wal", ".wal.recovery", ".wal.checkpoint"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with Ledger.open(home) as ledger:
        ledger.run("SELECT 1")
    (home / "sieve.duckdb.writer").unlink()  # left by the first writer, as it always is
    return home


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(PRECIOUS)
    return path


def symlink(target: Path, link: Path) -> None:
    link.symlink_to(target)


def hardlink(target: Path, link: Path) -> None:
    os.link(target, link)


def refused(home: Path, read_only: bool) -> str:
    with pytest.raises(SieveError) as caught:
        Ledger.open(home, read_only=read_only).close()
    line = str(caught.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize(
    ("plant", "why"), [(symlink, "symbolic link"), (hardlink, "other hard link")]
)
def test_a_planted_lease_is_refused_and_its_target_keeps_its_bytes(
    home: Path, victim: Path, plant: Callable[[Path, Path], None], why: str
) -> None:
    lease = home / "sieve.duckdb.writer"
    plant(victim, lease)
    line = refused(home, read_only=False)
    assert f"lease {lease}" in line and why in line, line
    assert victim.read_text() == PRECIOUS  # not truncated, no PID written into it


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "reader"])
@pytest.mark.parametrize("suffix", SIDE)
@pytest.mark.parametrize(
    ("plant", "why"), [(symlink, "symbolic link"), (hardlink, "other hard link")]
)
def test_a_planted_side_file_is_refused_before_duckdb_opens_the_ledger(
    home: Path,
    victim: Path,
    plant: Callable[[Path, Path], None],
    why: str,
    suffix: str,
    read_only: bool,
) -> None:
    side = home / f"sieve.duckdb{suffix}"
    plant(victim, side)
    line = refused(home, read_only)
    assert f"refused: {side} beside ledger" in line and why in line, line
    assert victim.read_text() == PRECIOUS


def test_a_side_file_that_is_not_a_regular_file_is_refused(home: Path) -> None:
    wal = home / "sieve.duckdb.wal"
    wal.mkdir()
    line = refused(home, read_only=True)
    assert f"{wal} beside ledger" in line and "not a regular file" in line, line


def test_a_lease_that_is_a_fifo_is_refused(home: Path) -> None:
    lease = home / "sieve.duckdb.writer"
    os.mkfifo(lease)
    assert "not a regular file" in refused(home, read_only=False)


def test_control_an_ordinary_home_still_opens_and_takes_its_lease(home: Path) -> None:
    with Ledger.open(home) as ledger:
        assert ledger.run("SELECT 1") == [(1,)]
    lease = home / "sieve.duckdb.writer"
    assert lease.is_file() and not lease.is_symlink()
    assert lease.read_text().strip() == str(os.getpid())
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.run("SELECT 1") == [(1,)]
