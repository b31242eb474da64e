"""Opening the ledger file while other processes use it: waiting, the writer lease, clear errors.

DuckDB lets one process open a database file read-write, or any number open it read-only; a
second opener gets a lock error at once. Here every opener instead waits with backoff (50 ms,
doubling to 1 s) for up to `$SIEVE_LOCK_WAIT` seconds (default 60; 0 fails at once), then stops
with one line that names the holder (DuckDB's error gives its PID; `/proc` gives its command).

The writer lease (`<ledger>.writer`, a POSIX lock, so neither forked nor exec'd children inherit
it) keeps two writers apart for their whole lives, while a long-running writer opens DuckDB
itself only for each commit (`Ledger.open(..., transient=True)`), so readers get in between.
Within one process the lease is shared (counted), as DuckDB shares one database per file.

A home may be a shared folder, so nothing beside the ledger is trusted: the lease is opened with
`O_NOFOLLOW` and used only if it is a regular file with no other hard link, and before DuckDB
opens the ledger its side files (`.wal`, `.wal.recovery`, `.wal.checkpoint`) must be absent or
such files too (DuckDB would write through a planted link, and lets a sandboxed query read them).

Test: `pytest tests/store/test_locking.py`.
"""

from __future__ import annotations

import fcntl
import math
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from pipeline.core.errors import SieveError
from pipeline.core.home import side_files

LOCK_WAIT_ENV = "SIEVE_LOCK_WAIT"
DEFAULT_LOCK_WAIT = 60.0  # seconds: a chunk commit takes well under one; a reader's query, a few
_FIRST_PAUSE, _MAX_PAUSE = 0.05, 1.0
_DAMAGED = re.compile(r"not a valid DuckDB database|Could not read enough bytes|corrupt", re.I)
T = TypeVar("T")


class Busy(Exception):
    """The file or the lease is held by another process (`what` says how, `pid` who)."""

    def __init__(self, what: str, pid: int | None):
        super().__init__(what)
        self.what, self.pid = what, pid


def lock_wait() -> float:
    """Seconds to wait for another process's lock: `$SIEVE_LOCK_WAIT`, else 60."""
    text = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCK_WAIT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise SieveError(f"{LOCK_WAIT_ENV}={text!r} is not a number of seconds >= 0")
    return value


def wait_for(attempt: Callable[[], T], path: Path) -> T:
    """`attempt()`, retried with backoff while it raises `Busy`, up to `lock_wait()` seconds."""
    limit, start, pause = lock_wait(), time.monotonic(), _FIRST_PAUSE
    while True:
        try:
            return attempt()
        except Busy as busy:
            waited = time.monotonic() - start
            if waited >= limit:
                raise SieveError(_busy_line(path, busy, waited, limit)) from None
            time.sleep(min(pause, limit - waited))
            pause = min(pause * 2, _MAX_PAUSE)


def _busy_line(path: Path, busy: Busy, waited: float, limit: float) -> str:
    who = f" ({describe_process(busy.pid)})" if busy.pid else ""
    return (
        f"ledger {path} is {busy.what}{who}; waited {waited:.1f} s ({LOCK_WAIT_ENV}={limit:g}): "
        f"let it finish and retry, raise {LOCK_WAIT_ENV}, or point --home / SIEVE_HOME at "
        "another ledger"
    )


def describe_process(pid: int) -> str:
    """`process 123: sieve curate --home x` (the command line cut to 80 characters)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"process {pid}"
    words = [a.decode(errors="replace") for a in args if a]
    if words:
        words[0] = os.path.basename(words[0])
    command = " ".join(" ".join(words).split())
    return f"process {pid}: {command[:77] + '...' if len(command) > 80 else command}"


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def damaged(path: Path, exc: BaseException) -> SieveError:
    return SieveError(f"ledger {path} is damaged or not a DuckDB file: {one_line(exc)}")


def connect(
    path: Path, read_only: bool, config: dict[str, Any] | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to the file (with DuckDB `config` options), waiting while another
    process holds a conflicting lock."""
    return wait_for(lambda: _try_connect(path, read_only, config or {}), path)


def check_side_files(path: Path) -> None:
    """A SieveError unless each side file of the ledger at `path` is absent or a regular file
    with no other hard link (a planted link would turn DuckDB's writes and reads elsewhere)."""
    for side in side_files(path):
        try:
            info = os.lstat(side)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise SieveError(f"cannot check {side} beside ledger {path}: {one_line(exc)}") from None
        problem = _untrusted(info)
        if problem:
            raise SieveError(
                f"refused: {side} beside ledger {path} {problem}; remove it (when no sieve "
                "process uses the ledger) and retry"
            )


def _untrusted(info: os.stat_result) -> str:
    """Why a file beside the ledger with this `lstat` cannot be used, or ''."""
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_nlink > 1:
        return f"has {info.st_nlink - 1} other hard link(s)"
    return ""


def _try_connect(path: Path, read_only: bool, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    check_side_files(path)
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config)
    except duckdb.Error as exc:
        text = one_line(exc)
        if "Could not set lock" in text or "Conflicting lock" in text:
            holder = re.search(r"\(PID (\d+)\)", text)
            # DuckDB suggests read-only mode only when the holders are readers
            writer = read_only or "read-only mode" not in text
            what = "locked by another writer" if writer else "open in a reader"
            raise Busy(what, int(holder.group(1)) if holder else None) from None
        if _DAMAGED.search(text):
            raise damaged(path, exc) from None
        raise SieveError(f"cannot open ledger {path}: {text}") from None


_LEASES: dict[Path, tuple[int, int]] = {}  # lease file -> (descriptor, holders in this process)
_LEASES_LOCK = threading.Lock()


def take_lease(path: Path) -> Path:
    """Hold the writer lease of the ledger at `path` (waiting for another writer); returns the
    key to give to `drop_lease`."""
    resolved = path.resolve()
    key = resolved.with_name(resolved.name + ".writer")
    with _LEASES_LOCK:
        if key in _LEASES:
            fd, holders = _LEASES[key]
            _LEASES[key] = (fd, holders + 1)
            return key
        return _first_lease(path, key)


def _first_lease(path: Path, key: Path) -> Path:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(key, flags, 0o644)
    except OSError as exc:
        if not os.path.islink(key):
            raise SieveError(f"cannot open ledger {path} for writing: {one_line(exc)}") from None
        fd = -1
    problem = _untrusted(os.fstat(fd)) if fd >= 0 else "is a symbolic link"
    if problem:
        if fd >= 0:
            os.close(fd)
        raise SieveError(
            f"refused: lease {key} of ledger {path} {problem}; remove it (when no sieve process "
            "uses the ledger) and retry"
        )
    try:
        wait_for(lambda: _lock(fd), path)
    except BaseException:
        os.close(fd)
        raise
    try:  # who holds it, for the next writer's error line; best effort (the disk may be full)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass
    _LEASES[key] = (fd, 1)
    return key


def _lock(fd: int) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            pid: int | None = int(os.pread(fd, 32, 0).split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        raise Busy("locked by another writer", pid) from None


def drop_lease(key: Path) -> None:
    with _LEASES_LOCK:
        fd, holders = _LEASES[key]
        if holders > 1:
            _LEASES[key] = (fd, holders - 1)
            return
        del _LEASES[key]
        os.close(fd)  # closing the descriptor releases the lock
