"""`sieve models add|list`: put a real model under `<home>/models` and see what is there.

Test: `pytest tests/test_models.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from flows.cli.common import err, out, show
from flows.cli.options import HomeOpt
from pipeline.core.errors import printable

models_app = typer.Typer(help="Model folders under <home>/models.", no_args_is_help=True)


@models_app.command("add")
def add(
    name: Annotated[
        str, typer.Argument(help="Built-in name (smollm2-135m), or a name for --from.")
    ],
    source: Annotated[
        Path | None, typer.Option("--from", help="Copy this local Hugging Face folder instead.")
    ] = None,
    dtype: Annotated[str, typer.Option(help="Weights dtype of a converted GGUF.")] = "float32",
    force: Annotated[bool, typer.Option(help="Replace an existing folder of that name.")] = False,
    home: HomeOpt = None,
) -> None:
    """Write a model folder (with sieve.json saying where it came from) under <home>/models."""
    from pipeline.policy.folders import add as add_folder

    with err.status(Text(printable(f"adding {name}"))):  # a status reads markup otherwise
        folder, meta = add_folder(name, source, home, dtype=dtype, force=force)
    out.print(f"{folder} (revision {meta['model_revision']}, {meta['source']})", markup=False)


@models_app.command("list")
def list_cmd(home: HomeOpt = None) -> None:
    """Model folders under <home>/models with their content revision and source."""
    import polars as pl

    from pipeline.policy.folders import list_models

    rows = list_models(home)
    show(pl.DataFrame(rows) if rows else pl.DataFrame(), "models")
