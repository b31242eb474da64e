"""Problems into the ledger: `sieve generate` (a family's levels, or a mix file) and `sieve
ingest` (a user's JSONL, CSV or Parquet file or saved dataset folder, all or nothing).

An ingest refuses a question the file answers one way and the ledger (from another file)
another, unless conflicts are allowed, in which case each answer is its own problem; questions
are compared as `pipeline/problems/text.py` reads them, the ledger's streamed in batches. When
the file gives each row's split, a problem the ledger holds in the other split is refused too.
Nothing is written until every record is read and checked.

Test: `pytest tests/cli/test_cli.py tests/problems/test_ingest.py tests/cli/test_bad_inputs.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.problems.columns import Columns
from pipeline.store import Ledger, load_query

MAX_LINE_BYTES_ACCEPTED = 1 << 30  # a line is read whole into memory: past this, a mistake
STORED_BATCH = 100_000  # ledger problems compared at a time
WRITE_ROWS = 500_000  # problems turned into Arrow and inserted at a time (one transaction)


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
    columns: Columns | None = None,
    *,
    family: str = "external",
    heldout_pct: float = 10.0,
    allow_conflicts: bool = False,
    max_line_bytes: int | None = None,
    warn: Callable[[str], None] | None = None,
) -> Added:
    """The problems of `file` (`pipeline.problems.ingest.read_external`; `max_line_bytes` None:
    its default) written to the ledger of `home`, checked first against the answers the ledger
    already holds for the same questions unless `allow_conflicts`, and against its splits when
    the file gives them."""
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
    columns = columns if columns is not None else Columns()
    frame = read_external(
        file,
        columns,
        family=family,
        heldout_pct=heldout_pct,
        allow_conflicts=allow_conflicts,
        max_line_bytes=MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
        warn=warn,
    )
    with Ledger.open(home) as ledger:
        ledger.run("SET enable_progress_bar = false")  # DuckDB draws one on stdout past 2 s
        if not allow_conflicts:  # other files' answers to the same questions
            check_stored_conflicts(frame, _stored_answers(ledger, frame), file.name)
        if columns.split is not None or (file / "dataset_dict.json").is_file():
            _check_stored_splits(ledger, frame, file.name)
        parts = (frame.slice(start, WRITE_ROWS) for start in range(0, frame.height, WRITE_ROWS))
        new = ledger.write_parts("problems", parts)
        clashes = conflicting_questions(frame) if allow_conflicts else 0
        return Added(frame, new, ledger.path, file.name, clashes)


def _stored_answers(ledger: Ledger, frame: pl.DataFrame) -> pl.DataFrame:
    """The ledger's problems (question, answer, source) whose question is one of `frame`'s as
    `question_key` reads them (candidates by the key's hash, compared exactly by the caller),
    `STORED_BATCH` rows at a time."""
    from pipeline.problems.text import key_hashes, question_key

    hashed = question_key(pl.col("question")).hash(seed=0).alias("h")
    wanted = key_hashes(frame["question"]).unique().to_frame("h")
    kept = [pl.DataFrame(schema={"question": pl.Utf8, "answer": pl.Utf8, "source": pl.Utf8})]
    with ledger.connected() as con:
        reader = con.sql(load_query("ingest_stored_answers")).to_arrow_reader(STORED_BATCH)
        assert reader is not None  # a SELECT has a result
        for batch in reader:
            part = pl.DataFrame(pl.from_arrow(batch))
            kept.append(part.with_columns(hashed).join(wanted, on="h", how="semi").drop("h"))
    return pl.concat(kept)


def _check_stored_splits(ledger: Ledger, frame: pl.DataFrame, name: str) -> None:
    """Refuse a problem the ledger holds in the other split than the file gives it."""
    from pipeline.problems.duplicates import clip

    shown = {"train": "train", "heldout": "test"}
    with ledger.connected() as con:
        con.register("_sieve_ingest", frame.select("problem_id", "question", "split").to_arrow())
        try:
            rows = con.execute(load_query("ingest_split_clashes")).fetchall()
        finally:
            con.unregister("_sieve_ingest")
    if rows:
        question, given, stored, n = rows[0]
        raise SieveError(
            f"{name}: question {clip(question)} is in the ledger's {shown[stored]} split; the "
            f"file puts it in {shown[given]} ({n} such problem(s)); a problem is in one split"
        )
