"""Tables that fit an 80-column terminal (issue 34 point 5).

`sieve demo` / `sieve train` / `sieve loop` print held-out pass@1 before → after by family ×
level. At 80 columns the full table (10 columns) folds every header into fragments; `show`
prints it folded instead (`common.fitted`: one `before → after` column per measure), and
`sieve --wide` keeps every column. Rendered on a recording console of width 80: every header
and every cell is whole on one line, and a control rendering of the full table shows the split
headers the fold avoids.

Test: `.venv/bin/pytest tests/cli/test_fit.py -q`.
"""

from __future__ import annotations

import io
import re

import polars as pl
import pytest

from flows.cli import common
from flows.cli.summary import before_after


def summary() -> dict[str, object]:
    cells = [("arith", 1), ("arith", 2), ("linear", 3), ("modular", 2), ("word", 4)]
    rows = lambda shift: [  # noqa: E731
        {
            "family": f,
            "level": lv,
            "problems": 80,
            "greedy": 0.0125 + shift * lv,
            "sampled": 0.03125 + shift,
            "errors": 0,
        }
        for f, lv in cells
    ]
    return {"before": rows(0.0), "after": rows(0.0125)}


def render(monkeypatch: pytest.MonkeyPatch, width: int, frame: pl.DataFrame) -> list[str]:
    screen = common.console(width=width, file=io.StringIO(), record=True)
    monkeypatch.setattr(common, "out", screen)
    common.show(frame, "held-out pass@1 before -> after")
    return screen.export_text().splitlines()


def header_words(lines: list[str]) -> set[str]:
    """Words in the table's rows (between the vertical bars), line by line."""
    return {w for line in lines for cell in re.split(r"[│┃]", line) for w in cell.split()}


def test_before_after_fits_80_columns_with_whole_headers_and_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(common.WIDE_ENV, raising=False)
    frame = before_after(summary())
    lines = render(monkeypatch, 80, frame)
    assert max(len(line) for line in lines) <= 80
    words = header_words(lines)
    assert {"family", "level", "n", "greedy", "sampled", "gain"} <= words
    text = "\n".join(lines)
    assert "0.01250 → 0.02500" not in text  # cells as `table` shows floats: 4 significant digits
    assert "0.0125 → 0.025" in text and "0.03125 → 0.04375" in text
    assert "errors" not in words  # no verifier errors: the column is left out


def test_the_full_table_would_split_headers_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control: without the fold the same frame's headers do not survive 80 columns."""
    frame = before_after(summary())
    monkeypatch.setenv(common.WIDE_ENV, "1")
    words = header_words(render(monkeypatch, 80, frame))
    full = {"greedy_before", "sampled_before", "greedy_after", "sampled_after", "sampled_gain"}
    assert not full <= words


def test_wide_keeps_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = before_after(summary())
    monkeypatch.setenv(common.WIDE_ENV, "1")
    words = header_words(render(monkeypatch, 400, frame))
    assert set(frame.columns) <= words


def test_errors_are_kept_when_there_are_some() -> None:
    data = summary()
    data["after"][0]["errors"] = 2  # type: ignore[index]
    folded = common.fitted(before_after(data))
    assert folded.columns == ["family", "level", "n", "greedy", "sampled", "errors", "gain"]
    assert folded["errors"][0] == "0 → 2"


def test_a_table_without_pairs_is_left_alone() -> None:
    frame = pl.DataFrame({"a": [1], "b": ["x"]})
    assert common.fitted(frame) is frame


def test_the_fold_is_chosen_by_the_tables_natural_width() -> None:
    """Rich's own measure of the table, unclamped, against the console width."""
    frame = before_after(summary())
    assert common.natural_width(common.table(frame)) > 80
    assert common.natural_width(common.table(common.fitted(frame))) <= 80
