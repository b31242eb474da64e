"""What every `sieve` command shares: the consoles, tables, progress bars, one-line errors.

`run_app` is the console script's error handling: a `SieveError` (a user error) is one
`error: ...` line on stderr and exit 1; a usage error is one line and exit 2 (Typer's
convention), and a command group called without its command (bare `sieve`) prints its help and
exits 2; a full disk, whatever was writing, is one line and exit 1, and so is any other
OSError about a file (`file_error`: a read-only file system, a folder that is a file) and an
allocation that failed (`out_of_memory`: RAM or GPU memory, and what the command can ask for
less of). SIGINT (Ctrl-C) and SIGTERM (`timeout`, a scheduler) end a run with one line,
`interrupted: <what was committed>`, and exit 128 + the signal (130, 143): a long command says
what it has committed as it goes (`committed`); from the signal on, other stderr output
(Prefect's, a dying thread's) is dropped unless --verbose. Help texts are shown as written,
brackets included.

Text is never markup: the consoles (`console`) read no Rich markup or emoji codes, and show
control characters escaped (`pipeline.core.errors.printable`), so ledger text, file and column names
and user arguments print as they are, in tables, titles and lines alike. Styled text is built
as `rich.text.Text`.

Test: `pytest tests/cli/test_bad_inputs.py` (one line per bad input, full disks, ledger text,
interrupted runs), `tests/cli/test_text.py`, `tests/cli/test_cli.py`.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from pipeline.core.errors import SieveError, printable
from pipeline.core.runlog import verbose

if TYPE_CHECKING:
    import polars as pl

    from pipeline.core.hooks import ProgressEvent


class _PlainConsole(Console):
    """A console for which every string is plain text: no markup, no emoji codes, control
    characters escaped (Rich would pass ESC to the terminal and silently drop CR)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)


def console(**kwargs: Any) -> Console:
    """A Rich console that shows strings as they are (module docstring); `kwargs` as Console's."""
    return _PlainConsole(markup=False, emoji=False, **kwargs)


out = console()
err = console(stderr=True)


WIDE_ENV = "SIEVE_WIDE"  # set by `sieve --wide`: tables keep every column whatever the width


def options(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show Prefect's and other libraries' logs and progress bars on the console "
            "(default: flows log to <home>/logs/prefect.log). Also $SIEVE_VERBOSE=1.",
        ),
    ] = False,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            help="Print every column of a table even when it does not fit the terminal "
            "(default: before/after tables are folded to fit). Also $SIEVE_WIDE=1.",
        ),
    ] = False,
) -> None:
    """Options for every command (put them before the command: `sieve --verbose curate`)."""
    from pipeline.core.runlog import VERBOSE_ENV

    _run.command = ctx.invoked_subcommand or ""

    if verbose:
        os.environ[VERBOSE_ENV] = "1"
    if wide:
        os.environ[WIDE_ENV] = "1"


def table(frame: pl.DataFrame, title: str | None = None, max_rows: int = 200) -> Table:
    """A rich table of the first `max_rows` rows (floats to 4 significant digits); names, cells
    and title are plain text when a `console` prints it."""
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


def bold(text: str) -> Text:
    """`text` in bold, as plain text (control characters escaped)."""
    return Text(printable(text), style="bold")


def show(frame: pl.DataFrame, title: str, width: int | None = None) -> None:
    """`frame` as a titled table on stdout, or `title: none yet` when it is empty. A table wider
    than the terminal (or than `width`, when that is narrower) with `<x>_before` / `<x>_after`
    columns is printed folded (`fitted`) unless `sieve --wide`; `--format csv` (`sieve sql`)
    always has every column."""
    if frame.height == 0:
        out.print(Text.assemble(bold(title), ": none yet"))
        return
    limit = min(out.width, width) if width is not None else out.width
    full = table(frame, title=title)
    if os.environ.get(WIDE_ENV) != "1" and natural_width(full) > limit:
        folded = fitted(frame)
        if folded is not frame:
            out.print(table(folded, title=f"{title} (sieve --wide for every column)"), width=limit)
            return
    out.print(full, width=None if os.environ.get(WIDE_ENV) == "1" else limit)


def natural_width(renderable: Table) -> int:
    """The width `renderable` takes with no limit (Rich's measure, unclamped by the console)."""
    return out.measure(renderable, options=out.options.update_width(1 << 20)).maximum


# short names for the columns a folded table keeps
_SHORT = {"problems": "n", "sampled_gain": "gain", "greedy": "greedy", "sampled": "sampled"}


