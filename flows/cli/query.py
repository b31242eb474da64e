"""`sieve sql`, `sieve stats`, `sieve audit`, `sieve curriculum show`: read the ledger, never
write it.

`sql` runs one statement in `pipeline.store`'s sandbox (read-only, time and memory limits) and
writes it as a table, CSV, a JSON array or Parquet, streamed batch by batch under the same limits
(a table cuts cells at `CELL_CHARS`). `--output` is written by `pipeline.core.outputs`' guard,
which judges the file the path leads to (through links and descriptors): never this home's
ledger or its side files, nor any DuckDB database or log; `-` is stdout, a regular file is
written as a new file beside it and renamed over it, a FIFO only when a process reads it, and
nothing is removed but that new file. `audit` shows the verifier audit of a curation
(`pipeline.jobs.curate.audit`): math-verify's disagreement rate with Sieve's verdicts per family,
the worst family x level cells and a few disagreements. Ledger text (answers, completions, column
names) prints as it is, never as Rich markup (`flows.cli.common`'s consoles).

Test: `pytest tests/cli/test_sql_sandbox.py tests/cli/test_cli.py tests/store/test_side_files.py
tests/core/test_output_guard.py`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.common import console, out, show, table
from flows.cli.options import ROWS_CAP, HomeOpt, within
from pipeline.core.errors import SieveError
from pipeline.core.outputs import STDOUT, Mode, open_output

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    from rich.table import Table

    from pipeline.store.sandbox_sql import Batches, View


curriculum_app = typer.Typer(help="Inspect curricula.", no_args_is_help=True)


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def sql(
    query: Annotated[str, typer.Argument(help="A read-only query (SELECT, EXPLAIN, SHOW...).")],
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    output: Annotated[
        Path | None, typer.Option(help="Write to this file ('-': stdout; never the ledger).")
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            envvar="SIEVE_SQL_TIMEOUT",
            help="Stop after this many seconds (the query and writing its result).",
        ),
    ] = 60.0,
    memory_limit: Annotated[
        str,
        typer.Option(
            "--memory-limit",
            envvar="SIEVE_SQL_MEMORY_LIMIT",
            help="DuckDB's memory for the query, e.g. 512MB or 4GiB; until the result is "
            "written the process may grow by at most about twice this.",
        ),
    ] = "2GB",
    home: HomeOpt = None,
) -> None:
    """Run one read-only query on the ledger (views: group_stats, prompt_stats, ...). It runs
    sandboxed: it reads only the ledger, writes nothing, changes no setting, and stops at
    --timeout and --memory-limit. Lists and structs become JSON text in csv and table output;
    a table cuts cells at 10,000 characters (csv and json keep them whole)."""
    from pipeline.core.home import ledger_path
    from pipeline.store.sandbox_sql import query_batches

    if format is Format.parquet and output is None:
        raise SieveError("--format parquet needs --output FILE ('-' for stdout)")
    if output is not None and str(output) == STDOUT and format is not Format.parquet:
        output = None  # stdout, as without --output
    views: dict[Format, View] = {Format.parquet: "native", Format.json: "json"}
    view = views.get(format, "text")
    with query_batches(
        home, query, timeout=timeout, memory_limit=memory_limit, view=view, output=output
    ) as batches:
        _emit(batches, format, output, ledger_path(home))


CELL_CHARS = 10_000  # a table cell longer than this is cut (Rich lays out long text slowly)


def _emit(batches: Batches, format: Format, output: Path | None, ledger: Path) -> None:
    """Write a streamed `Sandbox` result: Parquet from the native view, a JSON array from the
    json view (one object per row), CSV or a table from the text view; `ledger` is never
    written (`_output_file`)."""
    if format is Format.parquet and output is not None:
        _write_parquet(batches, output, ledger)
    elif format is Format.json:
        with _text_out(output, ledger) as handle:
            _write_json(batches, handle)
    elif format is Format.csv:
        with _text_out(output, ledger) as handle:
            _write_csv(batches, handle)
    elif output is None:
        out.print(_table(batches, 200))
    else:
        with _text_out(output, ledger) as handle:
            console(file=handle, width=200).print(_table(batches, None))


def _write_json(batches: Batches, handle: IO[str]) -> None:
    first = True
    for batch in batches:
        if batch.num_rows == 0:
            continue
        rows = _finite_json(batch.column(0).to_pylist())
        handle.write(("[\n" if first else ",\n") + ",\n".join(rows))
        first = False
    handle.write("[]\n" if first else "\n]\n")


def _write_csv(batches: Batches, handle: IO[str]) -> None:
    import pyarrow as pa

    header = True
    for batch in batches:
        if batch.num_rows == 0:
            continue
        handle.write(_frame(pa.Table.from_batches([batch])).write_csv(include_header=header))
        header = False
    if header:  # no rows: the header alone, as for an empty frame
        handle.write(_frame(batches.schema.empty_table()).write_csv())


def _frame(result: pa.Table) -> pl.DataFrame:
    import polars as pl

    frame = pl.from_arrow(result)  # text view: numbers, booleans and strings only
    assert isinstance(frame, pl.DataFrame)  # a Table gives a frame (from_arrow: either)
    return frame


def _table(batches: Batches, max_rows: int | None) -> Table:
    """A table of the first `max_rows` rows (all: None), each long cell cut with a note; the
    rows past `max_rows` are only counted."""
    import pyarrow as pa

    kept: list[pa.RecordBatch] = []
    rows = seen = 0
    for batch in batches:
        seen += batch.num_rows
        if max_rows is None or rows < max_rows:
            take = batch if max_rows is None else batch.slice(0, max_rows - rows)
            kept.append(_cut_cells(take))
            rows += take.num_rows
    frame = _frame(pa.Table.from_batches(kept, batches.schema))
    shown = table(frame, max_rows=frame.height)
    if seen > frame.height:
        shown.caption = f"{seen} rows, first {frame.height} shown (use --format csv)"
    return shown


def _cut_cells(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with each text cell over CELL_CHARS characters cut there, and a note appended."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for column in batch.columns:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            length = pc.utf8_length(column)
            long = pc.fill_null(pc.greater(length, CELL_CHARS), False)
            if pc.any(long).as_py():
                note = pc.binary_join_element_wise(
                    pc.utf8_slice_codeunits(column, 0, CELL_CHARS),
                    " ... (cut: ",
                    pc.cast(length, pa.string()),
                    " characters; use --format csv)",
                    "",
                )
                column = pc.if_else(long, note, column)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


# a JSON string (left as it is) or one of the non-numbers DuckDB writes for NaN and infinities
_NON_FINITE = re.compile(r'("(?:[^"\\]|\\.)*")|-?Infinity|NaN')


def _finite_json(rows: list[str]) -> list[str]:
    """`rows` (JSON objects as DuckDB writes them) with NaN, Infinity and -Infinity as null, so
    the output is valid JSON, which has no such numbers; only rows that hold one are rewritten."""
    import pyarrow as pa
    import pyarrow.compute as pc

    suspect = pc.match_substring_regex(pa.array(rows, pa.string()), "NaN|Infinity")
    for i in pc.indices_nonzero(suspect).to_pylist():
        rows[i] = _NON_FINITE.sub(lambda m: m.group(1) or "null", rows[i])
    return rows


def _write_parquet(batches: Batches, output: Path, ledger: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _output_file(output, "wb", ledger) as handle:
        try:
            with pq.ParquetWriter(handle, batches.schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        except pa.ArrowException as exc:
            if isinstance(exc, pa.ArrowMemoryError):
                raise
            raise SieveError(f"cannot write {output}: {' '.join(str(exc).split())}") from exc


@contextmanager
def _text_out(output: Path | None, ledger: Path) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
    else:
        with _output_file(output, "w", ledger) as handle:
            yield handle


@contextmanager
def _output_file(output: Path, mode: Mode, ledger: Path) -> Iterator[IO[Any]]:
    """`output` open for writing by the one guarded writer (`pipeline.core.outputs`), judged
    again as it is opened, `ledger` (the home's) included."""
    with open_output(output, mode, ledger=ledger, label="--output ") as handle:
        yield handle


def stats(home: HomeOpt = None) -> None:
    """Print the ledger's summary views."""
    from pipeline.jobs.analysis.stats import ledger_stats

    path, tables = ledger_stats(home)
    out.print(f"ledger: {path}")
    for frame, title in tables:
        show(frame, title)


def audit(
    target: Annotated[
        str, typer.Argument(help="A curriculum id, a screen/refine run id, or 'latest'.")
    ] = "latest",
    examples: Annotated[int, typer.Option(help="Disagreements to list.")] = 5,
    cells: Annotated[int, typer.Option(help="Worst family x level cells to list.")] = 10,
    home: HomeOpt = None,
) -> None:
    """The verifier audit of a curation: how often math-verify disagrees with Sieve's verdicts,
    per family and in the worst family x level cells, with a few examples (`latest`: the newest
    curriculum's screen and refine runs; views verifier_audit_rates, verifier_disagreements)."""
    from pipeline.jobs.curate.audit import audit_view

    view = audit_view(home, target, examples, cells)
    families, runs, worst, shown = view.families, view.runs, view.worst, view.examples
    title = view.label
    if families.height == 0:
        out.print(f"{title}: no verifier audit rows (curated before the audit existed?)")
        return
    totals = families.select("audited", "guesses", "disagreements", "second_failed").sum().row(0)
    out.print(
        f"{title} ({', '.join(runs)}): {totals[0]} verdicts audited ({totals[1]} "
        f"guessed), {totals[2]} disagreements, math-verify failed on {totals[3]}"
    )
    show(families, "disagreement rate by family (math-verify vs Sieve)")
    if cells:
        show(worst, "worst family x level cells (highest disagreement rate first)")
    if examples:
        show(shown, "example disagreements (first 200 characters of the completion)")


@curriculum_app.command("show")
def curriculum_show(
    curriculum: Annotated[str, typer.Argument(help="Curriculum id or 'latest'.")] = "latest",
    limit: Annotated[int, typer.Option(help="Items to list.", callback=within(0, ROWS_CAP))] = 20,
    home: HomeOpt = None,
) -> None:
    """Stages, group sizes and the top items of a curriculum."""
    from pipeline.jobs.analysis.stats import curriculum_tables

    for frame, title in curriculum_tables(home, curriculum, limit):
        show(frame, title)
