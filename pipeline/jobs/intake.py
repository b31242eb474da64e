"""Problems into the ledger: `sieve generate` (a family's levels, or a mix file) and `sieve
ingest` (an external JSONL or Parquet file, all or nothing).

An ingest refuses a question the file answers one way and the ledger (from another file)
another, unless conflicts are allowed, in which case each answer is its own problem. Nothing is
written until every record is read and checked.

Test: `pytest tests/cli/test_cli.py tests/problems/test_ingest.py tests/cli/test_bad_inputs.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.store import Ledger

MAX_LINE_BYTES_ACCEPTED = 1 << 30  # a line is read whole into memory: past this, a mistake


@dataclass(frozen=True)
class Added:
    """What went into the ledger: the problems (`frame`), how many were new, where the ledger
    is, what they were called (`label`), and questions kept with several answers (`clashes`)."""

    frame: pl.DataFrame
    new: int
    ledger: Path | None  # None: an in-memory ledger
    label: str
    clashes: int = 0


def generate_problems(
    home: str | Path | None,
    family: str | None,
    mix: Path | None,
    levels: str,
    n: int,
    seed: int,
    heldout_pct: float,
) -> Added:
    """`n` problems of `family` over `levels` (3, 1-5, 1,3,5 or all), or of the mix file `mix`
    (exactly one of them), written to the ledger of `home`."""
    from pipeline.problems import generate, generate_mix, parse_levels
    from pipeline.selection.config import load_mix

    if mix is not None and family is None:
        frame = generate_mix(load_mix(mix).levels(), n, seed, heldout_pct=heldout_pct)
        label = mix.name
    elif family is not None and mix is None:
        frame = generate(family, parse_levels(levels, family), n, seed, heldout_pct=heldout_pct)
        label = family
    else:
        raise SieveError("give exactly one of --family NAME or --mix FILE")
    with Ledger.open(home) as ledger:
        return Added(frame, ledger.write("problems", frame), ledger.path, label)


def ingest_file(
    home: str | Path | None,
    file: Path,
    question_field: str = "question",
    answer_field: str = "answer",
    *,
    family: str = "external",
    level_field: str | None = None,
    heldout_pct: float = 10.0,
    allow_conflicts: bool = False,
    max_line_bytes: int | None = None,
    warn: Callable[[str], None] | None = None,
) -> Added:
    """The problems of `file` (`pipeline.problems.ingest.read_external`; `max_line_bytes` None:
    its default) written to the ledger of `home`, checked first against the answers the ledger
    already holds for the same questions unless `allow_conflicts`."""
    from pipeline.problems.ingest import (
        MAX_LINE_BYTES,
        check_stored_conflicts,
        conflicting_questions,
        read_external,
    )

    if not file.exists():
        raise SieveError(f"{file}: no such file")
    if max_line_bytes is not None and max_line_bytes > MAX_LINE_BYTES_ACCEPTED:
        raise SieveError(
            f"--max-line-bytes must be at most {MAX_LINE_BYTES_ACCEPTED:,} (1 GiB), "
            f"got {max_line_bytes:,}"
        )
    frame = read_external(
        file,
        question_field,
        answer_field,
        family=family,
        level_field=level_field,
        heldout_pct=heldout_pct,
        allow_conflicts=allow_conflicts,
        max_line_bytes=MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
        warn=warn,
    )
    with Ledger.open(home) as ledger:
        if not allow_conflicts:  # other files' answers to the same questions
            stored = ledger.sql(
                "SELECT question, answer, source FROM problems "
                "WHERE question IN (SELECT unnest($q))",
                {"q": frame["question"].unique().to_list()},
            )
            check_stored_conflicts(frame, stored, file.name)
        new = ledger.write("problems", frame)
        clashes = conflicting_questions(frame) if allow_conflicts else 0
        return Added(frame, new, ledger.path, file.name, clashes)
