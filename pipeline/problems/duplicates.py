"""A file's problems gathered in compact chunks, then settled: the same question with the same
answer keeps its first row; the same question with two answers, a problem in two splits and an
id given to two problems are refused in one line naming both rows.

"The same question" is equal `question_key` (pipeline/problems/text.py): a trailing U+200B, a
doubled space or the NFD spelling of a question is the question a user sees. Rows are kept as
polars chunks of `CHUNK_ROWS` (about 250 bytes of memory a short problem, not the ~1.3 KB of
Python objects), and the checks look only at the rows whose question's hash occurs more than
once.

Test: `.venv/bin/pytest tests/problems/test_ingest_text.py tests/problems/test_ingest_memory.py
-q`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.problems.text import question_key

CHUNK_ROWS = 20_000
CHUNK_SCHEMA: dict[str, pl.DataType] = {
    "row": pl.Int64(),  # the line or row number a user sees (`Rows.where` names it)
    "problem_id": pl.Utf8(),
    "family": pl.Utf8(),
    "level": pl.Int32(),
    "params": pl.Utf8(),
    "question": pl.Utf8(),
    "answer": pl.Utf8(),
    "split": pl.Utf8(),
    "id": pl.Utf8(),  # the file's own id, as text (null: none)
}
_IDENT = pl.coalesce("key", "question")  # `key` is null where it equals the question
_SHOWN = {"train": "train", "heldout": "test"}


def clip(text: str, width: int = 40) -> str:
    """`text` for an error message: repr'd, and cut to about `width` characters."""
    return repr(text) if len(text) <= width else repr(text[:width]) + f"... ({len(text):,} chars)"


class Chunks:
    """Rows added one at a time (`add`, values in `CHUNK_SCHEMA` order), kept as frames."""

    def __init__(self) -> None:
        self.frames: list[pl.DataFrame] = []
        self.rows: list[tuple[Any, ...]] = []

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)
        if len(self.rows) >= CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        values = zip(*self.rows, strict=True)
        frame = pl.DataFrame(dict(zip(CHUNK_SCHEMA, map(list, values), strict=True)), CHUNK_SCHEMA)
        self.rows = []
        key = question_key(pl.col("question"))
        frame = frame.with_columns(key=key).with_columns(
            key=pl.when(pl.col("key") != pl.col("question")).then(pl.col("key"))
        )
        self.frames.append(frame)

    def frame(self) -> pl.DataFrame:
        """Every row added, in order, with its `key` column."""
        self._flush()
        if not self.frames:
            return pl.DataFrame(schema={**CHUNK_SCHEMA, "key": pl.Utf8()})
        frame = pl.concat(self.frames, rechunk=False)
        self.frames = []
        return frame


def settle(
    frame: pl.DataFrame, where: Callable[[int], str], *, allow_conflicts: bool, splits_given: bool
) -> pl.DataFrame:
    """`frame` (from `Chunks.frame`) without duplicate problems, after the refusals of the
    module doc (conflicts only unless `allow_conflicts`; split clashes when the file gave the
    splits, `splits_given`: a hash-fixed split is the first row's)."""
    # rows whose question's hash occurs again (a superset: the groups below compare the text)
    shared = frame.filter(_IDENT.hash(seed=0).is_duplicated()).with_columns(ident=_IDENT)
    if not allow_conflicts:
        _refuse_conflicts(shared, where)
    if splits_given:
        _refuse_split_clashes(shared, where)
    if frame["id"].null_count() < frame.height:
        _refuse_shared_ids(frame.filter(pl.col("id").hash(seed=0).is_duplicated()), where)
    repeated = shared.filter(~pl.struct("ident", "answer").is_first_distinct())["row"]
    return frame.filter(~pl.col("row").is_in(repeated.implode())) if len(repeated) else frame


def _firsts(frame: pl.DataFrame, by: list[str], *columns: str) -> pl.DataFrame:
    """`frame` with `first_<c>`: each column's value on the first row of its `by` group."""
    return frame.with_columns(pl.col(c).first().over(by).alias(f"first_{c}") for c in columns)


def _refuse_conflicts(shared: pl.DataFrame, where: Callable[[int], str]) -> None:
    firsts = _firsts(shared, ["ident"], "answer", "row", "question")
    clashes = firsts.filter(pl.col("answer") != pl.col("first_answer"))
    if clashes.is_empty():
        return
    row = clashes.row(0, named=True)
    written = (
        "" if row["question"] == row["first_question"]
        else " (written differently: spacing, invisible characters or Unicode form)"
    )  # fmt: skip
    raise SieveError(
        f"{where(row['row'])}: same question as {where(row['first_row'])}{written} with a "
        f"different answer ({clip(row['answer'])} here, {clip(row['first_answer'])} there); "
        f"{clashes['ident'].n_unique()} question(s) with conflicting answers in all; fix the "
        "file, or pass --allow-conflicts to keep them all"
    )


def _refuse_split_clashes(shared: pl.DataFrame, where: Callable[[int], str]) -> None:
    firsts = _firsts(shared, ["ident", "answer"], "split", "row")
    clashes = firsts.filter(pl.col("split") != pl.col("first_split"))
    if clashes.is_empty():
        return
    row = clashes.row(0, named=True)
    raise SieveError(
        f"{where(row['row'])}: same problem as {where(row['first_row'])}, which is in "
        f"{_SHOWN[row['first_split']]}; here it is in {_SHOWN[row['split']]} (a problem is in "
        "one split: drop one of them)"
    )


def _refuse_shared_ids(ids: pl.DataFrame, where: Callable[[int], str]) -> None:
    firsts = _firsts(ids.with_columns(ident=_IDENT), ["id"], "ident", "answer", "row")
    clashes = firsts.filter(
        (pl.col("ident") != pl.col("first_ident")) | (pl.col("answer") != pl.col("first_answer"))
    )
    if clashes.is_empty():
        return
    row = clashes.row(0, named=True)
    raise SieveError(
        f"{where(row['row'])}: id {clip(row['id'])} is also the id of {where(row['first_row'])}, "
        "a different problem; an id names one problem"
    )
