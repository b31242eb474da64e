"""One guard for every file a command writes where the user said: `sieve sql --output`,
`sieve backtest --png`, and the files `sieve report` and `sieve export` write into their
`--output` folders.

What is judged is the file that would change, never the name given (`pipeline.core.
output_paths` resolves the path through links, hard links and descriptors). Before anything is
written, one `SieveError` line naming the path and why refuses a file that is

- the home's ledger or one of its side files (`.wal`, `.wal.recovery`, `.wal.checkpoint`, the
  writer lease `.writer`): same device and inode;
- any DuckDB database or DuckDB write-ahead log, by content, whatever its name and wherever it
  lives (another home's ledger);
- named as a side file of a DuckDB database beside it (`X.wal` next to a database `X`), even if
  it does not exist yet: DuckDB would replay it as `X`'s log the next time `X` is opened.

How a file is written:

- a descriptor this process holds (`-` and `/dev/stdout` are stdout) is written through, as a
  shell redirection is: never truncated, renamed over or closed;
- a regular file the command owns (reached by a name of its own, not through `/proc`, and owned
  by the effective user) or a new file is written to `.<name>.part-<pid>-<random>` beside it,
  which is renamed over it at the end (its mode bits kept), so a failed write leaves it as it
  was; a symbolic link is written through (the file it leads to is replaced, the link stays), a
  hard-linked name is replaced as a name (its other names keep the old contents);
- anything else (a device, a FIFO, a file reached through another process's descriptor, a
  regular file of another user) is opened in place, non-blocking and without creating or
  truncating it: a FIFO that no process reads is refused (a command never waits for a reader),
  writes then block as usual, and a regular file is emptied once the open file is checked to be
  the one judged.

`write_outputs` writes the several files of `report` and `export` all or nothing: each new file
is written before the first is renamed into place. Its names must lead to regular files the
command owns, or to nothing yet (`check_output(..., regular=True)`, also before the work): a
FIFO, device, socket or folder among them is refused, since none can be replaced by a rename
and a FIFO would hold the command after its page was replaced. A descriptor or `/proc` route
to a regular file is replaced at the file's own name.

The temporary file is the only thing ever removed, on every exit Python sees: an exception,
KeyboardInterrupt (`sieve` turns SIGINT and SIGTERM into one), `sys.exit` and `atexit`; while
one is written, SIGINT, SIGTERM and SIGHUP that would end the process unseen (no handler of its
own) remove it first and then end the process by the same signal. A caller about to `os._exit`
calls `remove_partials`. SIGKILL cannot be caught: the `.<name>.part-<pid>-*` it leaves is
removed by the next write to the same target, once process <pid> has ended. Each name is judged
again just before the rename, in case it was changed while the file was written (a race that
this narrows to the last moment; it does not close it).

Test: `pytest tests/core/test_output_guard.py`, `tests/cli/test_bad_inputs.py -k output`,
`tests/cli/test_sql_sandbox.py`.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import secrets
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, Literal

from pipeline.core.errors import SieveError
from pipeline.core.output_paths import STDOUT, Plan, cannot, plan_write, same_file

__all__ = [
    "PARTIAL",
    "STDOUT",
    "Mode",
    "check_output",
    "open_output",
    "remove_partials",
    "write_output",
    "write_outputs",
]

Mode = Literal["w", "wb"]
PARTIAL: list[Path] = []  # the new files being written beside their targets, removed on any exit
_CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def check_output(
    path: Path | str, *, ledger: Path | None = None, label: str = "", regular: bool = False
) -> None:
    """SieveError unless `path` may be written (module docstring); writes nothing, so a command
    can check its output before doing the work. `label` names the option (`--png `); `regular`:
    only a regular file the command owns, or a new one (the files of `write_outputs`)."""
    plan_write(Path(path), ledger, f"{label}{path}", regular)


@contextmanager
def open_output(
    path: Path | str, mode: Mode = "w", *, ledger: Path | None = None, label: str = ""
) -> Iterator[IO[Any]]:
    """`path` open for writing as the module docstring says; `ledger`: the home's ledger, whose
    file and side files are refused under any name."""
    path = Path(path)
    name = f"{label}{path}"
    plan = plan_write(path, ledger, name, regular=False)
    if plan.how == "replace":
        with _removed_on_signals():
            partial = _stage(path, plan, mode, None)
            try:
                with open(partial.fd, mode, encoding=_encoding(mode)) as handle:
                    yield handle
                    _sync(handle)
                _rename(partial.path, path, plan, ledger, name, regular=False)
            except OSError as exc:
                raise cannot(path, exc) from exc
            finally:
                _forget(partial.path)
        return
    try:
        with _opened(plan, mode, name) as handle:
            yield handle
    except OSError as exc:
        raise cannot(path, exc) from exc


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
    written all or nothing: every name is judged (`regular=True`) and every new file written
    beside its target and fsynced before the first is renamed into place, so a failure (an
    error while writing, a disk that fills up) changes none of them. Renames within a folder do
    not fail for want of space."""
    plans = [(Path(p), write, plan_write(Path(p), ledger, str(p), True)) for p, write in files]
    staged: list[tuple[Path, Path, Plan]] = []  # (new file, name given, plan)
    with _removed_on_signals():
        try:
            for path, write, plan in plans:
                staged.append((_stage(path, plan, mode, write).path, path, plan))
            for partial, path, plan in staged:
                try:
                    _rename(partial, path, plan, ledger, str(path), regular=True)
                except OSError as exc:
                    raise cannot(path, exc) from exc
        finally:
            for partial, _, _ in staged:
                _forget(partial)


