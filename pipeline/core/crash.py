"""Named crash points for crash-safety tests.

`crash_point("ledger.before_commit")` kills the current process with SIGKILL when the environment
variable `SIEVE_CRASH_AT` names that point, and does nothing otherwise. `name@N` dies at the N-th
time the point is reached (default the first); several comma-separated entries are allowed.
Tests start a child with the variable set and check that a re-run ends where an uninterrupted
run would.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV_VAR = "SIEVE_CRASH_AT"
_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """Die here, abruptly, if `$SIEVE_CRASH_AT` asks for this point (and this hit)."""
    wanted = os.environ.get(ENV_VAR)
    if not wanted:
        return
    _hits[name] += 1
    for entry in wanted.split(","):
        point, _, nth = entry.partition("@")
        if point == name and _hits[name] == int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
