"""One guarded writer for every file a command writes where the user said (issue 47 point 6):
`sieve sql --output`, `sieve backtest --png`, and the files `sieve report` and `sieve export`
write into their `--output` folders.

`open_output(path, mode, ledger=...)` opens `path` for writing:

- `-` and `/dev/stdout` are the process's stdout (`sys.stdout`), `/dev/stderr` its stderr, and
  `/dev/fd/N` and `/proc/self/fd/N` that open descriptor (duplicated), also at the end of a
  symbolic link: never a file of that name, never truncated or renamed over;
- the ledger is never written, under any name: a target with the device and inode of the
  ledger or one of its side files (a symbolic or hard link to it), or any file that is a DuckDB
  database, is refused with one `SieveError` line before anything is written;
- a regular file (or a new one) is written as a new file beside it and renamed over it at the
  end, so a failed write leaves it as it was. A symbolic link is written through: the file it
  points to is replaced, the link stays. A hard-linked name is replaced as a name (the other
  names keep the old contents);
- anything else that exists (a device, a FIFO), and a path that goes through `/dev` or `/proc`,
  is written in place, never renamed over;
- only the new file beside the target is ever removed (`PARTIAL` lists it while it is written,
  for a process that must stop mid-write). Every OSError is one `cannot write PATH: ...` line;
- `write_outputs` writes the several files of one command all or nothing: each new file is
  written before the first is renamed into place, so a failed `report` or `export` leaves the
  folder as it was (issue 47: it left new figures beside the old page, data without its card).

Test: `pytest tests/cli/test_bad_inputs.py -k output`, `tests/cli/test_sql_sandbox.py`.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pipeline.core.errors import SieveError
from pipeline.core.home import side_files

Mode = Literal["w", "wb"]
STDOUT = "-"
PARTIAL: list[Path] = []  # the new files being written beside their targets, removed on failure
_DUCKDB_MAGIC = (8, b"DUCK")  # a DuckDB database file has this at this offset
_FD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
_SPECIAL = ("/dev/", "/proc/", "/sys/")


@dataclass(frozen=True)
class _Plan:
    """How a path is written: to an open descriptor, in place, or as a new file renamed over
    `target` (the path with every symbolic link followed)."""

    how: Literal["fd", "in place", "replace"]
    target: Path
    fd: int = -1


def check_output(path: Path | str, *, ledger: Path | None = None, label: str = "") -> None:
    """SieveError unless `path` may be written (module docstring); writes nothing, so a command
    can check its output before doing the work. `label` names the option (`--png `)."""
    _plan(Path(path), ledger, label)


@contextmanager
def open_output(
    path: Path | str, mode: Mode = "w", *, ledger: Path | None = None, label: str = ""
) -> Iterator[IO[Any]]:
    """`path` open for writing as the module docstring says; `ledger`: the home's ledger, whose
    file and side files are refused under any name."""
    path = Path(path)
    plan = _plan(path, ledger, label)
    encoding = None if "b" in mode else "utf-8"
    if plan.how == "fd":
        stream = sys.stdout if plan.fd == 1 else sys.stderr if plan.fd == 2 else None
        try:
            if stream is not None:  # the process's own stream, whatever it was replaced by
                handle = stream.buffer if "b" in mode else stream
                yield handle
                handle.flush()
            else:
                with open(os.dup(plan.fd), mode, encoding=encoding) as handle:
                    yield handle
        except OSError as exc:
            raise _cannot(path, exc) from exc
        return
    if plan.how == "in place":
        try:
            with open(plan.target, mode, encoding=encoding) as handle:
                yield handle
        except OSError as exc:
            raise _cannot(path, exc) from exc
        return
    target = plan.target
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise _cannot(path, exc) from exc
    PARTIAL.append(partial)
    try:
        with open(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)
    except BaseException as exc:
        with suppress(OSError):
            partial.unlink()
        if isinstance(exc, OSError):
            raise _cannot(path, exc) from exc
        raise
    finally:
        PARTIAL.remove(partial)


def write_output(
    path: Path | str,
    write: Callable[[IO[Any]], object],
    mode: Mode = "wb",
    *,
    ledger: Path | None = None,
    label: str = "",
) -> None:
    """`write(handle)` on `open_output(path, mode, ...)`."""
    with open_output(path, mode, ledger=ledger, label=label) as handle:
        write(handle)


def write_outputs(
    files: Sequence[tuple[Path, Callable[[IO[Any]], object]]],
    mode: Mode = "wb",
    *,
    ledger: Path | None = None,
) -> None:
    """Several files of one command (a report's page and figures, an export's data and card)
    written all or nothing: every name is planned and every new file written beside its target
    (and fsynced) before the first is renamed into place, so a failure (an error while writing,
    a disk that fills up, a target that is a folder) changes none of them. Renames within a
    folder do not fail for want of space; a device or FIFO among the targets is written in
    place, last, as `open_output` writes it."""
    plans = [(Path(path), write, _plan(Path(path), ledger, "")) for path, write in files]
    for path, _, plan in plans:
        if plan.how == "in place" and Path(plan.target).is_dir():
            raise _cannot(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    staged: list[tuple[Path, Path, Path]] = []  # (new file, target, name given)
    try:
        for path, write, plan in plans:
            if plan.how == "replace":
                staged.append((_stage(path, plan.target, mode, write), plan.target, path))
        for partial, target, path in staged:
            try:
                os.replace(partial, target)
            except OSError as exc:
                raise _cannot(path, exc) from exc
    finally:
        for partial, _, _ in staged:
            with suppress(OSError):
                partial.unlink()
            PARTIAL.remove(partial)
    for path, write, plan in plans:
        if plan.how != "replace":
            write_output(path, write, mode, ledger=ledger)


def _stage(path: Path, target: Path, mode: Mode, write: Callable[[IO[Any]], object]) -> Path:
    """`write(handle)` into a new file beside `target`, fsynced; returns it (listed in
    `PARTIAL` until the caller renames or removes it)."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        raise _cannot(path, exc) from exc
    PARTIAL.append(partial)
    try:
        encoding = None if "b" in mode else "utf-8"
        with open(fd, mode, encoding=encoding) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as exc:
        with suppress(OSError):
            partial.unlink()
        PARTIAL.remove(partial)
        if isinstance(exc, OSError):
            raise _cannot(path, exc) from exc
        raise
    return partial


