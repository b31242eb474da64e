"""Disk full: a write that runs out of space fails cleanly and what was stored stays readable.

Mounts a small tmpfs (needs root and the mount capability; skips with the reason otherwise),
fills a ledger there until a write fails, then checks the earlier data is intact after reopening.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from pipeline.problems import generate_mix
from pipeline.store import Ledger


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = f"cannot mount a small tmpfs here: {done.stderr.strip() or 'mount failed'}"
        print(reason)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.integration  # 6 s
def test_a_write_that_fills_the_disk_fails_and_earlier_data_stays(small_disk: Path) -> None:
    first = generate_mix({"arith": [2, 3]}, 500, seed=1)
    with Ledger.open(small_disk) as ledger:
        ledger.write("problems", first)
    big = pl.concat([generate_mix({"word": list(range(1, 9))}, 20_000, seed=s) for s in range(4)])
    failure: Exception | None = None
    with Ledger.open(small_disk) as ledger:
        last_ok = ledger.checksum("problems")
        for i in range(50):  # until the 6 MiB disk is full
            try:
                tagged = big.with_columns(pl.format("{}-{}", "problem_id", pl.lit(i)))
                ledger.write("problems", tagged)
            except Exception as exc:
                failure = exc
                break
            last_ok = ledger.checksum("problems")
    assert failure is not None, "the disk never filled up"
    assert "space" in str(failure).lower(), failure
    with Ledger.open(small_disk, read_only=True) as ledger:
        assert ledger.checksum("problems") == last_ok  # the failed batch left nothing behind
        ids = first["problem_id"].to_list()
        kept = ledger.run(
            "SELECT count(*) FROM problems WHERE list_contains($ids, problem_id)", {"ids": ids}
        )
        assert kept == [(first.height,)]
