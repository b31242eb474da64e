"""The math-verify side of the killable worker: a child process, never the caller's process.

worker.py starts it as `python -c ...main(...)` with arguments `FD PARENT_PID MEMORY_LIMIT`:
it adopts the socket FD as a `multiprocessing.connection.Connection`, arranges to die with its
parent, caps its address space, imports math-verify, says "ready", then answers
`(request_id, op, args)` messages with `(request_id, ok, result_or_error)` until it receives None
or the pipe closes. math-verify's own `signal.alarm` timeouts are switched off
(`parsing_timeout=None`, `timeout_seconds=None`): the parent enforces the deadline by killing this
process. The parent must not import math-verify itself.

Test: `.venv/bin/pytest tests/scoring/test_worker.py -q`
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from multiprocessing.connection import Connection
from typing import Any


def _vm_bytes() -> int:
    """Current virtual memory size of this process (0 when /proc is not available)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def limit_memory(extra_bytes: int) -> None:
    """Cap the address space at `extra_bytes` above what is mapped now (best effort)."""
    if extra_bytes <= 0:
        return
    target = _vm_bytes() + extra_bytes
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            target = min(target, hard)
        resource.setrlimit(resource.RLIMIT_AS, (target, hard))
    except (ValueError, OSError):
        pass


def _parse(text: str, *, raw: bool) -> list[Any]:
    """math-verify parse of one answer; a bare answer is wrapped in `\\boxed{}` first.

    With `raw=True` the text is free-form prose and math-verify's own extraction runs on it as is
    (falling back to the wrapped form when that finds nothing).
    """
    from math_verify import parse

    wrapped = text if "\\boxed" in text or "$" in text else "\\boxed{" + text + "}"
    first, second = (text, wrapped) if raw else (wrapped, text)
    result = parse(first, parsing_timeout=None)
    if not result and second != first:
        result = parse(second, parsing_timeout=None)
    return list(result)


@lru_cache(maxsize=4096)
def _parse_gold(answer: str) -> list[Any]:
    return _parse(answer, raw=False)


def equivalent(answer: str, candidate: str, raw: bool) -> bool:
    """math-verify's judgement of `candidate` against the gold `answer`."""
    from math_verify import verify

    gold = _parse_gold(answer)
    pred = _parse(candidate, raw=raw)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


def rg_score(params_json: str, candidate: str, gold: str) -> tuple[float, str]:
    """reasoning-gym's `score_answer` for one problem (pipeline/scoring/rg_source.py)."""
    from pipeline.scoring.rg_source import score_here

    return score_here(params_json, candidate, gold)


def rg_load() -> bool:
    """Import reasoning-gym, so its seconds of imports are not charged to a verdict's deadline."""
    import reasoning_gym  # noqa: F401

    return True


_OPS: dict[str, Callable[..., Any]] = {
    "equivalent": equivalent,
    "rg_score": rg_score,
    "rg_load": rg_load,
}


def _handle(op: str, args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, _OPS[op](*args)
    except RecursionError:
        return False, "RecursionError: expression nested too deeply"
    except MemoryError:
        return False, "MemoryError: expression too large"
    except Exception as exc:
        return False, f"{type(exc).__name__}: {exc}"[:300]


def _watch_parent(parent_pid: int, period: float = 1.0) -> None:
    """Exit when the parent process is gone, even while a request is being computed.

    A daemon thread polling `getppid` rather than `PR_SET_PDEATHSIG`: the latter fires when the
    *thread* that started the child exits, and callers start the worker from short-lived threads.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(conn: Connection, memory_limit: int) -> None:
    """Child main loop: import math-verify, say ready, answer requests until told to stop."""
    import math_verify  # noqa: F401 - import before the memory cap and before saying ready

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    limit_memory(memory_limit)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        request_id, op, args = message
        ok, result = _handle(op, args)
        conn.send((request_id, ok, result))


def main(argv: list[str]) -> None:
    """Entry point: `FD PARENT_PID MEMORY_LIMIT`."""
    fd, parent_pid, memory_limit = (int(a) for a in argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _watch_parent(parent_pid)
    serve(Connection(fd), memory_limit)


if __name__ == "__main__":
    main(sys.argv[1:])
