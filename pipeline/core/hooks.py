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


@dataclass(frozen=True)
class SamplingPlan:
    """What a curation may sample, as upper bounds: every candidate screened at `screen_g`
    and every one refined at `refine_g` (the history prior and the screen only lower these),
    each answer at most `max_new_tokens` long. `line` is what a run says before it starts;
    `estimate` turns the first screen chunk's time into a rough duration for the rest."""

    candidates: int
    screen_g: int
    refine_g: int
    max_new_tokens: int

    @property
    def screen_rollouts(self) -> int:
        return self.candidates * self.screen_g

    @property
    def refine_rollouts(self) -> int:
        return self.candidates * self.refine_g

    @property
    def rollouts(self) -> int:
        return self.screen_rollouts + self.refine_rollouts

    @property
    def tokens(self) -> int:
        return self.rollouts * self.max_new_tokens

    def line(self) -> str:
        return (
            f"sampling at most {self.rollouts:,} rollouts ({self.screen_rollouts:,} screen + up "
            f"to {self.refine_rollouts:,} refine) and {self.tokens:,} new tokens "
            f"(<= {self.max_new_tokens} per answer)"
        )

    def estimate(self, seconds: float, chunks: int) -> str:
        """A rough time for the rest from the first of `chunks` screen chunks taking `seconds`
        (model loading included, so it errs long)."""
        if chunks < 1 or seconds < 0:
            raise ValueError(f"need chunks >= 1 and seconds >= 0, got {chunks} and {seconds}")
        per_rollout = seconds * chunks / max(self.screen_rollouts, 1)
        screen_left = seconds * (chunks - 1)
        refine = per_rollout * self.refine_rollouts
        return (
            f"first screen chunk took {_duration(seconds)}: about {_duration(screen_left)} more "
            f"of screen, then at most {_duration(refine)} of refine (rough)"
        )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
