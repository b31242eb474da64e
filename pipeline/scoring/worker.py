"""A persistent, killable child process that runs math-verify under a hard deadline.

math-verify's built-in timeout uses `signal.alarm`, which only works on the main thread (Prefect
runs tasks in threads), and sympy can hang or blow up on inputs like `9^{9^{9}}`. So every
math-verify call goes to one child process over a duplex pipe (a socketpair wrapped in a
`multiprocessing.connection.Connection`). The parent waits with `conn.poll(deadline)`; on timeout it
SIGKILLs the child, raises `WorkerTimeout`, and starts a replacement at once. Start-up is never
charged to a deadline: the clock starts only once the child has said "ready". A child that dies
(segfault, RecursionError that escapes, OOM kill) raises `WorkerCrashed`.

The child is a fresh interpreter running `_mv_child.main`, i.e. spawn semantics,
never fork (the parent may have threads). It is deliberately not a `multiprocessing.Process`:
"spawn"/"forkserver" re-run the caller's `__main__` script in the child, which breaks any script
without an `if __name__ == "__main__"` guard and re-imports whatever that script imports. The child
caps its address space (RLIMIT_AS, 2 GiB above its start-up size) so a memory bomb fails fast,
ignores SIGINT and exits when its parent is gone. One lock guards the worker, so any number of
threads may call it. An atexit hook closes it; a forked copy of the parent starts its own. POSIX
only.

Test: `.venv/bin/pytest tests/scoring/test_worker.py -q`
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pipeline.core.errors import SieveError
from pipeline.scoring import _mv_child

DEFAULT_TIMEOUT = 3.0
TIMEOUT_ENV = "SIEVE_VERIFY_TIMEOUT"
MAX_TIMEOUT = 3600.0  # the longest deadline accepted (seconds)
# The shortest: a worker's round trip for a plain answer takes about 0.01-0.05 s on 2 busy cores;
# 0.1 s leaves room for it, and anything shorter would only turn verdicts into verifier_error.
MIN_TIMEOUT = 0.1
MEMORY_LIMIT = 2 << 30
STARTUP_TIMEOUT = 120.0
_CHILD_BOOT = f"import sys; from {_mv_child.__name__} import main; main(sys.argv[1:])"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerError(Exception):
    """A math-verify call that produced no judgement (timeout, crash or error in the child)."""


class WorkerTimeout(WorkerError):
    """The child missed its deadline and was killed."""


class WorkerCrashed(WorkerError):
    """The child died or could not be started."""


def resolve_timeout(timeout: float | None) -> float:
    """The deadline in seconds: the argument, else $SIEVE_VERIFY_TIMEOUT, else 3 s. It must lie
    in [`MIN_TIMEOUT`, `MAX_TIMEOUT`]: `inf` or `1e300` overflowed the wait on the child, and a
    deadline shorter than a worker's round trip (`1e-9`) voided every math-verify verdict; both
    turned every such verdict into verifier_error."""
    if timeout is None:
        raw = os.environ.get(TIMEOUT_ENV, "").strip()
        if not raw:
            return DEFAULT_TIMEOUT
        try:
            timeout = float(raw)
        except ValueError:
            raise SieveError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
        if not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:  # NaN fails both comparisons
            raise SieveError(
                f"{TIMEOUT_ENV} must be a number of seconds from {MIN_TIMEOUT:g} to "
                f"{MAX_TIMEOUT:g}, got {raw!r}"
            )
    if not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
        raise ValueError(
            f"timeout must be from {MIN_TIMEOUT:g} to {MAX_TIMEOUT:g} s, got {timeout!r}"
        )
    return float(timeout)


class MathVerifyWorker:
    """One math-verify child process plus the lock and bookkeeping around it."""

    def __init__(self, memory_limit: int = MEMORY_LIMIT, startup_timeout: float = STARTUP_TIMEOUT):
        self._memory_limit = memory_limit
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._ready = False

    def _start(self) -> None:
        """Launch a fresh interpreter running the child loop; does not wait for its imports."""
        parent_sock, child_sock = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        argv = [sys.executable, "-c", _CHILD_BOOT, str(child_sock.fileno())]
        argv += [str(os.getpid()), str(self._memory_limit)]
        try:
            proc = subprocess.Popen(
                argv,
                pass_fds=(child_sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                close_fds=True,
            )
        except OSError:
            parent_sock.close()
            raise
        finally:
            child_sock.close()
        self._proc, self._conn, self._ready = proc, Connection(parent_sock.detach()), False

    def _ensure_ready(self) -> Connection:
        """A connection to a child that has finished start-up (starting one if needed)."""
        if self._conn is None or self._proc is None or self._proc.poll() is not None:
            self._discard()
            self._start()
        assert self._conn is not None
        if not self._ready:
            try:
                if not self._conn.poll(self._startup_timeout):
                    raise WorkerCrashed(f"worker not ready after {self._startup_timeout:g}s")
                self._conn.recv()
            except (EOFError, OSError) as exc:
                self._discard()
                raise WorkerCrashed(f"worker failed to start: {exc!r}") from None
            except WorkerCrashed:
                self._discard()
                raise
            self._ready = True
        return self._conn

    def _discard(self) -> int | None:
        """Kill and reap the current child (if any); returns its exit code."""
        proc, conn = self._proc, self._conn
        self._proc, self._conn, self._ready = None, None, False
        if conn is not None:
            conn.close()
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            return None

    def _restart_after_failure(self) -> int | None:
        """Discard the child and start its replacement now, so the next call finds it warm."""
        code = self._discard()
        try:
            self._start()
        except Exception:
            self._discard()
        return code

    def call(self, op: str, args: tuple[Any, ...], timeout: float) -> Any:
        """Run `op(*args)` in the child within `timeout` seconds; raises `WorkerError`."""
        with self._lock:
            conn = self._ensure_ready()
            request_id = next(self._ids)
            try:
                conn.send((request_id, op, args))
                if not conn.poll(timeout):
                    self._restart_after_failure()
                    raise WorkerTimeout(f"timeout after {timeout:g}s")
                reply_id, ok, result = conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                code = self._restart_after_failure()
                raise WorkerCrashed(f"worker died (exit code {code})") from None
        if reply_id != request_id:
            raise WorkerError(f"reply {reply_id} does not match request {request_id}")
        if not ok:
            raise WorkerError(str(result))
        return result

    def _forget_after_fork(self) -> None:
        """In a forked copy of the parent: drop the inherited child (it belongs to the parent)."""
        self._lock = threading.Lock()
        self._proc, self._conn, self._ready = None, None, False

    @property
    def pid(self) -> int | None:
        """Process id of the current child (None when there is none)."""
        proc = self._proc
        return None if proc is None else proc.pid

    def warm_up(self) -> None:
        """Start the child and wait until it is ready (optional; calls do this lazily)."""
        with self._lock:
            self._ensure_ready()

    def close(self) -> None:
        """Ask the child to exit, then make sure it has."""
        with self._lock:
            if self._conn is not None and self._ready:
                with contextlib.suppress(OSError):
                    self._conn.send(None)
                if self._proc is not None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(1)
            self._discard()


_WORKER = MathVerifyWorker()
atexit.register(_WORKER.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WORKER._forget_after_fork)


def default_worker() -> MathVerifyWorker:
    """The process-wide worker shared by all verifiers."""
    return _WORKER


def math_verify_equivalent(answer: str, candidate: str, timeout: float, *, raw: bool) -> bool:
    """math-verify's judgement in the shared worker; raises `WorkerError` on timeout or crash."""
    return bool(_WORKER.call("equivalent", (answer, candidate, raw), timeout))


def math_verify_only(completion: str, answer: str, timeout: float | None = None) -> bool | None:
    """math-verify alone on a whole completion; None on error or timeout (for benchmarks)."""
    try:
        return math_verify_equivalent(answer, completion, resolve_timeout(timeout), raw=True)
    except WorkerError:
        return None
