"""Named crash points for crash-safety tests.

`crash_point("ledger.before_commit")` kills the current process with SIGKILL when the environment
variable `SIEVE_CRASH_AT` names that point, and does nothing otherwise. Tests start a child with the
variable set and check that a re-run ends where an uninterrupted run would.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "SIEVE_CRASH_AT"


def crash_point(name: str) -> None:
    """Die here, abruptly, if `$SIEVE_CRASH_AT` equals `name` (comma-separated names allowed)."""
    wanted = os.environ.get(ENV_VAR)
    if wanted and name in wanted.split(","):
        os.kill(os.getpid(), signal.SIGKILL)