def remove_partials() -> None:
    """Remove every temporary file being written (for a caller about to end the process with
    `os._exit`, and at exit)."""
    for partial in list(PARTIAL):
        with suppress(OSError):
            partial.unlink()


atexit.register(remove_partials)


# -- writing -------------------------------------------------------------------------------------
def _encoding(mode: Mode) -> str | None:
    return None if "b" in mode else "utf-8"


@contextmanager
def _opened(plan: Plan, mode: Mode, name: str) -> Iterator[IO[Any]]:
    """A handle on the descriptor or the in-place file of `plan`."""
    stream = {1: sys.stdout, 2: sys.stderr}.get(plan.fd) if plan.how == "fd" else None
    if stream is not None:  # the process's own stream, whatever it was replaced by
        handle = stream.buffer if "b" in mode else stream
        yield handle
        handle.flush()
        return
    fd = os.dup(plan.fd) if plan.how == "fd" else _open_in_place(plan, name)
    with open(fd, mode, encoding=_encoding(mode)) as handle:
        yield handle


def _open_in_place(plan: Plan, name: str) -> int:
    """`plan.target` opened for writing without waiting (a FIFO no process reads is refused)
    and checked to be the file judged; a regular file is emptied once that holds."""
    try:
        fd = os.open(plan.target, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO and plan.info and stat.S_ISFIFO(plan.info.st_mode):
            raise SieveError(
                f"refused: {name} is a FIFO (named pipe) that no process is reading; start the "
                "reader first (the command does not wait for one)"
            ) from exc
        raise
    try:
        opened = os.fstat(fd)
        if plan.info is None or not same_file(opened, plan.info):
            raise SieveError(f"refused: {name} changed while it was checked; run the command again")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if stat.S_ISREG(opened.st_mode):
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class _Partial:
    path: Path
    fd: int  # open for writing; -1 once `_stage` has written and closed it


def _stage(
    path: Path, plan: Plan, mode: Mode, write: Callable[[IO[Any]], object] | None
) -> _Partial:
    """A new file beside `plan.target` (listed in `PARTIAL` until `_forget`), with the old
    file's mode bits; with `write`, `write(handle)` into it, fsynced and closed."""
    target = plan.target
    _clean_leftovers(target)
    partial = target.with_name(f".{target.name}.part-{os.getpid()}-{secrets.token_hex(4)}")
    bits = stat.S_IMODE(plan.info.st_mode) & 0o777 if plan.info else 0o666
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(partial, flags, bits)
    except OSError as exc:
        raise cannot(path, exc) from exc
    PARTIAL.append(partial)
    try:
        if plan.info is not None:
            os.fchmod(fd, bits)  # as the file it replaces, whatever the umask
        if write is None:
            return _Partial(partial, fd)
        with open(fd, mode, encoding=_encoding(mode)) as handle:
            write(handle)
            _sync(handle)
    except BaseException as exc:
        if write is None:
            os.close(fd)
        _forget(partial)
        if isinstance(exc, OSError):
            raise cannot(path, exc) from exc
        raise
    return _Partial(partial, -1)


def _sync(handle: IO[Any]) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def _rename(
    partial: Path, path: Path, plan: Plan, ledger: Path | None, name: str, *, regular: bool
) -> None:
    """`partial` renamed over `plan.target`, once `path` is judged again and still leads there
    (it may have been changed while the file was written)."""
    again = plan_write(path, ledger, name, regular)
    if (again.how, again.target) != (plan.how, plan.target):
        raise SieveError(f"refused: {name} changed while it was written; run the command again")
    os.replace(partial, plan.target)


def _forget(partial: Path) -> None:
    """`partial` removed (if still there) and off `PARTIAL`."""
    with suppress(OSError):
        partial.unlink()
    with suppress(ValueError):
        PARTIAL.remove(partial)


def _clean_leftovers(target: Path) -> None:
    """Remove the `.<name>.part-<pid>-*` files beside `target` whose writer has ended (a
    SIGKILL leaves one behind)."""
    prefix = f".{target.name}.part-"
    try:
        names = [n for n in os.listdir(target.parent) if n.startswith(prefix)]
    except OSError:
        return
    for leftover in names:
        pid, _, _ = leftover[len(prefix) :].partition("-")
        path = target.parent / leftover
        if not pid.isdigit() or path in PARTIAL or _alive(int(pid)):
            continue
        with suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                path.unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process's, and not among the files it is writing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


@contextmanager
def _removed_on_signals() -> Iterator[None]:
    """While temporary files are written: SIGINT, SIGTERM and SIGHUP that would end the process
    unseen (no handler of its own) remove them first (`_remove_and_die`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[signal.Signals, Any] = {}
    for sig in _CAUGHT:
        if signal.getsignal(sig) == signal.SIG_DFL:
            installed[sig] = signal.signal(sig, _remove_and_die)
    try:
        yield
    finally:
        for sig, before in installed.items():
            signal.signal(sig, before)


def _remove_and_die(signum: int, frame: FrameType | None) -> None:
    """Remove the temporary files, then end the process by `signum`, as it would have ended."""
    remove_partials()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
