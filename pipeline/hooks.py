"""The one progress protocol every job reports through (curation, training, evaluation,
bootstrap), so a caller — the CLI's progress bars, a test, a notebook — handles them all alike.

A job calls `progress(ProgressEvent(...))` after each unit of work: a committed chunk of a
sampling stage (`stage` = screen | refine), a training step (`train`, with that step's metrics),
an evaluation mode (`greedy` | `sampled`), a block of bootstrap steps (`bootstrap`, with the
loss). `done` counts units finished in this call of the job (a resumed job starts again at 1 and
counts to the units that were left), `total` is how many that call has.

Test: `pytest tests/test_hooks.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProgressEvent:
    job: str  # curate | train | eval | bootstrap
    stage: str  # what the unit belongs to: screen, refine, train, greedy, sampled, bootstrap
    done: int
    total: int
    metrics: Mapping[str, float] = field(default_factory=dict)


Progress = Callable[[ProgressEvent], None]


def report(
    progress: Progress | None,
    job: str,
    stage: str,
    done: int,
    total: int,
    metrics: Mapping[str, float] | None = None,
) -> None:
    """Send one event to `progress` when a hook is set."""
    if progress is not None:
        progress(ProgressEvent(job, stage, done, total, dict(metrics or {})))
