"""`sieve export` and `sieve report`: a curriculum for another trainer, the ledger as HTML.

Test: `pytest tests/cli/test_export_report_cli.py tests/test_export.py tests/test_report.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import out
from flows.cli.options import HomeOpt


def export(
    output: Annotated[Path, typer.Option(help="Directory to write the export into.")],
    curriculum: Annotated[str, typer.Option(help="Curriculum id or 'latest'.")] = "latest",
    format: Annotated[str, typer.Option("--format", help="trl, verl, openrlhf or jsonl.")] = "trl",
    prompt_format: Annotated[
        str, typer.Option(help="auto (the curated model's), raw or chat.")
    ] = "auto",
    input_key: Annotated[str, typer.Option(help="OpenRLHF --input_key field.")] = "input",
    label_key: Annotated[str, typer.Option(help="OpenRLHF --label_key field.")] = "label",
    repeat_for_g: Annotated[
        int | None,
        typer.Option(help="The trainer's one group size N: repeat rows round(G/N) times."),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Export a curriculum (with stages, group sizes and evidence) for TRL, verl or OpenRLHF,
    with a dataset card (README.md) beside it."""
    from pipeline.jobs.data.export import export_home

    result = export_home(
        home,
        curriculum,
        format,
        output,
        prompt_format=prompt_format,
        input_key=input_key,
        label_key=label_key,
        repeat_for_g=repeat_for_g,
    )
    stages = ", ".join(f"stage {s}: {n}" for s, n in result.stages.items()) or "no items"
    out.print(
        f"exported {result.rows} prompts ({stages}; {result.prompt_format} prompts) "
        f"as {format} -> {result.path} (card: {result.card})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def report(
    output: Annotated[
        Path | None, typer.Option(help="Directory for report.html (default <home>/report).")
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Write an HTML report: pass rates, difficulty, curricula, training, held-out results."""
    from pipeline.jobs.report.page import write_report

    result = write_report(home, output)
    out.print(
        f"report: {result.path} ({len(result.figures)} figures)", markup=False, soft_wrap=True
    )
    if result.empty_sections:
        out.print("no data yet for: " + "; ".join(result.empty_sections), soft_wrap=True)
