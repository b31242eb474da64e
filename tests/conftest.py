"""Shared fixtures: an in-memory ledger with migrations applied, and a temporary Sieve home.

Three environment settings for the whole session, made before any test module imports torch,
Rich or Prefect and inherited by every child process a test starts:
- one OpenMP thread per process: with one per core, torch's threads spin at each barrier while
  the Prefect server, CLI children, torchrun ranks or another test run hold the same cores; on
  2 shared cores a toy training step ran 10-40x slower (tests/grpo_core/test_checkpoint.py: 60 s
  with 2 threads, 4 s with 1). An OMP_NUM_THREADS already set is kept.
- a 1,000-column console (COLUMNS): Rich wraps at the console width (80 when not a terminal),
  so text that a test looks for would depend on where a line breaks, which a temp path's length
  moves. Set in `pytest_configure`, so pytest's own report keeps the terminal's width.
- a 120 s start-up limit for Prefect's temporary API server (the value `pipeline.core.runlog`
  gives a Sieve run): a test process imports Prefect long before any CLI code sets it, and
  Prefect's 20 s default timed out on a loaded 2-core machine ("Prefect's temporary API server
  did not start"). A value already set is kept.

The `integration` marker: the tests that run the whole CLI in a child process with its own
Prefect server, build a trained policy or a real model, start ranks or wait on purpose (locks,
timeouts) — each took 5 s or more on this 2-core machine (`--durations`, 2026-12-03), together
over half of the suite's time. `make test` leaves them out so a developer's check stays under 10
minutes; `make test-integration` runs them and `.ci/run` runs both. Each such test carries the
mark itself (`pytestmark`, a decorator or a `pytest.param`), so renaming it keeps it where it
is; the one rule added here (`pytest_collection_modifyitems`) marks every test that uses one of
the minute-long session fixtures below, whatever its name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, settings

from pipeline.store import Ledger

# Property tests check properties, not time: no per-example deadline and no "too slow" health
# check, both wall-clock verdicts that a loaded 2-core machine fails at random (a test that
# sets its own @settings keeps these unless it names them).
settings.register_profile("sieve", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sieve")

# conftest is imported before any test module, so before torch (see the docstring)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


# Session fixtures that cost a minute to build: every test using one is an integration test.
INTEGRATION_FIXTURES = {
    "partly_trained_dir",  # 300 supervised steps of the tiny policy: 74 s
    "smollm2",  # SmolLM2's GGUF converted to a model folder: 42 s
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if uses & INTEGRATION_FIXTURES:
            item.add_marker(pytest.mark.integration)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """COLUMNS for Rich (see the docstring), set once pytest's own report has its width: the
    terminal reporter exists by now (trylast), and its writer is pinned to the width it has."""
    if config.pluginmanager.get_plugin("terminalreporter") is not None:
        writer = config.get_terminal_writer()
        writer.fullwidth = writer.fullwidth
    os.environ["COLUMNS"] = "1000"


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


@pytest.fixture
def lock_holder(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], AbstractContextManager[None]]:
    """`with lock_holder(path):` keeps a DuckDB write lock on `path` from another process.
    Openers (this process and its children) wait only 1 s for it, not the default minute."""
    monkeypatch.setenv("SIEVE_LOCK_WAIT", "1")

    @contextmanager
    def hold(path: Path) -> Iterator[None]:
        code = (
            "import duckdb, sys\n"
            f"con = duckdb.connect({str(path)!r})\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
            yield
        finally:
            proc.communicate("")

    return hold


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init tiny policy folder (built once per test session)."""
    from pipeline.policy.model import create_tiny_model

    path = tmp_path_factory.mktemp("models") / "tiny"
    create_tiny_model(path, seed=0)
    return path


@pytest.fixture(scope="session")
def partly_trained_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny policy trained for 300 supervised steps on arith 2-3: partly right, so curation
    keeps prompts and GRPO has informative groups (built once per test session, ~30 s). Tests
    that write next to it copy it first."""
    from pipeline.jobs.train.bootstrap import BootstrapConfig, save_atomically, train_tiny
    from pipeline.problems.mix import MixConfig

    cfg = BootstrapConfig(
        max_steps=300,
        mix=MixConfig(families={"arith": "2-3"}),
        family_plan=(("arith", 1.0, 128),),
        pool_size=6000,
    )
    path = tmp_path_factory.mktemp("models") / "partly"
    save_atomically(train_tiny(cfg), path, cfg)
    return path


@pytest.fixture(scope="session")
def write_curriculum() -> Callable[..., pl.DataFrame]:
    """Writes a small two-stage curriculum `cur-test` over arith 1-2 problems into a ledger."""
    return _write_curriculum


def _write_curriculum(ledger: Ledger, cid: str = "cur-test") -> pl.DataFrame:
    from pipeline.problems import generate

    problems = generate("arith", [1, 2], 12, seed=3).filter(pl.col("split") == "train")
    ledger.write("problems", problems)
    n = problems.height
    items = pl.DataFrame(
        {
            "curriculum_id": cid,
            "problem_id": problems["problem_id"],
            "stage": [1 if i < n // 2 else 2 for i in range(n)],
            "position": list(range(n)),
            "group_size": [4 if i < n // 2 else 8 for i in range(n)],
            "weight": 1.0,
            "p_mean": 0.5,
            "p_low": 0.2,
            "p_high": 0.8,
            "reason": "mid_band",
        }
    )
    head = pl.DataFrame(
        {
            "curriculum_id": [cid],
            "created_at": [datetime.now(UTC)],
            "model": ["m"],
            "model_revision": ["r"],
            "config": ["{}"],
            "status": ["finished"],
        }
    )
    ledger.write_batch({"curricula": head, "curriculum_items": items})
    return items
