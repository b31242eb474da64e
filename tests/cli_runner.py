"""`sieve ARGV` run in the test's own process, for CLI tests that need no subprocess."""

from __future__ import annotations

import io
import sys
from types import ModuleType

import pytest

from flows import cli


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `sieve ARGV`, run through `cli.main` as the console
    script does."""
    old = sys.argv
    sys.argv = ["sieve", *argv]
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shown_frames(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> dict:
    """The frames a command module's `show` is given, by title (instead of its rendering)."""
    frames: dict = {}
    monkeypatch.setattr(module, "show", lambda frame, title: frames.__setitem__(title, frame))
    return frames


def wide_console(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> io.StringIO:
    """The command's console, 1000 columns wide (nothing wraps), written to a buffer."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=1000, color_system=None)
    monkeypatch.setattr(cli.common, "out", console)
    monkeypatch.setattr(module, "out", console)
    return buffer


def error_line(code: int, err: str) -> str:
    """The one `error:` line of a failed command (asserting there is exactly one)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]
