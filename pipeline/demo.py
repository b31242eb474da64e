"""The first part of `sieve demo`: problems into the ledger and a check of the verifiers.

Generate the default problem mix and a bundled GSM8K-style file into the ledger, check every
problem's answer with the verifiers (its own answer must pass, a perturbed one must fail), and
give example SQL. The rest of the demo — bootstrap, one night of curate → train → eval, the
before/after table — is `flows.loop.demo`; `sieve demo` runs both.

Test: `pytest tests/test_demo.py`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from importlib import resources
from pathlib import Path

import polars as pl

from pipeline.problems import generate_mix
from pipeline.problems.ingest import read_external
from pipeline.problems.mix import DEFAULT_MIX, MixConfig
from pipeline.scoring import verify_batch
from pipeline.store import Ledger

EXAMPLE_SQL = [
    "SELECT family, level, count(*) AS n FROM problems GROUP BY ALL ORDER BY ALL",
    "SELECT split, count(*) FROM problems GROUP BY split",
    "SELECT question, answer FROM problems WHERE family = 'word' LIMIT 5",
    "SELECT * FROM difficulty_by_family ORDER BY family, level",
]


@dataclass(frozen=True)
class SelfCheck:
    """How the verifiers judged every problem's own answer and a perturbed one."""

    problems: int
    own_correct: int
    perturbed_rejected: int
    verifier_errors: int
    seconds: float


@dataclass(frozen=True)
class DemoResult:
    ledger: Path | None
    new_problems: int
    counts: pl.DataFrame
    check: SelfCheck


def example_file() -> Path:
    """The bundled GSM8K-style JSONL example."""
    return Path(str(resources.files("pipeline.problems").joinpath("examples/gsm8k_style.jsonl")))


def perturb(answer: str) -> str:
    """A wrong answer next to the right one: numbers shifted by one, anything else suffixed."""
    try:
        value = Fraction(answer)
    except (ValueError, ZeroDivisionError):
        return answer + "1"
    shifted = value + 1
    return str(shifted.numerator) if shifted.denominator == 1 else str(shifted)


def self_check(problems: pl.DataFrame) -> SelfCheck:
    answers = problems["answer"].to_list()
    verifiers = problems["verifier"].to_list()
    start = time.perf_counter()
    own = verify_batch(answers, answers, verifiers)
    wrong = verify_batch([perturb(a) for a in answers], answers, verifiers)
    return SelfCheck(
        problems=len(answers),
        own_correct=sum(v.correct is True for v in own),
        perturbed_rejected=sum(v.correct is False for v in wrong),
        verifier_errors=sum(v.reward is None for v in own + wrong),
        seconds=time.perf_counter() - start,
    )


def run_demo(
    home: str | Path | None = None, n: int = 2000, seed: int = 0, mix: MixConfig = DEFAULT_MIX
) -> DemoResult:
    """Generate + ingest into the ledger under `home`, then check the verifiers on it."""
    generated = generate_mix(mix.levels(), n, seed)
    external = read_external(example_file(), family="gsm8k_example")
    problems = pl.concat([generated, external])
    with Ledger.open(home) as ledger:
        new = ledger.write("problems", problems)
        path = ledger.path
    counts = (
        problems.group_by("family", "level")
        .agg(pl.len().alias("problems"), (pl.col("split") == "heldout").sum().alias("heldout"))
        .sort("family", "level")
    )
    return DemoResult(ledger=path, new_problems=new, counts=counts, check=self_check(problems))
