"""The first part of `sieve demo`: problems into the ledger and a check of the verifiers.

Generate the default problem mix and a bundled GSM8K-style file into the ledger, check every
problem's answer with the verifiers (its own answer must pass, a perturbed one must fail), and
give example SQL. The rest of the demo — bootstrap, one night of curate → train → eval — is
`flows.loop.demo`; `sieve demo` runs both (`flows.commands.demo`) and prints the summary
(`flows/cli/summary.py`).

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

    # Both readings: the bare answer (raw, as the tiny policy writes it) and the boxed answer
    # (chat, the default); code is judged by running it, the same text either way.
    def boxed(texts: list[str]) -> list[str]:
        return [
            t if v == "code" else f"\\boxed{{{t}}}" for t, v in zip(texts, verifiers, strict=True)
        ]

    wrong_answers = [perturb(a) for a in answers]
    own_raw = verify_batch(answers, answers, verifiers, marker_required=False)
    own_chat = verify_batch(boxed(answers), answers, verifiers)
    wrong_raw = verify_batch(wrong_answers, answers, verifiers, marker_required=False)
    wrong_chat = verify_batch(boxed(wrong_answers), answers, verifiers)
    every = own_raw + own_chat + wrong_raw + wrong_chat
    return SelfCheck(
        problems=len(answers),
        own_correct=sum(
            a.correct is True and b.correct is True for a, b in zip(own_raw, own_chat, strict=True)
        ),
        perturbed_rejected=sum(
            a.correct is False and b.correct is False
            for a, b in zip(wrong_raw, wrong_chat, strict=True)
        ),
        verifier_errors=sum(v.reward is None for v in every),
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
