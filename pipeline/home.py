"""Where Sieve keeps its files: `--home` flag, else `$SIEVE_HOME`, else `./data`.

The ledger is `<home>/sieve.duckdb`; models, checkpoints and exports live beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

LEDGER_NAME = "sieve.duckdb"


def resolve_home(home: str | Path | None = None) -> Path:
    """Return the Sieve home directory (not created here)."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get("SIEVE_HOME")
    if env:
        return Path(env).expanduser()
    return Path("data")


def ledger_path(home: str | Path | None = None) -> Path:
    return resolve_home(home) / LEDGER_NAME