def fitted(frame: pl.DataFrame) -> pl.DataFrame:
    """A before/after table folded for an 80-column terminal: each `<x>_before` / `<x>_after`
    pair becomes one `<x>` column reading `before → after`, verifier-error columns are kept only
    when some are non-zero, and `problems` / `sampled_gain` become `n` / `gain`. A frame with
    no such pair is returned as it is (the same object). Display only: at most a table's rows."""
    import polars as pl

    pairs = [c[: -len("_before")] for c in frame.columns if c.endswith("_before")]
    pairs = [x for x in pairs if f"{x}_after" in frame.columns]
    if not pairs:
        return frame
    paired = {f"{x}_{side}" for x in pairs for side in ("before", "after")}
    columns: dict[str, pl.Series | list[str]] = {}
    for c in frame.columns:
        if c not in paired and not c.endswith("_gain"):
            columns[_SHORT.get(c, c)] = frame[c]
    for x in pairs:
        before, after = frame[f"{x}_before"].to_list(), frame[f"{x}_after"].to_list()
        if x.startswith("errors") and not any(v for v in before + after if v is not None):
            continue
        pairs_shown = zip(before, after, strict=True)
        columns[_SHORT.get(x, x)] = [f"{_shown(b)} → {_shown(a)}" for b, a in pairs_shown]
    for c in frame.columns:
        if c.endswith("_gain"):
            columns[_SHORT.get(c, c)] = [_shown(v) for v in frame[c].to_list()]
    return pl.DataFrame(columns)


def _shown(value: object) -> str:
    return "" if value is None else _cell(value)


