"""The parent's blocking waits on its children, recorded instead of timing a verdict.

Within `recorded()`, every wait this process starts on a child is noted with its timeout, from
the recording thread or any thread started after it (threads already running, such as an
event loop an earlier test left behind, wait on their own business and are not noted):
`Connection.poll` (a reply from the math-verify worker), a selector's `select` (the code
sandbox's pipes), `Popen.wait` (reaping a child); and every SIGKILL it sends (`Popen.kill` or
`send_signal`, `os.killpg`). `Waits.check(deadline)` holds when the parent never committed to
wait longer than the deadline on a child that may still run: every poll, select and reap has a
timeout of at most the deadline, except the reap of a child already sent SIGKILL (the kernel
ends it at once). A verdict is then as late as its deadline plus the parent's own text steps,
which the linear-time tests count (tests/scoring/work.py). No clock is read, so a loaded machine
cannot make a check fail; a wait that never returns is left to pytest's timeout.

Not a test module (no test_ prefix).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any
from unittest import mock


@dataclass
class Waits:
    # (kind, pid or None, timeout or None): kind is poll, select, reap or kill
    events: list[tuple[str, int | None, float | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # threads that were running before the recording began (a Prefect or asyncio loop left by
    # an earlier test of the session selects with its own timeouts): not the verdict's waits
    older: frozenset[int] = frozenset()

    def note(self, kind: str, pid: int | None, timeout: float | None) -> None:
        if threading.get_ident() in self.older:
            return
        with self.lock:
            self.events.append((kind, pid, timeout))

    def count(self, kind: str) -> int:
        return sum(1 for k, _, _ in self.events if k == kind)

    def check(self, deadline: float) -> None:
        killed: set[int | None] = set()
        for kind, pid, timeout in self.events:
            if kind == "kill":
                killed.add(pid)
            elif timeout is None or timeout > deadline:
                assert kind == "reap" and pid in killed, (
                    f"{kind} for {'ever' if timeout is None else f'{timeout:g} s'} on a live "
                    f"child (deadline {deadline:g} s): {self.events}"
                )


@contextmanager
def recorded() -> Iterator[Waits]:
    here = threading.get_ident()
    waits = Waits(older=frozenset(t.ident for t in threading.enumerate() if t.ident != here))
    poll, select = Connection.poll, selectors.DefaultSelector.select
    wait, send_signal, killpg = subprocess.Popen.wait, subprocess.Popen.send_signal, os.killpg

    def on_poll(self: Connection, timeout: float | None = 0.0) -> bool:
        waits.note("poll", None, timeout)
        return poll(self, timeout)

    def on_select(self: Any, timeout: float | None = None) -> Any:
        waits.note("select", None, timeout)
        return select(self, timeout)

    def on_wait(self: subprocess.Popen[Any], timeout: float | None = None) -> int:
        waits.note("reap", self.pid, timeout)
        return wait(self, timeout)

    def on_send_signal(self: subprocess.Popen[Any], sig: int) -> None:
        if sig == signal.SIGKILL:
            waits.note("kill", self.pid, None)
        send_signal(self, sig)

    def on_killpg(pgid: int, sig: int) -> None:
        if sig == signal.SIGKILL:
            waits.note("kill", pgid, None)  # the sandbox's group id is its leader's pid
        killpg(pgid, sig)

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(Connection, "poll", on_poll))
        stack.enter_context(mock.patch.object(selectors.DefaultSelector, "select", on_select))
        stack.enter_context(mock.patch.object(subprocess.Popen, "wait", on_wait))
        stack.enter_context(mock.patch.object(subprocess.Popen, "send_signal", on_send_signal))
        stack.enter_context(mock.patch.object(os, "killpg", on_killpg))
        yield waits
