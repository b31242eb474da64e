"""The simulated policy that curation, export, report and CLI tests curate with.

`simulated_policy(problems, rates_by_level, revision)` is a `Policy` over a `SimulatedSampler`:
the prompt of a problem is its question followed by `=` (the raw format), answered correctly
with the pass rate of the problem's level; a level missing from `rates_by_level` is never
solved. `RATES` is the usual ladder: easy levels solved, hard ones never, the middle in between.
`reachable_problems(cfg)` is every problem a curation with `cfg` can draw, however its candidates
are spread over the levels (each level's stream starts the same), so a policy built on it knows
the prompts of any curation with `cfg`'s seed and mix. `use_verifier_version(monkeypatch, v)`
makes every pipeline module that records or compares the verifier version see `v` (a Sieve with
another verifier).

A plain module, so child processes can use it as well: tests import `tests.simulated`; a script
started as `python tests/<child>.py` has `tests/` on its path and imports `simulated`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from pipeline.jobs.curate.curation import Policy
from pipeline.problems import generate_cells, mix_cells
from pipeline.sampling.simulated import SimulatedSampler
from pipeline.selection import CurateConfig

if TYPE_CHECKING:
    import pytest

RATES: dict[int, float] = {1: 1.0, 2: 0.9, 3: 0.6, 4: 0.3, 5: 0.08, 6: 0.0}


def render(questions: Sequence[str]) -> list[str]:
    """The raw prompt format: the question followed by `=`."""
    return [f"{q}=" for q in questions]


def simulated_policy(
    problems: pl.DataFrame, rates_by_level: Mapping[int, float], revision: str = "rev-sim"
) -> Policy:
    """A policy that knows `problems` (question, answer, level) and solves each problem with
    its level's pass rate (0 for a level `rates_by_level` leaves out)."""
    answers: dict[str, str] = {}
    pass_rate: dict[str, float] = {}
    rows = zip(problems["question"], problems["answer"], problems["level"], strict=True)
    for question, answer, level in rows:
        prompt = f"{question}="
        answers[prompt], pass_rate[prompt] = answer, rates_by_level.get(level, 0.0)
    return Policy(SimulatedSampler(answers, pass_rate), revision, render)


def reachable_problems(cfg: CurateConfig) -> pl.DataFrame:
    """Every problem a curation with `cfg` can draw: `cfg.n_candidates` per cell of its mix."""
    cells = [(family, level, cfg.n_candidates) for family, level, _ in mix_cells(cfg.mix_levels())]
    return generate_cells(cells, cfg.seed)


# the modules that record (run rows, audit rows, rescored rows) or compare the verifier version
_VERSIONED = (
    "pipeline.jobs.curate.rollouts",
    "pipeline.jobs.curate.audit",
    "pipeline.jobs.curate.curation",
    "pipeline.jobs.curate.rescore",
)


def use_verifier_version(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """Until the test ends, every loaded `pipeline` module's `VERIFIER_VERSION` is `version`
    (the modules that read it are imported first, so none keeps the patched value after)."""
    import pipeline.scoring

    for name in _VERSIONED:
        importlib.import_module(name)
    current = pipeline.scoring.VERIFIER_VERSION
    for name, module in list(sys.modules.items()):
        if name.startswith("pipeline") and getattr(module, "VERIFIER_VERSION", None) == current:
            monkeypatch.setattr(module, "VERIFIER_VERSION", version)
