"""`sieve sql`, `sieve stats`, `sieve audit`, `sieve curriculum show`: read the ledger, never
write it.

`sql` runs one statement in `pipeline.store`'s sandbox (read-only, time and memory limits) and
writes it as a table, CSV, a JSON array or Parquet. `audit` shows the verifier audit of a
curation (`pipeline.audit`): math-verify's disagreement rate with Sieve's verdicts per family,
the worst family x level cells and a few disagreements. Ledger text (answers, completions,
column names) prints as it is, never as Rich markup (`flows.cli.common`'s consoles).

Test: `pytest tests/cli/test_sql_sandbox.py tests/cli/test_cli.py tests/store/test_locking.py`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from flows.cli.common import console, out, show, table
from flows.cli.options import HomeOpt
from pipeline.errors import SieveError

if TYPE_CHECKING:
    import pyarrow as pa

curriculum_app = typer.Typer(help="Inspect curricula.", no_args_is_help=True)


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def sql(
    query: Annotated[str, typer.Argument(help="A read-only query (SELECT, EXPLAIN, SHOW...).")],
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    output: Annotated[Path | None, typer.Option(help="Write to this file.")] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", envvar="SIEVE_SQL_TIMEOUT", help="Stop the query after this many seconds."
        ),
    ] = 60.0,
    memory_limit: Annotated[
        str,
        typer.Option(
            "--memory-limit",
            envvar="SIEVE_SQL_MEMORY_LIMIT",
            help="DuckDB's memory for the query, e.g. 512MB or 4GiB; while it runs the process "
            "may grow by at most about twice this.",
        ),
    ] = "2GB",
    home: HomeOpt = None,
) -> None:
    """Run one read-only query on the ledger (views: group_stats, prompt_stats, ...). It runs
    sandboxed: it reads only the ledger, writes nothing, changes no setting, and stops at
    --timeout and --memory-limit. Lists and structs become JSON text in csv and table output."""
    from pipeline.store import Ledger, QueryLimits, Sandbox, check_query
    from pipeline.store.sandbox_sql import View, exit_process

    statement = check_query(query)
    limits = QueryLimits.from_options(timeout, memory_limit)
    if format is Format.parquet and output is None:
        raise SieveError("--format parquet needs --output FILE")
    if output is not None and not output.parent.is_dir():
        raise SieveError(f"cannot write {output}: directory {output.parent} does not exist")
    views: dict[Format, View] = {Format.parquet: "native", Format.json: "json"}
    view = views.get(format, "text")
    with Ledger.open(home, read_only=True) as ledger:
        if output is not None and ledger.path is not None:
            target, own = output.resolve(), ledger.path.resolve()
            if target in (own, own.with_name(own.name + ".wal")):
                raise SieveError(f"refused: --output {output} is the ledger itself")
        result = Sandbox(ledger.con, limits, on_stuck=exit_process).run(statement, view)
    _emit(result, format, output)


def _emit(result: pa.Table, format: Format, output: Path | None) -> None:
    """Write a `Sandbox.run` result: Parquet from the native view, a JSON array from the json
    view (one object per row), CSV or a table from the text view."""
    if format is Format.parquet and output is not None:
        _write_parquet(result, output)
    elif format is Format.json:
        rows = _finite_json(result.column(0).to_pylist())
        _write_text("[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n", output)
    else:
        import polars as pl

        frame = pl.from_arrow(result)  # text view: numbers, booleans and strings only
        assert isinstance(frame, pl.DataFrame)  # a Table gives a frame (from_arrow: either)
        if format is Format.csv:
            _write_text(frame.write_csv(), output)
        elif output is None:
            out.print(table(frame))
        else:
            with _writing(output) as handle:
                console(file=handle, width=200).print(table(frame, max_rows=frame.height))


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


def _write_parquet(result: pa.Table, output: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.write_table(result, output)
    except (OSError, pa.ArrowException) as exc:
        raise SieveError(f"cannot write {output}: {' '.join(str(exc).split())}") from exc


def _write_text(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        with _writing(output) as handle:
            handle.write(text)


@contextmanager
def _writing(output: Path) -> Iterator[TextIO]:
    """`output` open for writing text; an OSError becomes one `error:` line."""
    try:
        with output.open("w", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise SieveError(f"cannot write {output}: {exc.strerror or exc}") from exc


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
        from pipeline.curate import allocation, load_history
        from pipeline.selection import CurateConfig

        cells = allocation(CurateConfig(), load_history(ledger, []))
        if cells is not None:
            show(
                cells,
                "informative groups by family x level (recent revisions) and where the next "
                "curation's candidates go (default config)",
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
    from pipeline import audit as audit_lib
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
    from pipeline.export import resolve_curriculum
    from pipeline.store import Ledger

    with Ledger.open(home, read_only=True) as ledger:
        cid = resolve_curriculum(ledger, curriculum)
        show(ledger.query("curriculum_stages", curriculum_id=cid), f"curriculum {cid}")
        show(ledger.query("curriculum_rejections", curriculum_id=cid), "rejected by reason")
        show(ledger.query("curriculum_items_top", curriculum_id=cid, limit=limit), "items")
