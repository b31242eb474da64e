"""Each long `sieve` command's job below the CLI, one function per command, one module per job:

- `curation`: `curate` (`sieve curate`, given as a `CurateRequest`)
- `evaluation`: `evaluate` (`sieve eval`) and `bootstrap` (`sieve bootstrap`)
- `training`: `train` (`sieve train`, given as a `TrainRequest`)
- `nights`: `loop`, `schedule` and `demo` (`sieve loop`, `sieve schedule`, `sieve demo`)
- `common`: what they share: the default model, Prefect started for a home, the shared checks

A command of `flows/cli/` parses its options, calls one function here and prints what it
returns. The function decides what an unset option means (a command's default model:
`common.command_model`; a chat model's curation sampling:
`pipeline.jobs.train.settings.curation_sampling`; the train job:
`pipeline.jobs.train.lineage.resolve_train_job`), checks everything checkable before a flow
starts (a bad option writes nothing, not even Prefect's state), and runs the job: a Prefect flow
of `flows`. What a user should read on the way goes to `note` (one line each, in the order the
job decides it); progress goes to `progress` (`pipeline.core.hooks`), so the CLI draws the bars
and every entry point gets the same rules.

This package imports neither Prefect nor torch when it is imported: `quiet_prefect` must run
before Prefect is, and `sieve train --print-config` never loads a model.

Test: `pytest tests/cli tests/test_demo.py tests/flows/test_loop.py`.
"""

from __future__ import annotations

from flows.commands.curation import CurateRequest, curate
from flows.commands.evaluation import bootstrap, evaluate
from flows.commands.nights import demo, loop, schedule
from flows.commands.training import TrainRequest, train

__all__ = [
    "CurateRequest",
    "TrainRequest",
    "bootstrap",
    "curate",
    "demo",
    "evaluate",
    "loop",
    "schedule",
    "train",
]
