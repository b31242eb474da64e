"""Where a path a command writes leads, and whether it may be written there: the guard of
`pipeline.core.outputs` (its docstring says what is refused and how each kind of file is
written).

`plan_write` resolves the path as the kernel opens it: relative parts and `..`, symbolic links
and chains of them, links to folders, and descriptor names (`-`, `/dev/stdout`, `/dev/fd/N`,
`/proc/self/fd/N`, `/proc/<pid>/fd/N`, also behind a link); a hard link is only another name of
the same inode. What is judged is the file that would change: its device and inode against the
home's ledger and side files, its first bytes (a DuckDB database has `DUCK` at byte 8, a DuckDB
write-ahead log opens with its version record), and its real name (`X.wal` beside a database
`X`, even before it exists). Only regular files are read, opened without waiting
(`O_NONBLOCK`) and checked to be the inode judged, so judging a FIFO never blocks.

Test: `pytest tests/core/test_output_guard.py`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pipeline.core.errors import SieveError
from pipeline.core.home import SIDE_SUFFIXES

STDOUT = "-"
_DUCKDB_MAGIC = (8, b"DUCK")  # a DuckDB database file has this at this offset
# a DuckDB write-ahead log opens with its version record: field 100 (the record type) = 98
# (WAL_VERSION), then field 101 (DuckDB's WriteAheadLog::WriteVersion, binary serializer)
_WAL_MAGIC = (0, b"d\x00be\x00")
_HEAD = 12  # bytes read to tell a database or a log
_SIDES = (*SIDE_SUFFIXES, ".writer")  # DuckDB's side files, and Sieve's writer lease
_OWN_FD = re.compile(r"/proc/(self|\d+)(?:/task/\d+)?/fd/(\d+)")
_DEV_FD = re.compile(r"/dev/(?:fd/(\d+)|(stdin|stdout|stderr))")  # where /dev/fd is no link
_STREAMS = {"stdin": 0, "stdout": 1, "stderr": 2}
_LINKS_MAX = 40  # symbolic links followed on one path, as Linux does
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # never waits, even on a FIFO
_REGULAR_ONLY = "this command writes regular files it can replace whole (all or nothing)"


@dataclass(frozen=True)
class Plan:
    """How a path is written: through a descriptor this process holds (`fd`), in place, or as a
    new file renamed over `target`, the real name of the file that changes; `info` is the file
    judged (None: a new file)."""

    how: Literal["fd", "in place", "replace"]
    target: Path
    info: os.stat_result | None = None
    fd: int = -1


def plan_write(path: Path, ledger: Path | None, name: str, regular: bool) -> Plan:
    """How `path` is written, once the file it leads to is judged; a SieveError naming it as
    `name` when it may not be. `ledger`: the home's ledger (None: no home); `regular`: only a
    regular file the command owns, replaced at its own name, or a new one (`write_outputs`)."""
    fd = _own_descriptor(path)
    if fd is not None and not regular:
        info = _stat(path, lambda: os.fstat(fd))
        assert info is not None  # an open descriptor always has a file
        _judge(info, lambda: _head_of_descriptor(fd), ledger, name)
        if stat.S_ISREG(info.st_mode) and str(path) != STDOUT:
            _refuse_side_name(Path(os.path.realpath(f"/proc/self/fd/{fd}")), name)
        return Plan("fd", path, info, fd)
    info = _stat(path, lambda: os.stat(path))
    real = Path(os.path.realpath(path))
    _refuse_side_name(real, name)
    if info is None:
        if not real.parent.is_dir():
            raise SieveError(f"cannot write {path}: directory {real.parent} does not exist")
        return Plan("replace", real)
    _judge(info, lambda: _head_of(path, info), ledger, name)
    if stat.S_ISDIR(info.st_mode):
        raise cannot(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    owned = stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and _same(real, info)
    if owned and (regular or not any(hop.startswith("/proc/") for hop in _route(path))):
        return Plan("replace", real, info)
    if regular:
        raise SieveError(f"refused: {name} is {_kind(info)}; {_REGULAR_ONLY}")
    return Plan("in place", path, info)


def _kind(info: os.stat_result) -> str:
    """What a file that cannot be replaced by a rename is, in words."""
    mode = info.st_mode
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if info.st_uid != os.geteuid():
        return "a file of another user"
    return "a file with no name of its own (a deleted file behind a descriptor)"


def _stat(path: Path, get: Callable[[], os.stat_result]) -> os.stat_result | None:
    """`get()`, None for a file that does not exist, any other OSError as one line."""
    try:
        return get()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise cannot(path, exc) from exc


def _route(path: Path) -> list[str]:
    """The names `path` goes by as the kernel follows it: each with its folder's links
    resolved, then the target of each symbolic link in turn (at most `_LINKS_MAX`)."""
    hops: list[str] = []
    current = os.path.join(os.getcwd(), path)
    for _ in range(_LINKS_MAX):
        folder, base = os.path.split(current)
        if base in ("", ".", ".."):  # a folder, named by its path
            hops.append(os.path.realpath(current))
            break
        current = os.path.join(os.path.realpath(folder), base)
        hops.append(current)
        try:
            link = os.readlink(current)
        except OSError:  # not a link (or not there)
            break
        current = os.path.join(os.path.dirname(current), link)
    return hops


def _own_descriptor(path: Path) -> int | None:
    """The descriptor of this process that `path` leads to (`-` is stdout), if any."""
    if str(path) == STDOUT:
        return 1
    for hop in _route(path):
        own = _OWN_FD.fullmatch(hop)
        if own and own.group(1) in ("self", str(os.getpid())):
            return int(own.group(2))
        dev = _DEV_FD.fullmatch(hop)
        if dev:
            return int(dev.group(1)) if dev.group(1) else _STREAMS[dev.group(2)]
    return None


def _same(real: Path, info: os.stat_result) -> bool:
    """True when `real` (the path with its links followed by name) is the file `info`
    describes; not so when a link on the way was a descriptor's (a deleted file, a pipe)."""
    try:
        return same_file(os.stat(real), info)
    except OSError:
        return False


