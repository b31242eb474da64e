"""Shared fixtures: an in-memory ledger with migrations applied, and a temporary Sieve home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.store import Ledger


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    led = Ledger.memory()
    yield led
    led.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Sieve home, also exported as $SIEVE_HOME for subprocesses."""
    path = tmp_path / "home"
    monkeypatch.setenv("SIEVE_HOME", str(path))
    return path