def progress(label: str) -> Progress:
    """A transient progress bar on stderr, shown only on a terminal."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label, markup=False),
        BarColumn(),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # off a terminal a bar only leaves a blank line behind
    )


def stage_lines(bar: Progress, started: float) -> Callable[[ProgressEvent], None]:
    """The events of a run that chains jobs (the nightly flow: engine start, curation chunks,
    training steps) as a bar per job and stage on a terminal, and otherwise one line when a
    stage starts its engine or finishes, with the minutes since `started` (time.monotonic)."""
    tasks: dict[str, Any] = {}

    def update(e: ProgressEvent) -> None:
        key = e.job if e.stage == e.job else f"{e.job} {e.stage}"
        if key not in tasks:
            tasks[key] = bar.add_task(key, total=e.total)
        bar.update(tasks[key], completed=e.done, description=f"{e.done}/{e.total}")
        if err.is_terminal or (e.done and e.done < e.total):
            return
        minutes = (time.monotonic() - started) / 60
        state = "started" if e.done == 0 else f"{e.total} of {e.total} done"
        out.print(f"{key}: {state} ({minutes:.1f} min in)")

    return update


def committed(note: str) -> None:
    """What this run has committed so far, for the line it ends with if interrupted (`interrupted:
    NOTE`); a long command calls it after each unit, e.g. "screen 3 of 8 chunks committed"."""
    _run.note = note


@dataclass
class _Run:
    """The state of the run `run_app` is running: the signal that stopped it, what it has
    committed, and the real stderr once other output to it is dropped."""

    signal: int | None = None
    note: str = "nothing half-written"
    stderr: IO[str] | None = None
    said: bool = False  # the `interrupted:` line is out
    command: str = ""  # the command run (`sieve CMD`), for what its errors advise


_run = _Run()


def run_app(app: typer.Typer) -> None:
    """Run the Typer app, each failure as one stderr line and an exit code (module docstring)."""
    global _run
    _run = _Run()
    command = typer.main.get_command(app)
    _literal_help(command)
    _check_argv(sys.argv[1:])
    before: dict[int, Any] = {}
    try:  # from the first handler on, so that no signal can land outside it
        _install(before)
        _check_settings()
        code = command(standalone_mode=False)
        if _run.signal is not None or code == 130:  # typer returns 130 for a KeyboardInterrupt
            _interrupted(_run.signal or signal.SIGINT)
        if isinstance(code, int) and code:  # a `typer.Exit(code)`, returned likewise
            sys.exit(code)
    except BaseException as exc:
        stopped = None if isinstance(exc, SystemExit) and _run.said else _interruption(exc)
        if stopped is None:
            _fail(exc)
            raise
        _interrupted(stopped)
    finally:
        for sig, handler in before.items():  # a test runs the CLI in-process
            signal.signal(sig, handler)


def _interrupted(signum: int) -> None:
    """Exit with the one `interrupted:` line and 128 + `signum`."""
    for sig in (signal.SIGINT, signal.SIGTERM):  # a second signal ends the process at once
        signal.signal(sig, signal.SIG_DFL)
    line = f"interrupted: {printable(_run.note, lines=False)}"
    console(file=_run.stderr or sys.stderr, soft_wrap=True).print(line, highlight=False)
    _run.said = True
    _forget_unhandled_interrupt()
    sys.exit(128 + signum)


def _forget_unhandled_interrupt() -> None:
    """Clear CPython's record of a KeyboardInterrupt that ended a string `exec`/`eval`.

    When the signal's KeyboardInterrupt is raised inside code run from a string (a dataclass or
    namedtuple being built, a library's `exec`), CPython marks it unhandled even though we catch
    it, and under `python -m` it then ends the process by SIGINT (-2) instead of our exit code.
    The mark is reset at the start of every string evaluation, so one empty evaluation clears
    it; the signals are back to their defaults here, so no later one can set it again."""
    exec("pass", {})  # a constant string, run for its side effect on the mark


def _fail(exc: BaseException) -> None:
    """Exit with one line for a user error, usage error or full disk; return for anything else
    (a bug: its traceback stays)."""
    if isinstance(exc, SieveError):
        _error(str(exc))
        sys.exit(1)
    if not isinstance(exc, Exception):
        return
    if type(exc).__name__ == "NoArgsIsHelpError":  # a group without its command: the help
        _help(exc)
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # click's usage errors
        _error(" ".join(str(exc.format_message()).split()))
        sys.exit(exc.exit_code)
    if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):  # typer may vendor click
        sys.exit(exc.exit_code)
    memory = out_of_memory(exc, _run.command)
    if memory is not None:
        _error(memory)
        sys.exit(1)
    full = disk_full(exc)
    if full is not None:
        _error(f"disk full: {full}; free some space and re-run (what was committed is kept)")
        sys.exit(1)
    failed = file_error(exc)
    if failed is not None:
        _error(failed)
        sys.exit(1)


def _help(exc: Any) -> None:
    """Exit with Click's code for a command group called without a command (2), its help
    printed: Typer's Rich help prints itself as it is made, leaving the error's message empty;
    a plain Click help is the message, printed as it is rather than as an `error:` line."""
    message = str(exc.format_message())
    if message.strip():
        typer.echo(message, err=True)
    sys.exit(exc.exit_code)


def _check_settings() -> None:
    """Settings read from the environment, checked before any command runs (a SieveError, one
    line): $SIEVE_VERIFY_TIMEOUT=inf was taken, and every math-verify verdict was an error."""
    if os.environ.get("SIEVE_VERIFY_TIMEOUT", "").strip():
        from pipeline.scoring.worker import resolve_timeout

        resolve_timeout(None)


def _check_argv(argv: list[str]) -> None:
    """Exit 2 with one line when an argument is not UTF-8 text (Python keeps such bytes as lone
    surrogates, which DuckDB, Polars and the terminal refuse later, each with a traceback)."""
    for i, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            _error(f"argument {i} is not UTF-8 text: {arg}")
            sys.exit(2)


def _literal_help(command: Any) -> None:
    """Help texts of `command` and its subcommands shown as written: Typer reads them as Rich
    markup, where `'.[scale]'` loses its brackets."""
    from rich.markup import escape

    for owner in [command, *getattr(command, "params", [])]:
        for name in ("help", "short_help", "epilog"):
            if isinstance(text := getattr(owner, name, None), str):
                setattr(owner, name, escape(text))
    for sub in getattr(command, "commands", {}).values():
        _literal_help(sub)


def _install(before: dict[int, Any]) -> None:
    """SIGINT and SIGTERM handled by `_on_signal`, the handlers they had kept in `before`; off
    the main thread signals stay as they are."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            before[sig] = signal.signal(sig, _on_signal)
        except ValueError:  # not the main thread
            return


SIGNAL_RETRY_S = 0.05  # how soon a signal that arrived inside an import is delivered again