def same_file(one: os.stat_result, other: os.stat_result) -> bool:
    """True when both describe one file (device and inode)."""
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


def _judge(info: os.stat_result, head: Callable[[], bytes], ledger: Path | None, name: str) -> None:
    """SieveError when `info` is the home's ledger or a side file of it, or holds a DuckDB
    database or log (`head()`: its first bytes)."""
    _refuse_ledger(info, ledger, name)
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return
    try:
        data = head()
    except OSError as exc:
        raise SieveError(
            f"refused: cannot read {name} to check that it is not a ledger "
            f"({exc.strerror or exc}); write to another file"
        ) from exc
    kind = _duckdb_kind(data)
    if kind is not None:
        raise SieveError(f"refused: {name} is a DuckDB {kind}; write to another file")


def _duckdb_kind(head: bytes) -> str | None:
    for (offset, magic), kind in (
        (_DUCKDB_MAGIC, "database (a Sieve ledger?)"),
        (_WAL_MAGIC, "write-ahead log (a Sieve ledger's side file?)"),
    ):
        if head[offset : offset + len(magic)] == magic:
            return kind
    return None


def _refuse_ledger(info: os.stat_result, ledger: Path | None, name: str) -> None:
    """SieveError when `info` is the ledger or one of its side files (same device and inode)."""
    if ledger is None:
        return
    for own in (ledger, *(ledger.with_name(ledger.name + suffix) for suffix in _SIDES)):
        try:
            mine = os.stat(own)
        except OSError:
            continue
        if same_file(mine, info):
            raise SieveError(f"refused: {name} is the ledger itself ({own.name})")


def _refuse_side_name(real: Path, name: str) -> None:
    """SieveError when `real` is named as a side file of a DuckDB database beside it (`X.wal`
    next to the database `X`), whether it exists or not."""
    for suffix in _SIDES:
        if not real.name.endswith(suffix) or len(real.name) == len(suffix):
            continue
        database = real.with_name(real.name[: -len(suffix)])
        if _is_database(database):
            raise SieveError(
                f"refused: {name} is {real.name}, a side file of the DuckDB database "
                f"{database} (a Sieve ledger?); write to another file"
            )


def _is_database(path: Path) -> bool:
    """True when `path` is a regular file holding a DuckDB database (not a log)."""
    with suppress(OSError):
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode):
            return _head_of(path, info)[_DUCKDB_MAGIC[0] :].startswith(_DUCKDB_MAGIC[1])
    return False


def _head_of(path: Path, info: os.stat_result) -> bytes:
    """The first bytes of the file at `path`, opened without waiting and checked to be `info`."""
    fd = os.open(path, _READ)
    try:
        if not same_file(os.fstat(fd), info):
            raise OSError(errno.ESTALE, "it changed while it was checked")
        return os.pread(fd, _HEAD, 0)
    finally:
        os.close(fd)


def _head_of_descriptor(fd: int) -> bytes:
    """The first bytes of the regular file open as `fd`, opened afresh if `fd` is write-only."""
    try:
        return os.pread(fd, _HEAD, 0)
    except OSError:
        return _head_of(Path(f"/proc/self/fd/{fd}"), os.fstat(fd))


def cannot(path: Path, exc: OSError) -> SieveError:
    return SieveError(f"cannot write {path}: {exc.strerror or exc}")
