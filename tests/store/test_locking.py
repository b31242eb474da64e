"""Readers and writers in separate processes: they wait for each other, and say who holds the lock.

Every test uses real processes: a DuckDB connection held by a child, or a curation
(`locking_child.py`) paused mid-run while the test reads the ledger with `sieve sql`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import pytest

from pipeline.core.errors import SieveError
from pipeline.store import Ledger, locks

pytestmark = pytest.mark.integration  # 53 s: waits on locks on purpose

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("locking_child.py")
SCREEN_CHUNK = 30 * 8  # CFG.chunk_size prompts x CFG.screen_g samples (tests/curate_child.py)
T = TypeVar("T")


def env(wait: float | None = None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "SIEVE_CRASH_AT"}
    out["PYTHONPATH"] = str(ROOT) + os.pathsep + out.get("PYTHONPATH", "")
    if wait is not None:
        out["SIEVE_LOCK_WAIT"] = str(wait)
    return out


@contextmanager
def holder(path: Path, read_only: bool) -> Iterator[int]:
    """A child holding a DuckDB connection to `path` until the block ends (it exits when its
    stdin closes); yields its PID once it holds the connection."""
    code = (
        "import duckdb, sys\n"
        f"con = duckdb.connect({str(path)!r}, read_only={read_only})\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
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


def count_problems(path: Path, read_only: bool = False) -> int:
    with Ledger.open(path=path, read_only=read_only) as led:
        ((n,),) = led.run("SELECT count(*) FROM problems")
    return int(n)


class Refusals:
    """Counts the attempts inside `locks.wait_for` (in this process) that met another process's
    lock (raised `Busy`); `first` is set at the first: from then on the opener is waiting."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count, self.first = 0, threading.Event()
        real = locks.wait_for

        def wait_for(attempt: Callable[[], T], path: Path) -> T:
            def observed() -> T:
                try:
                    return attempt()
                except locks.Busy:
                    self.count += 1
                    self.first.set()
                    raise

            return real(observed, path)

        monkeypatch.setattr(locks, "wait_for", wait_for)


def open_after_release(
    path: Path, held_read_only: bool, monkeypatch: pytest.MonkeyPatch, read_only: bool = False
) -> None:
    """Open `path` while another process holds it; the open is refused, keeps waiting while the
    holder holds, and succeeds once the holder is gone. Ordered by events, not by sleeps."""
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "600")  # far beyond the test: the wait never runs out
    refused = Refusals(monkeypatch)
    with ThreadPoolExecutor(max_workers=1) as pool:
        with holder(path, read_only=held_read_only):
            opened = pool.submit(count_problems, path, read_only)
            assert refused.first.wait(120), opened.exception(0) if opened.done() else "no try"
            assert not opened.done()  # refused, and still waiting: neither failed nor opened
        # the holder has exited (the block waits for it), so the lock is free
        assert opened.result(timeout=120) == 0


@pytest.mark.parametrize("read_only", [True, False])
def test_an_opener_waits_for_a_writer_to_finish(
    path: Path, read_only: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_after_release(path, False, monkeypatch, read_only)


def test_a_writer_waits_for_a_reader_to_close(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    open_after_release(path, True, monkeypatch)


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
    refused = Refusals(monkeypatch)
    with holder(path, read_only=held_read_only) as pid, pytest.raises(SieveError) as info:
        Ledger.open(path=path, read_only=open_read_only)
    message = str(info.value)
    assert refused.count >= 1  # it met the holder's lock
    waited = re.search(r"waited (\d+\.\d) s", message)  # the whole wait, by the opener's clock
    assert waited is not None and float(waited.group(1)) >= 0.5, message
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
        assert count_problems(path, read_only=True) == 0  # no DuckDB lock between its commits
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
        read_until(proc, "waiting")  # its open met the reader's lock
        assert proc.poll() is None  # and it waits for the reader (60 s): nothing sampled yet
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