def _inside_import(frame: FrameType | None) -> bool:
    """True when `frame` runs inside a module being imported (importlib's frames on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The first SIGINT or SIGTERM raises KeyboardInterrupt, remembered in `_run`, and from then
    on stderr output is dropped unless verbose; a later SIGINT raises again, a later SIGTERM
    (Prefect sends its own again, once its handler is done) only waits for the first.

    A first signal that lands inside an import is delivered again a moment later instead: an
    exception raised in a module's top-level code can cross a C++ extension's frame there
    (torch.distributed's import), and pybind11 then aborts the process with `terminate called
    after throwing an instance of 'pybind11::error_already_set'` instead of the one line."""
    if _run.signal is None and _inside_import(frame):
        import threading

        timer = threading.Timer(SIGNAL_RETRY_S, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
        return
    first = _run.signal is None
    _run.signal = signum
    if first:
        _quiet_stderr()
    if first or signum == signal.SIGINT:
        raise KeyboardInterrupt


def _quiet_stderr() -> None:
    """Drop stderr output from here on (Prefect's API log worker, a thread's traceback while the
    run unwinds), keeping the real stream for the one line; not when verbose."""
    if not verbose() and _run.stderr is None:
        _run.stderr = sys.stderr
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - until the process exits


def _interruption(exc: BaseException) -> int | None:
    """The signal that stopped the run, if `exc` is an interruption or was raised while one was
    handled: a signal `_on_signal` saw, a KeyboardInterrupt, or Prefect's TerminationSignal (its
    own SIGTERM handler is installed while a flow runs, so ours never hears of that signal)."""
    if _run.signal is not None:
        return _run.signal
    for cause in _causes(exc):
        if isinstance(cause, KeyboardInterrupt):
            return signal.SIGINT
        if type(cause).__name__ == "TerminationSignal":
            _quiet_stderr()
            return int(getattr(cause, "signal", signal.SIGTERM))
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception it was raised from or while handling (groups included)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cause = todo.pop()
        if cause is None or id(cause) in seen:
            continue
        seen.add(id(cause))
        yield cause
        todo += [cause.__cause__, cause.__context__, *getattr(cause, "exceptions", ())]


def _error(message: str) -> None:
    err.print(f"error: {printable(message, lines=False)}", highlight=False, soft_wrap=True)


_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "storagefull")


def disk_full(exc: BaseException) -> str | None:
    """One line naming what could not be written, when `exc` or an exception it was raised from
    (or while handling) is a full disk or quota (errno, or DuckDB's and safetensors' text)."""
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = cause.filename or "a file"
            return f"cannot write {where} ({cause.strerror or 'no space left'})"
        text = " ".join(str(cause).split())
        if any(t in text.lower() for t in _FULL_TEXTS):
            return text[:300]
    return None


# what to ask for less of, by command, when a run runs out of memory (`out_of_memory`)
LESS_MEMORY = {
    "train": "lower eval_per_level or eval_samples (the held-out evaluation) or "
    "rollouts_per_step in a --config file (`sieve train --print-config` shows them)",
    "loop": "lower --n, or eval_per_level, eval_samples or rollouts_per_step in --train-config",
    "demo": "lower --n",
    "eval": "lower --per-level or --samples",
    "bootstrap": "lower --per-level (the evaluation after training)",
    "curate": "lower --n, or chunk_size in a --config file",
    "backtest": "replay a smaller --pool",
    "plan": "plan on a smaller --pool",
    "generate": "lower --n",
    "ingest": "import the file in parts",
}


def out_of_memory(exc: BaseException, command: str = "") -> str | None:
    """One line saying what ran out (RAM: a MemoryError; GPU memory: torch's
    OutOfMemoryError) and what `sieve COMMAND` can ask for less of (`LESS_MEMORY`), when `exc`
    or an exception it was raised from (or while handling) is an allocation failure."""
    for cause in _causes(exc):
        if isinstance(cause, MemoryError):
            what = "out of memory (RAM): an allocation failed"
        elif type(cause).__name__ == "OutOfMemoryError":  # torch's, for an accelerator
            first = " ".join(str(cause).split()).split(". ")[0][:160]
            what = f"out of GPU memory ({first})" if first else "out of GPU memory"
        else:
            continue
        where = f" in `sieve {command}`" if command else ""
        hint = LESS_MEMORY.get(command, "ask the command for less, or free some memory")
        return f"{what}{where}; {hint}, and re-run (what was committed is kept)"
    return None


def file_error(exc: BaseException) -> str | None:
    """One line naming the file and what the system said, when `exc` or an exception it was
    raised from (or while handling) is an OSError about a file: a read-only file system, a
    folder that is a file, a name too long, a loop of links, a permission (`<home>/.prefect` or
    `<home>/checkpoints` a file, a home under /proc). Other OSErrors keep their traceback."""
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.filename is not None:
            where = str(cause.filename)
            if cause.filename2 is not None:
                where += f" -> {cause.filename2}"
            return f"cannot use {where}: {cause.strerror or cause}"
    return None
