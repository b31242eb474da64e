"""`sieve sql`, `sieve stats`, `sieve audit`, `sieve curriculum show`: read the ledger, never
write it.

`sql` runs one statement in `pipeline.store`'s sandbox (read-only, time and memory limits) and
writes it as a table, CSV, a JSON array or Parquet, streamed batch by batch under the same limits
(a table cuts cells at `CELL_CHARS`). `--output` is written by `pipeline.core.outputs`' guarded
writer: never the ledger or one of its side files under any name (device and inode are compared) nor
any DuckDB database, `-` is stdout, a regular file is written as a new file beside it and renamed
over it (through a symbolic link), a device or pipe in place, and nothing is removed but that
new file. `audit` shows the verifier
audit of a curation (`pipeline.jobs.audit`): math-verify's disagreement rate with Sieve's verdicts
per family, the worst family x level cells and a few disagreements. Ledger text (answers,
completions, column names) prints as it is, never as Rich markup (`flows.cli.common`'s consoles).

Test: `pytest tests/cli/test_sql_sandbox.py tests/cli/test_cli.py tests/store/test_side_files.py`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from flows.cli.common import console, out, show, table
from flows.cli.options import HomeOpt
from pipeline.core.errors import SieveError
from pipeline.core.outputs import PARTIAL, STDOUT, Mode, check_output, open_output

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
    from pipeline.store import Ledger, QueryLimits, Sandbox, check_query

    statement = check_query(query)
    limits = QueryLimits.from_options(timeout, memory_limit)
    if format is Format.parquet and output is None:
        raise SieveError("--format parquet needs --output FILE ('-' for stdout)")
    if output is not None and str(output) == STDOUT and format is not Format.parquet:
        output = None  # stdout, as without --output
    views: dict[Format, View] = {Format.parquet: "native", Format.json: "json"}
    view = views.get(format, "text")
    with Ledger.open(home, read_only=True) as ledger:
        if output is not None:
            check_output(output, ledger=ledger.path, label="--output ")
        sandbox = Sandbox(ledger.con, limits, on_stuck=_stuck, ledger=ledger.path)
        with sandbox.stream(statement, view) as batches:
            _emit(batches, format, output)


CELL_CHARS = 10_000  # a table cell longer than this is cut (Rich lays out long text slowly)


def _stuck(message: str) -> NoReturn:
    """The sandbox's `on_stuck`: remove a partly written output file, then end the process."""
    from pipeline.store.sandbox_sql import exit_process

    for partial in PARTIAL:
        with suppress(OSError):
            partial.unlink()
    exit_process(message)


def _emit(batches: Batches, format: Format, output: Path | None) -> None:
    """Write a streamed `Sandbox` result: Parquet from the native view, a JSON array from the
    json view (one object per row), CSV or a table from the text view."""
    if format is Format.parquet and output is not None:
        _write_parquet(batches, output)
    elif format is Format.json:
        with _text_out(output) as handle:
            _write_json(batches, handle)
    elif format is Format.csv:
        with _text_out(output) as handle:
            _write_csv(batches, handle)
    elif output is None:
        out.print(_table(batches, 200))
    else:
        with _text_out(output) as handle:
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


def _write_parquet(batches: Batches, output: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _output_file(output, "wb") as handle:
        try:
            with pq.ParquetWriter(handle, batches.schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
        except pa.ArrowException as exc:
            if isinstance(exc, pa.ArrowMemoryError):
                raise
            raise SieveError(f"cannot write {output}: {' '.join(str(exc).split())}") from exc


@contextmanager
def _text_out(output: Path | None) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
    else:
        with _output_file(output, "w") as handle:
            yield handle


@contextmanager
def _output_file(output: Path, mode: Mode) -> Iterator[IO[Any]]:
    """`output` open for writing by the one guarded writer (`pipeline.core.outputs`)."""
    with open_output(output, mode, label="--output ") as handle:
        yield handle


def stats(home: HomeOpt = None) -> None:
    """Print the ledger's summary views."""
    from pipeline.store import Ledger

    with Ledger.open(home, read_only=True) as ledger:
        out.print(f"ledger: {ledger.path}")
        show(ledger.query("table_counts"), "tables")
        show(ledger.query("problem_counts"), "problems by family x level")
        show(
            ledger.query("difficulty_latest"),
            "measured pass rate by family x level, newest revisions",
        )
        show(ledger.query("runs_latest"), "latest sampling runs")
        from pipeline.jobs.curate import allocation, load_history
        from pipeline.selection import CurateConfig

        cells = allocation(CurateConfig(), load_history(ledger, []))
        if cells is not None:
            show(
                cells,
                "informative groups by family x level (recent revisions) and where the next "
                "curation's candidates go (default config)",
            )
        evidence = ledger.query("cell_evidence")
        if evidence.height:
            show(
                evidence,
                "curation vs training evidence by family x level (groups informative, pass rate)",
            )
        cells = ledger.sql(
            "SELECT c.cell, c.groups, round(c.weighted_samples, 1) AS weighted_samples, "
            "round(c.cell_yield, 3) AS cell_yield, count(p.problem_id) AS prompts, "
            "count(p.problem_id) FILTER (WHERE p.groups > 0) AS seen, "
            "round(avg(p.mean * (1 - p.mean)), 3) AS mean_learnability "
            "FROM cell_posterior c LEFT JOIN prompt_posterior p USING (cell) "
            "GROUP BY ALL ORDER BY c.cell"
        )
        if cells.height:
            show(
                cells,
                "difficulty model by family x level (views cell_posterior, prompt_posterior: "
                "decayed evidence, yield, learnability p(1-p) at the posterior mean)",
            )
        show(ledger.sql("SELECT * FROM curriculum_summary"), "curricula")
        show(ledger.sql("SELECT * FROM rejection_summary ORDER BY ALL"), "rejections by reason")
        from flows.loop import heldout_by_revision

        show(heldout_by_revision(ledger), "held-out sampled pass@1 by revision (oldest first)")


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
    from pipeline.jobs import audit as audit_lib
    from pipeline.store import Ledger

    if examples < 0 or cells < 0:
        raise SieveError("--examples and --cells must be >= 0")
    with Ledger.open(home, read_only=True) as ledger:
        label, runs = audit_lib.resolve(ledger, target)
        families = audit_lib.by_family(ledger, runs)
        worst = audit_lib.worst_cells(ledger, runs, cells)
        shown = audit_lib.examples(ledger, runs, examples)
    title = label
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
    limit: Annotated[int, typer.Option(help="Items to list.")] = 20,
    home: HomeOpt = None,
) -> None:
    """Stages, group sizes and the top items of a curriculum."""
    from pipeline.store import Ledger
    from pipeline.store.ids import resolve_curriculum

    with Ledger.open(home, read_only=True) as ledger:
        cid = resolve_curriculum(ledger, curriculum)
        show(ledger.query("curriculum_stages", curriculum_id=cid), f"curriculum {cid}")
        show(ledger.query("curriculum_rejections", curriculum_id=cid), "rejected by reason")
        show(ledger.query("curriculum_items_top", curriculum_id=cid, limit=limit), "items")
