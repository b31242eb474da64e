"""Readers and writers in separate processes: they wait for each other, and say who holds the lock.

Every test uses real processes: a DuckDB connection held by a child, or a curation
(`locking_child.py`) paused mid-run while the test reads the ledger with `sieve sql`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

from pipeline.errors import SieveError
from pipeline.store import Ledger

pytestmark = pytest.mark.integration  # 53 s: waits on locks on purpose

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("locking_child.py")
SCREEN_CHUNK = 30 * 8  # CFG.chunk_size prompts x CFG.screen_g samples (tests/curate_child.py)


def env(wait: float | None = None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "SIEVE_CRASH_AT"}
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    if wait is not None:
        out["SIEVE_LOCK_WAIT"] = str(wait)
    return out


@contextmanager
def holder(path: Path, read_only: bool, seconds: float | None = None) -> Iterator[int]:
    """A child holding a DuckDB connection to `path` (for `seconds`, else until the block ends);
    yields its PID once it holds the connection."""
    code = (
        "import duckdb, sys, time\n"
        f"con = duckdb.connect({str(path)!r}, read_only={read_only})\n"
        "print('held', flush=True)\n"
        f"time.sleep({seconds}) if {seconds is not None} else sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.communicate("", timeout=60)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    led = tmp_path / "sieve.duckdb"
    Ledger.open(path=led).close()
    return led


def timed_open(path: Path, **kwargs: bool) -> float:
    start = time.monotonic()
    with Ledger.open(path=path, **kwargs) as led:
        assert led.run("SELECT count(*) FROM problems") == [(0,)]
    return time.monotonic() - start


@pytest.mark.parametrize("read_only", [True, False])
def test_an_opener_waits_for_a_writer_to_finish(
    path: Path, read_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "60")
    with holder(path, read_only=False, seconds=1.5):
        waited = timed_open(path, read_only=read_only)
    assert waited >= 1.0  # it waited for the writer instead of failing at once


def test_a_writer_waits_for_a_reader_to_close(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "60")
    with holder(path, read_only=True, seconds=1.5):
        waited = timed_open(path)
    assert waited >= 1.0


@pytest.mark.parametrize(
    ("held_read_only", "open_read_only", "how"),
    [
        (False, True, "locked by another writer"),
        (False, False, "locked by another writer"),
        (True, False, "open in a reader"),
    ],
)
def test_the_wait_ends_in_one_line_naming_the_holder(
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    held_read_only: bool,
    open_read_only: bool,
    how: str,
) -> None:
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "0.5")
    with holder(path, read_only=held_read_only) as pid:
        start = time.monotonic()
        with pytest.raises(SieveError) as info:
            Ledger.open(path=path, read_only=open_read_only)
        waited = time.monotonic() - start
    message = str(info.value)
    assert 0.5 <= waited < 10
    assert how in message and f"process {pid}: python" in message
    assert "SIEVE_LOCK_WAIT=0.5" in message and "\n" not in message


def test_a_bad_lock_wait_setting_is_refused(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "soon")
    with pytest.raises(SieveError, match="SIEVE_LOCK_WAIT='soon' is not a number"):
        Ledger.open(path=path)


LEASE_HOLDER = """
import sys
from pathlib import Path
from pipeline.problems import generate_mix
from pipeline.store import Ledger
led = Ledger.open(path=Path(sys.argv[1]), transient=True)
print("open", flush=True)
sys.stdin.read()
led.write("problems", generate_mix({"arith": [1]}, 3, seed=0))
led.close()
"""


def test_a_transient_writer_lets_readers_in_and_keeps_other_writers_out(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "0.5")
    proc = subprocess.Popen(
        [sys.executable, "-c", LEASE_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        timed_open(path, read_only=True)  # within 0.5 s: no DuckDB lock between its commits
        with pytest.raises(SieveError, match=f"locked by another writer \\(process {proc.pid}"):
            Ledger.open(path=path)  # but the writer lease keeps a second writer out
    finally:
        proc.communicate("", timeout=60)
    assert proc.returncode == 0  # its own write went through after the reader had closed
    with Ledger.open(path=path) as led:
        assert led.run("SELECT count(*) FROM problems") == [(3,)]


def start_curation(home: Path, mode: str, free: int, wait: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(home / "sieve.duckdb"), mode, str(home / "go"), str(free)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(wait),
    )


def sieve_sql(home: Path, query: str, wait: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "sql", query, "--format=csv", f"--home={home}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(wait),
    )


def read_until(proc: subprocess.Popen[str], line: str) -> list[str]:
    assert proc.stdout is not None
    seen = []
    while (got := proc.stdout.readline()) != "":
        seen.append(got.strip())
        if got.strip() == line:
            return seen
    raise AssertionError(f"child ended before {line!r}: {seen}; {proc.stderr.read()}")  # type: ignore[union-attr]


def finish(proc: subprocess.Popen[str], home: Path) -> tuple[int, str, str]:
    (home / "go").touch()
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def test_sieve_sql_answers_while_a_curation_runs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = start_curation(home, "transient", free=1, wait=60)
    try:
        read_until(proc, "screen 1")  # one chunk committed; the next one waits at the gate
        result = sieve_sql(home, "SELECT count(*) AS n FROM rollouts", wait=60)
        assert proc.poll() is None  # the curation is still running
    finally:
        code, out, err = finish(proc, home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["n", str(SCREEN_CHUNK)]
    assert code == 0, err
    assert out.strip().endswith("done")


def test_a_curation_holding_its_connection_would_lock_readers_out(tmp_path: Path) -> None:
    """The control: the same curation on one connection for the whole run (how flows opened
    the ledger before) keeps `sieve sql` out, and the error line names the curation's process."""
    home = tmp_path / "home"
    proc = start_curation(home, "held", free=1, wait=60)
    try:
        read_until(proc, "screen 1")
        result = sieve_sql(home, "SELECT count(*) AS n FROM rollouts", wait=0.5)
    finally:
        code, _, err = finish(proc, home)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and f"(process {proc.pid}: python" in lines[0]
    assert code == 0, err


def test_a_curation_waits_for_an_open_reader_then_succeeds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Ledger.open(home).close()
    reader = duckdb.connect(str(home / "sieve.duckdb"), read_only=True)  # a DuckDB shell, say
    proc = start_curation(home, "transient", free=10**6, wait=60)
    try:
        read_until(proc, "opening")
        time.sleep(1.5)
        assert proc.poll() is None  # still waiting for the reader: nothing sampled yet
        assert reader.execute("SELECT count(*) FROM rollouts").fetchall() == [(0,)]
    finally:
        reader.close()
    code, out, err = finish(proc, home)
    assert code == 0, err
    assert "screen 1" in out.split("\n") and out.strip().endswith("done")
    with Ledger.open(home, read_only=True) as led:
        statuses = led.run("SELECT DISTINCT status FROM sampling_runs")
    assert statuses == [("finished",)]


def test_a_curation_that_waits_too_long_fails_in_one_line_naming_the_reader(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    Ledger.open(home).close()
    with holder(home / "sieve.duckdb", read_only=True) as pid:
        proc = start_curation(home, "transient", free=10**6, wait=1)
        code, _, err = finish(proc, home)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert "open in a reader" in lines[0] and f"process {pid}: python" in lines[0]
