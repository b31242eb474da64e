"""What the jobs of `flows.commands` share: the `Note` a job says its lines to, Prefect started
for a home (`start_flows`), the model a command runs when `--model` is not given
(`command_model`), and the checks of options that several commands make (a pydantic error as one
line, a folder the command writes into, the backend).

Every job calls `start_flows` through this module (`common.start_flows`), so a test that runs a
command without a Prefect server replaces it in one place. Nothing here imports Prefect or torch
when it is imported.

Test: `pytest tests/cli tests/test_demo.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pipeline.core.errors import SieveError

Note = Callable[[str], None]
Night = Callable[[int, dict[str, Any]], None]  # a night's number (from 1) and its summary


def silent(line: str) -> None:
    """A `Note` that shows nothing."""


def start_flows(home: str | Path | None) -> None:
    """Before a command runs Prefect flows: Prefect set up for this home, its logs (a failed
    task's traceback among them) in <home>/logs/prefect.log unless verbose, and its temporary API
    server started tied to this process, so a killed run leaves no server behind
    (`pipeline.core.procs`)."""
    from pipeline.core.procs import start_prefect_server
    from pipeline.core.runlog import quiet_prefect

    start_prefect_server(quiet_prefect(home))


# ---------------------------------------------------------------------- the model


def tiny_model(home: Path | str | None) -> Path:
    """Where the built-in tiny policy lives in this home."""
    from pipeline.core.home import resolve_home

    return resolve_home(home) / "models" / "tiny"


def command_model(model: Path | None, home: Path | None, note: Note = silent) -> Path:
    """`--model`, else what the nightly flow would use: the newest checkpoint of the lineage of
    the newest curriculum's model (else that model; on a fresh home the tiny policy), named in
    one line, so `sieve curate --model M` -> `sieve train` -> `sieve eval` needs M only once."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.train.lineage import current_model

    if model is not None:
        return model
    if not ledger_path(home).exists():
        return tiny_model(home)
    folder, why = current_model(home)
    note(f"model: {folder} ({why})")
    return folder


# ---------------------------------------------------------------------- shared checks


def validated(model: type[Any], values: dict[str, object]) -> Any:
    """`model.model_validate(values)` with a pydantic error as one SieveError line."""
    from pydantic import ValidationError

    from pipeline.core.tomlconfig import first_error

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise SieveError(f"invalid option: {first_error(exc)}") from None


def check_folders(home: Path | None, *names: str) -> None:
    """SieveError when `<home>/<name>`, a folder the command writes into, exists and is not a
    folder (a file there failed deep inside the run, as a traceback)."""
    from pipeline.core.home import resolve_home

    root = resolve_home(home)
    for name in names:
        path = root / name
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise SieveError(f"{path} is not a folder; this command writes its {name} there")


def check_backend(backend: str, base_url: Sequence[str] | None) -> None:
    """One line for an unknown backend, or the openai backend without a server."""
    from pipeline.sampling import BACKENDS

    if backend not in BACKENDS:
        raise SieveError(f"unknown --backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "openai" and not base_url:
        raise SieveError("the openai backend needs --base-url (repeat it for several servers)")
