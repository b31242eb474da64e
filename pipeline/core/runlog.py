"""Where Prefect's (and other libraries') log records go while a Sieve command runs a flow.

Prefect configures its logging at import: a console handler on the root logger (so every
library's warnings pass through it), more on `uvicorn`, `fastapi` and `prefect._internal`, and it
logs a failed task's and flow's traceback (45-300 lines) before the exception reaches the CLI.
By default `route(home)` moves all of that into one file, `<home>/logs/prefect.log` (appended),
so a failing command prints only its one `error:` line and the tracebacks stay in the file; it
also switches off Hugging Face's progress bars and sends Python warnings to the same file. With
`sieve --verbose` (which sets `$SIEVE_VERBOSE=1`) everything stays on the console. Records the
file cannot take (a full disk) are dropped, never reported as a second traceback.
`quiet_prefect(home)` is the whole set-up a command or the nightly loop does before Prefect runs:
this home's Prefect state, Prefect's settings for an offline, loaded machine, and `route`.

Test: `pytest tests/cli/test_bad_inputs.py` (one line on stderr for failing flows).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from pipeline.core.home import resolve_home, use_prefect_home

VERBOSE_ENV = "SIEVE_VERBOSE"

_moved: list[tuple[logging.Logger, logging.Handler]] = []  # console handlers taken off
_file: list[logging.Handler] = []  # the file handler in use (at most one)


def verbose() -> bool:
    """True when the user asked for library logs on the console."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


def log_file(home: str | Path | None = None) -> Path:
    """The file a quiet run's library logs go to."""
    return (resolve_home(home) / "logs" / "prefect.log").absolute()


def quiet_prefect(home: str | Path | None = None) -> Path | None:
    """Prefect set up for a Sieve run: this home's own Prefect state (`use_prefect_home`), no
    analytics, a start-up limit for Prefect's ephemeral API server that a loaded machine meets
    (its 20 s default timed out here with both cores busy, e.g. next to a vLLM engine; 120 s
    unless set), and its logs (warnings and up; info with `$SIEVE_VERBOSE`) in
    `<home>/logs/prefect.log` unless verbose (`route`). Call before Prefect is imported; it
    imports Prefect. Returns the log file, or None when logs stay on the console."""
    use_prefect_home(home)
    level = "INFO" if verbose() else "WARNING"
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", level)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # offline machines
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    logging.getLogger("prefect").setLevel(level)
    return route(home)


class _LogFile(logging.FileHandler):
    """Appends to a file created (with its folder) at the first record; never raises."""

    def __init__(self, path: Path):
        super().__init__(path, encoding="utf-8", delay=True)

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is None:
            try:
                Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                return
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        """A record that cannot be written is dropped (logging would print a traceback)."""


def route(home: str | Path | None = None) -> Path | None:
    """Send Prefect's console logging to `log_file(home)` (the default) or leave it on the
    console (verbose). Imports Prefect. Returns the file, or None when verbose."""
    import prefect.main  # noqa: F401 - Prefect installs its handlers when this is imported

    restore()
    if verbose():
        return None
    path = log_file(home)
    handler = _LogFile(path)
    loggers = [logging.getLogger(), *_named_loggers()]
    for logger in loggers:
        console = [h for h in logger.handlers if _is_prefect_console(h)]
        for h in console:
            if handler.formatter is None:
                handler.setFormatter(h.formatter)
            logger.removeHandler(h)
            _moved.append((logger, h))
        if console:
            logger.addHandler(handler)
    _file.append(handler)
    logging.captureWarnings(True)
    _no_progress_bars()
    return path


def restore() -> None:
    """Put the console handlers back and close the file handler (undoes `route`)."""
    for handler in _file:
        for logger in [logging.getLogger(), *_named_loggers()]:
            logger.removeHandler(handler)
        handler.close()
    _file.clear()
    for logger, h in _moved:
        logger.addHandler(h)
    _moved.clear()
    logging.captureWarnings(False)


def _named_loggers() -> list[logging.Logger]:
    return [x for x in logging.root.manager.loggerDict.values() if isinstance(x, logging.Logger)]


def _is_prefect_console(handler: logging.Handler) -> bool:
    """Prefect's own stream handlers (its console and debug ones), not pytest's or a user's."""
    return (
        isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
        and type(handler).__module__.startswith("prefect")
    )


def _no_progress_bars() -> None:
    """Hugging Face's tqdm bars ("Loading weights", "Writing model shards") off."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when the hub is imported
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
