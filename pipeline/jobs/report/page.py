"""Assemble the report's sections into one HTML page and write it with its PNG files.

The page and its figures are written all or nothing (each to a temporary name, all renamed only
once all are written: `pipeline.core.outputs.write_outputs`), so an open report is never
half-written and a failed one leaves the folder as it was (a folder it created is removed);
figure files of an earlier report that this one no longer draws are removed after.
Files are written by `pipeline.core.outputs`' guard, before the work for the names already there:
a name that leads to any ledger's database or side file (through links or descriptors) is refused,
and so is a FIFO, device or socket named like the page or a figure (a report writes regular files
it replaces whole, and never waits on a pipe); a symbolic link is written through.
Text goes into the page through `_text`: HTML-escaped, control characters shown escaped (a raw
one is not even valid HTML).

Test: `.venv/bin/pytest tests/test_report.py -q`.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import IO

import polars as pl

from pipeline.core.errors import printable
from pipeline.core.outputs import check_output, write_outputs
from pipeline.jobs.data.export import check_output_dir, output_folder
from pipeline.jobs.report.sections import SECTIONS, Section
from pipeline.store import Ledger

PAGE = "report.html"
FIGURE_GLOB = "fig_*.png"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
nav a { margin-right: 1em; } .note { color: #777; font-style: italic; }
figure { margin: 1em 0; } figure img { max-width: 100%; } figcaption { color: #555; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f4f4f4; } caption { text-align: left; color: #555; padding-bottom: 0.3em; }
"""


@dataclass(frozen=True)
class ReportResult:
    path: Path  # the HTML page
    figures: list[Path]  # the PNG files written beside it
    empty_sections: list[str]  # titles of sections that had no data yet


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def _text(text: str) -> str:
    return html.escape(printable(text))


def _td(value: object) -> str:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    opening = '<td class="num">' if numeric else "<td>"
    return f"{opening}{_text(_cell(value))}</td>"


def table_html(caption: str, frame: pl.DataFrame, max_rows: int = 200) -> str:
    head = "".join(f"<th>{_text(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(_td(v) for v in row) + "</tr>" for row in frame.head(max_rows).iter_rows()
    )
    more = f" (first {max_rows} of {frame.height} rows)" if frame.height > max_rows else ""
    return (
        f"<table><caption>{_text(caption + more)}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def figure_html(caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    alt = _text(caption)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{alt}">'
        f"<figcaption>{alt}</figcaption></figure>"
    )


def section_html(section: Section) -> str:
    parts = [f'<section id="{section.key}"><h2>{_text(section.title)}</h2>']
    if section.intro:
        parts.append(f"<p>{_text(section.intro)}</p>")
    if section.note:
        parts.append(f'<p class="note">{_text(section.note)}</p>')
    else:
        parts += [figure_html(c, png) for c, png in section.figures]
    parts += [table_html(c, t) for c, t in section.tables if t.height]
    return "\n".join([*parts, "</section>"])


def page_html(sections: list[Section], generated: datetime) -> str:
    nav = " ".join(f'<a href="#{s.key}">{_text(s.title)}</a>' for s in sections)
    body = "\n".join(section_html(s) for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Sieve report</title>"
        f"<style>{STYLE}</style></head><body>"
        f"<h1>Sieve report</h1><p>Generated {generated:%Y-%m-%d %H:%M} UTC.</p>"
        f"<nav>{nav}</nav>\n{body}\n</body></html>\n"
    )


def _figures(output_dir: Path, sections: list[Section]) -> list[tuple[Path, bytes]]:
    """Each figure's file name under `output_dir` and its PNG bytes."""
    return [
        (output_dir / f"fig_{section.key}_{i}.png", png)
        for section in sections
        for i, (_, png) in enumerate(section.figures if not section.note else [])
    ]


def _write(handle: IO[bytes], data: bytes) -> None:
    handle.write(data)


def build_report(ledger: Ledger, output_dir: str | Path) -> ReportResult:
    """Write `report.html` (figures embedded) and its `fig_*.png` files under `output_dir`."""
    check_output_dir(Path(output_dir))  # before the work, not after it
    for existing in [Path(output_dir) / PAGE, *Path(output_dir).glob(FIGURE_GLOB)]:
        if existing.exists() or existing.is_symlink():  # refused before the work, not after it
            check_output(existing, ledger=ledger.path, regular=True)
    sections = [make(ledger) for make in SECTIONS]
    text = page_html(sections, datetime.now(UTC)).encode("utf-8")
    figures = _figures(Path(output_dir), sections)
    page = Path(output_dir) / PAGE
    files = [(path, partial(_write, data=png)) for path, png in figures]
    with output_folder(Path(output_dir)):  # the page and its figures, all or none
        write_outputs([*files, (page, partial(_write, data=text))], ledger=ledger.path)
    written = [path for path, _ in figures]
    for stale in set(Path(output_dir).glob(FIGURE_GLOB)) - set(written):
        stale.unlink(missing_ok=True)
    return ReportResult(page, written, [s.title for s in sections if s.note])


def write_report(home: str | Path | None, output_dir: str | Path | None = None) -> ReportResult:
    """`sieve report`: the report of the ledger of `home` written to `output_dir` (default
    `<home>/report`), the ledger opened read-only."""
    from pipeline.core.home import resolve_home

    folder = output_dir if output_dir is not None else resolve_home(home) / "report"
    with Ledger.open(home, read_only=True) as ledger:
        return build_report(ledger, folder)
