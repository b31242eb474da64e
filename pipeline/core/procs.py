"""Child processes that end with the process that started them, even when it is SIGKILLed.

Linux's `PR_SET_PDEATHSIG` asks the kernel to signal a process when its parent dies, however the
parent died (exit, SIGTERM, SIGKILL, OOM kill). Sieve's own children already arrange this: the
math-verify worker watches its parent (`scoring/_mv_child.py`) and the code sandbox runs under
`bwrap --die-with-parent`. The one child Sieve does not start itself is Prefect's temporary API
server (`prefect.server.api.server.SubprocessASGIServer`, a uvicorn process of ~200 MB), which
Prefect spawns on first use and stops only from an `atexit` hook, so every killed run used to
leave it behind, parented to PID 1.

`start_prefect_server` therefore starts that server before a flow runs, through Prefect's own
class (the singleton that Prefect's client then reuses), with its `subprocess.Popen` swapped for
one that runs the command under a small launcher: the launcher sets `PR_SET_PDEATHSIG` to
SIGKILL, checks that its parent is still the one that started it (else exits at once) and
`exec`s the real command, which keeps the death signal. Its output goes to Prefect's log file
unless the run is verbose. The death signal fires when the *thread* that forked the child ends,
so the server is started only from the main thread; elsewhere Prefect starts it as before.

`popen_tied(argv, ...)` is the same launcher for any command.

Test: `pytest tests/cli/test_children.py`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pipeline.core.errors import SieveError

MIN_FREE_BYTES = 8 << 20  # a fresh Prefect database with its write-ahead log took ~6 MB here
# argv: PARENT_PID COMMAND... ; `python -S` (no site) keeps the launcher's own start-up short
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"  # PDEATHSIG
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"  # the parent died before the death signal was armed
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def tied_argv(argv: Sequence[str]) -> list[str]:
    """`argv` behind the launcher, so the process it becomes dies with this one (Linux only;
    elsewhere `argv` unchanged)."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-S", "-c", _LAUNCHER, str(os.getpid()), *argv]


def popen_tied(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **kwargs)`, the child dying with the calling thread's process.
    Call it from a thread that lives as long as the child should (the main thread)."""
    return subprocess.Popen(tied_argv(argv), **kwargs)


def start_prefect_server(log: Path | None = None) -> None:
    """Start Prefect's temporary API server now, tied to this process (see the module text);
    `log`: where the server's own output goes (None: this process's stdout/stderr). Does nothing
    when an API URL is set (a real server, or a test harness), when the server already runs, or
    off the main thread. A server that cannot start is one SieveError line."""
    from prefect.server.api import server as prefect_server
    from prefect.settings import get_current_settings

    if get_current_settings().api.url or threading.current_thread() is not threading.main_thread():
        return
    server = prefect_server.SubprocessASGIServer()
    if server.running:
        return
    home = Path(get_current_settings().home)
    with contextlib.suppress(OSError):
        home.mkdir(parents=True, exist_ok=True)  # the server does not create it
    _check_space(home)
    with _log_stream(log) as stream, _tied_popen_in(prefect_server, stream):
        try:
            server.start()
        except Exception as exc:
            where = f"; Prefect's log: {log}" if log is not None else ""
            text = " ".join(str(exc).split())[:300]
            raise SieveError(
                f"Prefect's temporary API server did not start: {text}{where}"
            ) from exc


def _check_space(folder: Path) -> None:
    """Fail at once on a (nearly) full disk under Prefect's database: the server would otherwise
    hang in its migrations until Prefect's start-up timeout (minutes) and then fail obscurely."""
    try:
        free = shutil.disk_usage(folder if folder.exists() else folder.parent).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise SieveError(
            f"disk full: {free >> 10} KiB free under {folder}, where Prefect keeps its database "
            f"(it needs about {MIN_FREE_BYTES >> 20} MiB); free some space and re-run"
        )


@contextlib.contextmanager
def _log_stream(log: Path | None) -> Any:
    """An append handle on `log` for a child's output (None: inherit this process's streams)."""
    if log is None:
        yield None
        return
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        handle: IO[bytes] | None = log.open("ab")
    except OSError:
        handle = None  # e.g. a full disk: the child keeps this process's streams
    try:
        yield handle
    finally:
        if handle is not None:
            handle.close()  # the child holds its own copy of the descriptor


@contextlib.contextmanager
def _tied_popen_in(module: types.ModuleType, stream: IO[bytes] | None) -> Any:
    """While open: `module.subprocess.Popen` starts its command tied to this process (and with
    `stream` as stdout and stderr unless the caller chose them). Only `module`'s own name
    `subprocess` is replaced, not the subprocess module other code uses."""
    real = module.subprocess

    def popen(args: Sequence[str], *rest: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        if stream is not None and "stdout" not in kwargs and "stderr" not in kwargs:
            kwargs.update(stdout=stream, stderr=subprocess.STDOUT)
        # its own session: a signal to the terminal's process group (Ctrl-C, `timeout`) reaches
        # only the run, which reports the crash to the server that is still up, then exits
        kwargs.setdefault("start_new_session", True)
        return real.Popen(tied_argv(args), *rest, **kwargs)

    shim = types.ModuleType(real.__name__)
    shim.__dict__.update(real.__dict__)
    shim.Popen = popen  # type: ignore[attr-defined]
    module.subprocess = shim  # type: ignore[attr-defined]
    try:
        yield
    finally:
        module.subprocess = real  # type: ignore[attr-defined]
