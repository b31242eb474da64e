"""Where Sieve keeps its files: `--home` flag, else `$SIEVE_HOME`, else `./data`.

The ledger is `<home>/sieve.duckdb`; models, checkpoints and exports live beside it, and so does
`sieve.duckdb.writer`, the lock a writing process holds (`pipeline/store/locks.py`). Only writing
commands create a home; reading ones stop with "no ledger at ..." instead.
"""

from __future__ import annotations

import os
import sys
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


def use_prefect_home(home: str | Path | None = None) -> Path | None:
    """Give this Sieve home its own Prefect state (`<home>/.prefect/<Prefect version>`:
    database, persisted task results), unless the user chose one: `PREFECT_API_URL` (a Prefect
    server keeps the state) or `PREFECT_HOME` set in the environment. Homes never share
    Prefect's database, and neither do two Prefect versions in one home: `.venv` and
    `.venv-vllm` resolve different Prefect releases (vLLM's pins hold the second back), and one
    database migrated by the newer release broke the older one's start (`Can't locate revision`,
    issue 47). Cached chunk results of one home are never consulted for another. Call before
    Prefect is imported. Returns the folder used, or None when the user's setting stands."""
    if os.environ.get("PREFECT_API_URL") or os.environ.get("PREFECT_HOME") or _api_in_context():
        return None
    folder = (resolve_home(home) / ".prefect" / _prefect_version()).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(folder)
    return folder


def _prefect_version() -> str:
    """The installed Prefect's version, read without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prefect")
    except PackageNotFoundError:
        return "unknown"


def _api_in_context() -> bool:
    """True when Prefect is already imported and its current settings name an API (a test
    harness or a `temporary_settings` block): that state stands."""
    if "prefect" not in sys.modules:
        return False
    from prefect.settings import get_current_settings

    return bool(get_current_settings().api.url)
