"""`sieve ARGV` run in the test's own process, for CLI tests that need no subprocess."""

from __future__ import annotations

import sys

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
