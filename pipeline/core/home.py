"""Where Sieve keeps its files: `--home` flag, else `$SIEVE_HOME`, else `./data`.

The ledger is `<home>/sieve.duckdb`; models, checkpoints and exports live beside it, and so does
`sieve.duckdb.writer`, the lock a writing process holds (`pipeline/store/locks.py`). Only writing
commands create a home; reading ones stop with "no ledger at ..." instead. The ledger names the
folders inside its home relative to it (`to_home`, `from_home`), so a home moved (`mv A B`) or
copied (`cp -a A B`) uses its own models and checkpoints.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

LEDGER_NAME = "sieve.duckdb"
SIDE_SUFFIXES = (".wal", ".wal.recovery", ".wal.checkpoint")  # files DuckDB keeps by a database


def resolve_home(home: str | Path | None = None) -> Path:
    """Return the Sieve home directory (not created here)."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get("SIEVE_HOME")
    if env:
        return Path(env).expanduser()
    return Path("data")


def to_home(path: str | Path, home: Path | None) -> str:
    """How a ledger row names a folder: relative to `home` when it lies inside it (a home moved
    or copied keeps naming its own models and checkpoints), else absolute. `home`
    None (an in-memory ledger): absolute."""
    inside = _within(path, home)
    return inside if inside is not None else os.path.abspath(path)


def _within(path: str | Path, home: Path | None) -> str | None:
    """`path` relative to `home` (POSIX) when it lies inside it, links followed or not."""
    if home is None:
        return None
    full, root = Path(os.path.abspath(path)), Path(os.path.abspath(home))
    for inside, top in ((full, root), (full.resolve(), root.resolve())):
        if inside.is_relative_to(top) and inside != top:
            return inside.relative_to(top).as_posix()
    return None


# the home-relative end of a folder a home holds: models/NAME, checkpoints/RUN/STEP
_HOME_TAIL = re.compile(r"/((?:models/[^/]+)|(?:checkpoints/[^/]+/[^/]+))/*$")


def from_home(
    stored: str,
    home: Path | None,
    holds: Callable[[Path], bool] | None = None,
    run: str | None = None,
) -> Path:
    """The folder a ledger row names (`to_home`): a relative name under `home`; an absolute one
    as recorded, except a name recorded absolute before names were relative, outside
    `home`: the home was moved or copied, and its own folder is meant, not the original home's
    (or one that is gone). A checkpoint of training `run` (an end checkpoints/RUN/STEP) is this
    home's, on disk or not; a model folder (models/NAME) or another checkpoint is, where `home`
    holds it (and `holds(folder)` says yes, when given: the caller's check that the folder is the
    recorded model, `pipeline.jobs.train.lineage` compares its revision)."""
    path = Path(stored)
    if not path.is_absolute():
        return (home if home is not None else Path.cwd()) / path
    tail = _HOME_TAIL.search(stored)
    if home is None or tail is None or _within(path, home) is not None:
        return path  # inside this home already, or not a folder a home holds
    own = home / tail.group(1)
    if run is not None and tail.group(1).startswith(f"checkpoints/{run}/"):
        return own  # a run of this ledger wrote it into this ledger's home
    if not (own / "config.json").is_file():
        return path
    if holds is not None and not holds(own):
        return path
    return own


def ledger_path(home: str | Path | None = None) -> Path:
    return resolve_home(home) / LEDGER_NAME


def side_files(path: Path) -> list[Path]:
    """The files DuckDB may create beside the database at `path`."""
    return [path.with_name(path.name + suffix) for suffix in SIDE_SUFFIXES]


def use_prefect_home(home: str | Path | None = None) -> Path | None:
    """Give this Sieve home its own Prefect state (`<home>/.prefect/<Prefect version>`:
    database, persisted task results), unless the user chose one: `PREFECT_API_URL` (a Prefect
    server keeps the state) or `PREFECT_HOME` set in the environment. Homes never share
    Prefect's database, and neither do two Prefect versions in one home: `.venv` and
    `.venv-vllm` resolve different Prefect releases (vLLM's pins hold the second back), and one
    database migrated by the newer release broke the older one's start (`Can't locate revision`).
    Cached chunk results of one home are never consulted for another. Call before
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