def _plan(path: Path, ledger: Path | None, label: str) -> _Plan:
    name = f"{label}{path}"
    hops = [str(path)] if str(path) == STDOUT else _hops(path)
    fd = next((n for n in map(_fd_name, hops) if n is not None), None)
    if fd is not None:
        try:
            opened = os.fstat(fd)
        except OSError as exc:
            raise _cannot(path, exc) from exc
        _refuse_ledger(opened, ledger, name)
        return _Plan("fd", path, fd)
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise _cannot(path, exc) from exc
    real = Path(os.path.realpath(path))
    if info is None:
        if not real.parent.is_dir():
            raise SieveError(f"cannot write {path}: directory {real.parent} does not exist")
        return _Plan("replace", real)
    _refuse_ledger(info, ledger, name)
    if stat.S_ISREG(info.st_mode):
        _refuse_database(path, name)
    special = any(hop.startswith(_SPECIAL) for hop in [*hops, str(real)])
    if not stat.S_ISREG(info.st_mode) or special or not _same(real, info):
        return _Plan("in place", path)
    return _Plan("replace", real)


def _hops(path: Path) -> list[str]:
    """`path` made absolute, then each path its symbolic links lead to, in turn (at most 40)."""
    hops = [os.path.abspath(path)]
    for _ in range(40):
        try:
            link = os.readlink(hops[-1])
        except OSError:  # not a link (or not there)
            break
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), link)))
    return hops


def _fd_name(path: str) -> int | None:
    """The descriptor a name like /dev/stdout or /proc/self/fd/3 stands for; `-` is stdout."""
    if path == STDOUT:
        return 1
    if path in _FD_NAMES:
        return _FD_NAMES[path]
    match = _FD_PATH.fullmatch(path)
    return int(match.group(1)) if match else None


def _same(real: Path, info: os.stat_result) -> bool:
    """True when `real` (the path with its links followed) is the file `info` describes; not so
    when a link on the way was a /proc magic link (a descriptor's file, deleted or a pipe)."""
    try:
        other = os.stat(real)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino)


def _refuse_ledger(info: os.stat_result, ledger: Path | None, name: str) -> None:
    """SieveError when `info` is the ledger or one of its side files (same device and inode)."""
    if ledger is None:
        return
    for own in (ledger, *side_files(ledger)):
        try:
            mine = os.stat(own)
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (info.st_dev, info.st_ino):
            raise SieveError(f"refused: {name} is the ledger itself ({own.name})")


def _refuse_database(path: Path, name: str) -> None:
    """SieveError when the regular file at `path` is a DuckDB database (some home's ledger)."""
    offset, magic = _DUCKDB_MAGIC
    try:
        with open(path, "rb") as handle:
            head = handle.read(offset + len(magic))
    except OSError:
        return  # unreadable: replacing it is up to the rename's own permission check
    if head[offset:] == magic:
        raise SieveError(
            f"refused: {name} is a DuckDB database (a Sieve ledger?); write to another file"
        )


def _cannot(path: Path, exc: OSError) -> SieveError:
    return SieveError(f"cannot write {path}: {exc.strerror or exc}")
