"""`sieve ARGV` run in the test's own process, for CLI tests that need no subprocess.

Output is never compared as the terminal would wrap it: `run_cli` prints on 1,000 columns
whatever $COLUMNS says, and `wide_console` (a buffer) or `shown_frames` (the frames themselves)
are for tests that look at what a command printed.
"""

from __future__ import annotations

import io
import sys
from types import ModuleType

import pytest

from flows import cli


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `sieve ARGV`, run through `cli.main` as the console
    script does."""
    old, stderr = sys.argv, sys.stderr
    widths = cli.common.out.width, cli.common.err.width
    sys.argv = ["sieve", *argv]
    cli.common.out.width = cli.common.err.width = 1000  # nothing wraps, whatever $COLUMNS says
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv, sys.stderr = old, stderr  # an interrupted run drops stderr from its signal on
        cli.common.out.width, cli.common.err.width = widths
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shown_frames(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> dict:
    """The frames a command module's `show` is given, by title (instead of its rendering)."""
    frames: dict = {}
    monkeypatch.setattr(module, "show", lambda frame, title: frames.__setitem__(title, frame))
    return frames


def wide_console(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> io.StringIO:
    """The command's console, 1000 columns wide (nothing wraps), written to a buffer; it reads
    no markup, as the command's own does."""
    buffer = io.StringIO()
    console = cli.common.console(file=buffer, width=1000, color_system=None)
    monkeypatch.setattr(cli.common, "out", console)
    monkeypatch.setattr(module, "out", console)
    return buffer


def error_line(code: int, err: str) -> str:
    """The one `error:` line of a failed command (asserting there is exactly one)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]
