"""What every `sieve` command shares: the consoles, tables, progress bars, one-line errors.

`run_app` is the console script's error handling: a `SieveError` (a user error) is one
`error: ...` line on stderr and exit 1; a usage error is one line and exit 2 (Typer's
convention); a full disk, whatever was writing, is one line and exit 1; Ctrl-C exits 130.
`start_flows` is what a command does before it runs a Prefect flow.

Test: `pytest tests/cli/test_bad_inputs.py` (one line per bad input, full disks),
`tests/cli/test_cli.py`.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from pipeline.errors import SieveError

if TYPE_CHECKING:
    import polars as pl
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

out = Console()
err = Console(stderr=True)


def options(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show Prefect's and other libraries' logs and progress bars on the console "
            "(default: flows log to <home>/logs/prefect.log). Also $SIEVE_VERBOSE=1.",
        ),
    ] = False,
) -> None:
    """Options for every command (put them before the command: `sieve --verbose curate`)."""
    from pipeline.runlog import VERBOSE_ENV

    if verbose:
        os.environ[VERBOSE_ENV] = "1"


def table(frame: pl.DataFrame, title: str | None = None, max_rows: int = 200) -> Table:
    """A rich table of the first `max_rows` rows (floats to 4 significant digits)."""
    result = Table(title=title, show_lines=False)
    for name in frame.columns:
        result.add_column(name, overflow="fold")
    for row in frame.head(max_rows).iter_rows():
        result.add_row(*("" if v is None else _cell(v) for v in row))
    if frame.height > max_rows:
        result.caption = f"{frame.height} rows, first {max_rows} shown (use --format csv)"
    return result


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def escaped(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every text cell escaped for Rich: ledger text is never markup."""
    import polars as pl
    from rich.markup import escape

    text = [c for c, t in frame.schema.items() if t == pl.String]
    return frame.with_columns(pl.col(c).map_elements(escape, return_dtype=pl.String) for c in text)


def show(frame: pl.DataFrame, title: str) -> None:
    """`frame` as a titled table on stdout, or `title: none yet` when it is empty."""
    if frame.height == 0:
        out.print(f"[bold]{title}[/bold]: none yet")
    else:
        out.print(table(frame, title=title))


def progress(label: str) -> Progress:
    """A transient progress bar on stderr, shown only on a terminal."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # off a terminal a bar only leaves a blank line behind
    )


def validated(model: type[M], values: dict[str, object]) -> M:
    """`model.model_validate(values)` with a pydantic error as one SieveError line."""
    from pydantic import ValidationError

    from pipeline.tomlconfig import first_error

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise SieveError(f"invalid option: {first_error(exc)}") from None


def check_backend(backend: str, base_url: list[str] | None) -> None:
    from pipeline.sampling import BACKENDS

    if backend not in BACKENDS:
        raise SieveError(f"unknown --backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "openai" and not base_url:
        raise SieveError("the openai backend needs --base-url (repeat it for several servers)")


def start_flows(home: str | Path | None) -> None:
    """Before a command runs Prefect flows: Prefect set up for this home, its logs (a failed
    task's traceback among them) in <home>/logs/prefect.log unless --verbose, so a failure shows
    as `run_app`'s one `error:` line; and its temporary API server started tied to this process,
    so a killed run leaves no server behind (`pipeline.procs`)."""
    from pipeline.procs import start_prefect_server
    from pipeline.runlog import quiet_prefect

    start_prefect_server(quiet_prefect(home))


def run_app(app: Callable[..., object]) -> None:
    """Run the Typer app, each failure as one stderr line and an exit code (module docstring)."""
    try:
        app(standalone_mode=False)
    except SieveError as exc:
        _error(str(exc))
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # click's usage errors and aborts (typer may vendor its own click)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # usage error: one line
            _error(" ".join(str(exc.format_message()).split()))
            sys.exit(exc.exit_code)
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code)
        full = disk_full(exc)
        if full is None:
            raise
        _error(f"disk full: {full}; free some space and re-run (what was committed is kept)")
        sys.exit(1)


def _error(message: str) -> None:
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)


_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "storagefull")


def disk_full(exc: BaseException) -> str | None:
    """One line naming what could not be written, when `exc` or an exception it was raised from
    (or while handling) is a full disk or quota (errno, or DuckDB's and safetensors' text)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cause = todo.pop()
        if cause is None or id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = cause.filename or "a file"
            return f"cannot write {where} ({cause.strerror or 'no space left'})"
        text = " ".join(str(cause).split())
        if any(t in text.lower() for t in _FULL_TEXTS):
            return text[:300]
        todo += [cause.__cause__, cause.__context__, *getattr(cause, "exceptions", ())]
    return None
