"""Issue 49 point 4: the CLI is thin. Every `sieve` command makes at most one call into the
layers below it (a flow of `flows.commands`, or one job function of `pipeline`), counted from the
source by `benchmarks/settings_sprawl.py` (`cli_job_calls`); building settings or parameter
objects and `pipeline.core`'s plumbing (errors, the home, logs, progress hooks) are not calls.

The checker's self-tests run it on a made-up CLI, so it cannot pass by finding nothing.

Test: `pytest tests/cli/test_thin_cli.py`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def sprawl() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sprawl", ROOT / "benchmarks/settings_sprawl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_command_calls_at_most_one_job() -> None:
    calls = sprawl().cli_job_calls(ROOT)
    assert len(calls) >= 21 and {"curate", "train", "loop", "demo", "sql"} <= set(calls)
    thick = {command: found for command, found in calls.items() if len(found) > 1}
    assert thick == {}


def fake_cli(root: Path, body: str) -> Path:
    """A tree with a one-command `sieve` app whose command module holds `body`."""
    cli = root / "flows" / "cli"
    cli.mkdir(parents=True)
    (cli / "__init__.py").write_text(
        "import typer\nfrom flows.cli import data\napp = typer.Typer()\n"
        "app.command()(data.generate)\n"
    )
    (cli / "data.py").write_text(body)
    (cli / "common.py").write_text(
        "from pipeline.store import Ledger\n\n"
        "def helper(home):\n    with Ledger.open(home) as ledger:\n        return ledger\n"
    )
    return root


def test_the_checker_follows_helpers_and_sees_every_call(tmp_path: Path) -> None:
    body = (
        "from flows.cli.common import helper\n"
        "from pipeline.core.errors import SieveError\n"
        "from pipeline.jobs.data import intake as jobs\n"
        "from pipeline.selection import CurateConfig\n\n"
        "def generate(home=None):\n"
        "    cfg = CurateConfig()\n"  # a settings object: not a call below
        "    if cfg is None:\n        raise SieveError('x')\n"  # plumbing: not a call
        "    _write(home)\n"
        "    helper(home)\n\n"
        "def _write(home):\n"
        "    from pipeline.problems import generate as make\n"
        "    return jobs.generate_problems(home, make('arith', [1], 1, 0))\n"
    )
    calls = sprawl().cli_job_calls(fake_cli(tmp_path, body))
    assert calls == {
        "generate": [
            "pipeline.jobs.data.intake.generate_problems",
            "pipeline.problems.generate",
            "pipeline.store.Ledger.open",
        ]
    }


def test_a_command_that_calls_one_job_counts_one(tmp_path: Path) -> None:
    body = (
        "from flows import commands\n\n"
        "def generate(home=None):\n"
        "    return commands.curate(commands.CurateRequest(), home)\n"
    )
    assert sprawl().cli_job_calls(fake_cli(tmp_path, body)) == {
        "generate": ["flows.commands.curate"]
    }


def test_a_job_called_twice_or_through_a_plain_import_counts(tmp_path: Path) -> None:
    body = (
        "import pipeline.jobs.analysis.stats\n"
        "from flows import commands\n\n"
        "def generate(home=None):\n"
        "    pipeline.jobs.analysis.stats.heldout_table(home)\n"
        "    _twice(home)\n"
        "    _twice(home)\n\n"
        "def _twice(home):\n"
        "    return commands.curate(commands.CurateRequest(), home)\n"
    )
    assert sprawl().cli_job_calls(fake_cli(tmp_path, body)) == {
        "generate": [
            "flows.commands.curate",
            "flows.commands.curate",
            "pipeline.jobs.analysis.stats.heldout_table",
        ]
    }
