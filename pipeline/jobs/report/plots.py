"""Matplotlib figures for the report, drawn on the Agg canvas and returned as PNG bytes.

Why Figure + FigureCanvasAgg instead of pyplot: no global figure state and no GUI backend, so
building a report works in a headless flow worker and never leaks figures between calls.

Labels that come from data (families, revisions, run ids, reasons) go through `_label`:
matplotlib reads `$...$` in any text as mathtext (a stray `$\\x$` stops the whole report with a
parse error) and warns, on the console, of a control character it has no glyph for.

Test: `.venv/bin/pytest tests/test_report.py -q`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pipeline.core.errors import printable

BINS = [f"{i / 10:.1f}" for i in range(10)]  # run_summary's ten pass-rate bins, by lower edge


def _label(text: str, *, lines: bool = False) -> str:
    """`text` shown as it is: control characters escaped (newlines too, unless `lines`), `$` not
    the start of mathtext."""
    return printable(text, lines=lines).replace("$", r"\$")


def _labels(texts: Sequence[str]) -> list[str]:
    return [_label(t) for t in texts]


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _grid(n: int, cols: int) -> tuple[int, int]:
    cols = max(1, min(cols, n))
    return math.ceil(n / cols), cols


def histograms(panels: Sequence[tuple[str, Sequence[int]]], cols: int = 3) -> bytes:
    """One bar chart of prompts per pass-rate bin for each (title, ten counts) panel."""
    rows, cols = _grid(len(panels), cols)
    fig = _figure(4.0 * cols, 2.6 * rows)
    for i, (title, counts) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.bar(range(10), counts, color="#4c72b0")
        ax.set_xticks(range(10), BINS, fontsize=7)
        ax.set_title(_label(title, lines=True), fontsize=8)  # revision, then run id
        ax.set_xlabel("pass rate (bin start)", fontsize=7)
        ax.set_ylabel("prompts", fontsize=7)
    return to_png(fig)


def heatmap(
    values: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], label: str
) -> bytes:
    """A 0..1 heat map (NaN = not measured) with each cell's value written in it."""
    fig = _figure(2.0 + 1.1 * len(col_labels), 1.2 + 0.32 * len(row_labels))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(col_labels)), _labels(col_labels), rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(row_labels)), _labels(row_labels), fontsize=8)
    for (r, c), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v < 0.6 else "black")  # fmt: skip
    fig.colorbar(image, ax=ax, label=label)
    return to_png(fig)


def stacked_bars(
    labels: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str
) -> bytes:
    """Bars per label, one stacked segment per series (e.g. per stage)."""
    fig = _figure(max(5.0, 0.45 * len(labels) + 2), 3.4)
    ax = fig.add_subplot(1, 1, 1)
    bottom = np.zeros(len(labels))
    for name, counts in series.items():
        ax.bar(range(len(labels)), counts, bottom=bottom, label=_label(name))
        bottom += np.asarray(counts, dtype=float)
    ax.set_xticks(range(len(labels)), _labels(labels), rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return to_png(fig)


def horizontal_bars(labels: Sequence[str], values: Sequence[float], xlabel: str) -> bytes:
    fig = _figure(6.0, 1.0 + 0.35 * len(labels))
    ax = fig.add_subplot(1, 1, 1)
    ax.barh(range(len(labels)), values, color="#c44e52")
    ax.set_yticks(range(len(labels)), _labels(labels), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    return to_png(fig)


Curve = tuple[str, Sequence[float], Sequence[float]]  # (run label, steps, values)


def curves(panels: Sequence[tuple[str, Sequence[Curve]]], cols: int = 3) -> bytes:
    """One line panel per metric, one line per training run."""
    rows, cols = _grid(len(panels), cols)
    fig = _figure(4.0 * cols, 2.8 * rows)
    for i, (title, lines) in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1)
        for label, steps, values in lines:
            ax.plot(steps, values, marker="." if len(steps) < 30 else None, label=_label(label))
        ax.set_title(_label(title), fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        if len(lines) > 1:
            ax.legend(fontsize=6)
    return to_png(fig)
