"""The `sieve` command line (`sieve = flows.cli:main`; also `python -m flows.cli`).

One module per job; this one only puts their commands into one Typer `app`, in the order
`sieve --help` lists them:

- `data`: generate, ingest, verify (problems in, one verdict out)
- `query`: sql, stats, audit, curriculum show (read the ledger)
- `replay`: rescore (stored completions judged again, beside their verdicts), backtest
  (selection policies replayed over stored samples), plan (per policy, what this pool and model
  would give, before any training rollout): the samples a home holds, nothing sampled
- `curate`: bootstrap, eval, curate
- `train`: train
- `nightly`: schedule, demo, loop
- `export`: export, report
- `models`: models add, models list
- `common`, `options`, `summary`: the consoles, tables and one-line errors; the shared options;
  what the long commands print

Every command takes `--home` (else `$SIEVE_HOME`, else `./data`). A user error prints one line,
`error: ...`, on stderr and exits 1 (a full disk too, whatever was writing); usage errors exit 2
(Typer's convention). Commands that run Prefect flows keep Prefect's logs in
`<home>/logs/prefect.log` unless `sieve --verbose CMD`, and tie Prefect's temporary API server to
their own process (`pipeline.core.procs`). The CLI sits above `flows`: each command parses its
options, makes one call below (the long ones a job of `flows.commands`: `curate`, `evaluate`,
`bootstrap`, `train`, `loop`, `schedule`, `demo`; the others one job function of `pipeline`),
and prints what comes back (`summary` words the long commands' results).
`tests/cli/test_thin_cli.py` holds every command to that one call.

Test: `pytest tests/cli`.
"""

from __future__ import annotations

import typer

from flows.cli import common, curate, data, export, nightly, query, replay, train
from flows.cli.models import models_app

app = typer.Typer(
    name="sieve",
    help="Curate RL data for reasoning models with GRPO's own signal, and train on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.callback()(common.options)
app.command()(data.generate)
app.command()(data.ingest)
app.command()(data.verify)
app.command()(query.sql)
app.command()(query.stats)
app.command()(query.audit)
app.command()(replay.rescore)
app.command()(replay.backtest)
app.command()(replay.plan)
app.command()(curate.bootstrap)
app.command("eval")(curate.eval_cmd)
app.command()(curate.curate)
app.command()(train.train)
app.command()(nightly.schedule)
app.command()(nightly.demo)
app.command()(nightly.loop)
app.command()(export.export)
app.command()(export.report)
app.add_typer(query.curriculum_app, name="curriculum")
app.add_typer(models_app, name="models")

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app, turning a SieveError into one line and exit code 1."""
    common.run_app(app)
