"""`sieve generate`, `sieve ingest`, `sieve verify`: problems into the ledger, one verdict out.

Each calls one job: `pipeline.jobs.data.intake.generate_problems` / `.ingest_file`,
`pipeline.scoring.verify`; this module prints what they return.

Test: `pytest tests/cli/test_cli.py tests/problems/test_ingest.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import err, out, table
from flows.cli.options import HomeOpt, seed_option
from pipeline.core.errors import SieveError

if TYPE_CHECKING:
    from pipeline.jobs.data.intake import Added

HeldoutOpt = Annotated[float, typer.Option(help="Percent held out, fixed by hash.")]


def generate(
    family: Annotated[
        str | None, typer.Option(help="Problem family (arith, linear, modular, word).")
    ] = None,
    mix: Annotated[
        Path | None, typer.Option(help="A TOML mix of families and levels instead of --family.")
    ] = None,
    levels: Annotated[str, typer.Option(help="Levels: 3, 1-5, 1,3,5 or all.")] = "all",
    n: Annotated[int, typer.Option(help="Number of problems, spread over the levels.")] = 1000,
    seed: Annotated[int, seed_option("Seed; the same seed gives the same problems.")] = 0,
    heldout_pct: HeldoutOpt = 10.0,
    home: HomeOpt = None,
) -> None:
    """Generate problems into the ledger and print counts by level."""
    from pipeline.jobs.data.intake import generate_problems

    added = generate_problems(home, family, mix, levels, n, seed, heldout_pct)
    _print_added(added)


def _print_added(added: Added) -> None:
    """The problems written, counted by family x level and split, under one title."""
    import polars as pl

    frame = added.frame
    title = f"{added.label}: {frame.height} problems ({added.new} new) -> {added.ledger}"
    counts = (
        frame.group_by("family", "level")
        .agg(
            pl.len().alias("problems"),
            (pl.col("split") == "train").sum().alias("train"),
            (pl.col("split") == "heldout").sum().alias("heldout"),
        )
        .sort("family", "level")
    )
    out.print(table(counts, title=title))


def ingest(
    file: Annotated[
        Path,
        typer.Argument(
            help="A .jsonl, .csv or .parquet file of problems, or a folder written by datasets' "
            "save_to_disk."
        ),
    ],
    question_field: Annotated[str, typer.Option(help="Field holding the question.")] = "question",
    chat_field: Annotated[
        str | None,
        typer.Option(
            help="Field holding a chat conversation (a list of {role, content} turns) whose user "
            "turn is the question, instead of --question-field.",
        ),
    ] = None,
    answer_field: Annotated[
        str,
        typer.Option(
            help="Field holding the answer, or a solution ending '#### 42' or with \\boxed{}."
        ),
    ] = "answer",
    family: Annotated[
        str, typer.Option(help="Family name recorded for these problems (no --family-field).")
    ] = "external",
    family_field: Annotated[
        str | None, typer.Option(help="Field holding each row's family, instead of --family.")
    ] = None,
    level_field: Annotated[str | None, typer.Option(help="Optional integer level field.")] = None,
    split_field: Annotated[
        str | None,
        typer.Option(help="Field holding each row's split: train or test (held out)."),
    ] = None,
    id_field: Annotated[
        str | None, typer.Option(help="Field holding the file's own id (kept in params).")
    ] = None,
    heldout_pct: HeldoutOpt = 10.0,
    allow_conflicts: Annotated[
        bool,
        typer.Option(
            "--allow-conflicts",
            help="Keep a question given different answers (in the file, or in the file and the "
            "ledger), each as its own problem.",
        ),
    ] = False,
    max_line_bytes: Annotated[
        int | None,
        typer.Option(
            help="Longest JSONL line or CSV record, or Parquet or dataset cell, accepted, in "
            "bytes (default 1 MiB)."
        ),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Import external problems (GSM8K '#### 42' and MATH \\boxed{} answers are recognised).

    All or nothing: a bad record (named by file and line or row) imports nothing.
    """
    from pipeline.jobs.data.intake import ingest_file
    from pipeline.problems.columns import Columns

    if chat_field is not None and question_field != "question":
        raise SieveError("give --question-field or --chat-field, not both")
    columns = Columns(
        question=chat_field if chat_field is not None else question_field,
        answer=answer_field,
        level=level_field,
        split=split_field,
        family=family_field,
        id=id_field,
        chat=chat_field is not None,
    )
    added = ingest_file(
        home,
        file,
        columns,
        family=family,
        heldout_pct=heldout_pct,
        allow_conflicts=allow_conflicts,
        max_line_bytes=max_line_bytes,
        warn=lambda line: err.print(f"warning: {line}"),
    )
    _print_added(added)
    if added.clashes:
        out.print(f"{added.clashes} question(s) kept with more than one answer (--allow-conflicts)")


def verify(
    answer: Annotated[str, typer.Option(help="The gold answer.")],
    completion: Annotated[str, typer.Option(help="The model's completion.")],
    verifier: Annotated[str, typer.Option(help="Verifier name.")] = "math",
    answer_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="chat: only a marked, committed final answer counts (the safe default); "
            "raw: a bare answer counts too (the tiny policy's format).",
        ),
    ] = "chat",
    truncated: Annotated[
        bool,
        typer.Option(
            "--truncated",
            help="The sampler cut this completion at its token budget (finish_reason length): "
            "an answer running to the cut is not paid.",
        ),
    ] = False,
) -> None:
    """Score one completion against a gold answer and print the verdict as JSON."""
    from pipeline.scoring import VERIFIER_VERSION
    from pipeline.scoring import verify as run_verify

    if answer_format not in ("chat", "raw"):
        raise SieveError(f"--format must be chat or raw, got {answer_format!r}")
    try:
        verdict = run_verify(
            completion,
            answer,
            verifier,
            marker_required=answer_format == "chat",
            truncated=truncated,
        )
    except ValueError as exc:
        raise SieveError(str(exc)) from exc
    payload = {
        "reward": verdict.reward,
        "correct": verdict.correct,
        "reason": verdict.reason,
        "components": verdict.components,
        "detail": verdict.detail,
        "format": answer_format,
        "truncated": truncated,
        "verifier_version": VERIFIER_VERSION,
    }
    out.print_json(json.dumps(payload))
