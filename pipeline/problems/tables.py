"""Parquet files and saved datasets (`datasets`' `save_to_disk` folders) as records, in bounded
memory: every check that can be made before a page is read is made first.

Parquet compresses: a few KB of file held a 200 MB question, a 71 KB file 1.67 GB of text, and
list or struct columns escaped every size check. So, from the file's metadata alone:
1. each read column's type: question and answer text (string, large string, string view or
   dictionary of one) or numbers (integers, float32/64, decimals); a chat column
   `list<struct<role, content>>` (or JSON text); level integers; split and family text; id text or
   integers. Anything else (bool, binary, lists, structs, dates, ...) is one line naming it;
2. the read columns' uncompressed size: at most `Limits.total` in all, and on average at most
   `Limits.cell` a cell in each row group.
Then rows are read in batches of `BATCH_ROWS`, text columns dictionary-encoded (a value that
Parquet's dictionary repeats is not expanded yet); each cell's length is computed from the
dictionary and checked against `Limits.cell`, the text read so far against `Limits.total`, and
only then is the batch expanded, at most `SLICE_BYTES` of text at a time. A saved dataset is
Arrow on disk (memory-mapped, uncompressed): its size is its `nbytes`, then the same batches.

Floats are read as their shortest round-trip text in their own width (a float32 `0.1` is `0.1`,
with one warning line), decimals exactly, trailing zeros dropped.

Test: `.venv/bin/pytest tests/problems/test_ingest_formats.py tests/problems/test_ingest_memory.py
-q`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.errors import SieveError
from pipeline.problems.columns import SPLITS, Columns
from pipeline.problems.readers import Limits, Record, Rows, Warn

BATCH_ROWS = 8192  # rows decoded at a time (still dictionary-encoded)
SLICE_BYTES = 16 << 20  # text expanded into Python at a time, at most (one cell may be more)
_TEXT = "text (a string column) or numbers"
_ALLOWED = {  # role -> (kinds accepted, what to say)
    "question": ({"text", "int", "float", "decimal"}, _TEXT),
    "chat": ({"chat", "text"}, "a chat conversation (list<struct<role, content>>) or JSON text"),
    "answer": ({"text", "int", "float", "decimal"}, _TEXT),
    "level": ({"int"}, "integers"),
    "split": ({"text"}, "text (train or test)"),
    "family": ({"text"}, "text"),
    "id": ({"text", "int"}, "text or integers"),
}


def _kind(kind: pa.DataType) -> str:
    """text, int, float, decimal, chat, or other."""
    if pa.types.is_dictionary(kind):
        return "text" if _kind(kind.value_type) == "text" else "other"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "text"
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_float32(kind) or pa.types.is_float64(kind):
        return "float"
    if pa.types.is_decimal(kind):
        return "decimal"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        turn = kind.value_type
        roles = ("role", "content")
        if pa.types.is_struct(turn) and all(turn.get_field_index(n) >= 0 for n in roles):
            return "chat" if all(_kind(turn.field(n).type) == "text" for n in roles) else "other"
    return "other"


def check_types(schema: pa.Schema, columns: Columns, name: str) -> None:
    """Refuse, in one line, a read column whose type its role does not take (module doc)."""
    roles = {
        columns.question: "chat" if columns.chat else "question",
        columns.answer: "answer",
        **{f: role for role in ("level", "split", "family", "id") if (f := getattr(columns, role))},
    }
    for field, role in roles.items():
        if field not in schema.names:
            available = ", ".join(schema.names) or "none"
            raise SieveError(f"{name}: no column {field!r}; available: {available}")
        kind = schema.field(field).type
        accepted, what = _ALLOWED[role]
        if _kind(kind) not in accepted:
            hint = ""
            if _kind(kind) == "chat" and role == "question":
                hint = f" (a chat conversation: pass --chat-field {field})"
            raise SieveError(
                f"{name}: column {field!r} is {kind}; the {role} column holds {what}{hint}"
            )


def _leaves(kind: pa.DataType) -> int:
    """How many Parquet leaf columns a column of this Arrow type is stored as."""
    if pa.types.is_struct(kind):
        return sum(_leaves(field.type) for field in kind)
    if pa.types.is_map(kind):
        return _leaves(kind.key_type) + _leaves(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaves(kind.value_type)
    return 1


def _leaf_spans(schema: pa.Schema, total: int, name: str) -> dict[str, range]:
    """Leaf column indexes of each top-level column (Parquet stores leaves depth first)."""
    spans, start = {}, 0
    for field in schema:
        count = _leaves(field.type)
        spans[field.name] = range(start, start + count)
        start += count
    if start != total:
        raise SieveError(f"{name}: cannot read Parquet (its schema has an unexpected shape)")
    return spans


def _check_metadata(handle: Any, fields: list[str], limits: Limits, name: str) -> None:
    """The read columns' uncompressed sizes, from the footer, before any page is read."""
    meta = handle.metadata
    spans = _leaf_spans(handle.schema_arrow, meta.num_columns, name)
    total = 0
    for group in range(meta.num_row_groups):
        chunk = meta.row_group(group)
        rows = max(chunk.num_rows, 1)
        for field in fields:
            size = sum(chunk.column(i).total_uncompressed_size for i in spans[field])
            total += size
            if size - (1 << 16) > limits.cell * rows:  # 64 KiB: pages' headers, dictionary
                raise SieveError(
                    f"{name}: column {field!r} holds cells of {(size - (1 << 16)) // rows:,} "
                    f"bytes on average; a cell is at most {limits.cell:,} bytes "
                    "(raise --max-line-bytes)"
                )
    if total > limits.total:
        raise SieveError(
            f"{name}: {total:,} bytes of text in {', '.join(map(repr, fields))} (uncompressed, "
            f"from the file's metadata); an import reads at most {limits.total:,} (split the file)"
        )


def parquet_rows(path: Path, columns: Columns, limits: Limits, warn: Warn) -> Rows:
    """The records of a Parquet file (module doc), each named `NAME row N`."""
    import pyarrow.parquet as pq

    name, fields = path.name, columns.fields()
    try:
        handle = pq.ParquetFile(path)
    except Exception as exc:  # arrow raises several types for unreadable files
        raise SieveError(f"{name}: cannot read Parquet ({type(exc).__name__})") from None
    check_types(handle.schema_arrow, columns, name)
    _check_metadata(handle, fields, limits, name)
    spans = _leaf_spans(handle.schema_arrow, handle.metadata.num_columns, name)
    leaves = [handle.schema.column(i) for f in fields for i in spans[f]]
    encoded = [leaf.path for leaf in leaves if leaf.physical_type == "BYTE_ARRAY"]
    handle = pq.ParquetFile(path, read_dictionary=encoded)

    def batches() -> Iterator[pa.RecordBatch]:
        try:  # a row group at a time: a dictionary (grown by pages past it) restarts with each
            for group in range(handle.metadata.num_row_groups):
                yield from handle.iter_batches(BATCH_ROWS, [group], fields)
        except (OSError, pa.ArrowException) as exc:
            raise SieveError(f"{name}: cannot read Parquet ({type(exc).__name__})") from None

    def where(number: int) -> str:
        return f"{name} row {number}"

    _warn_float32(handle.schema_arrow, columns, handle.metadata.num_rows, name, warn)
    return Rows(_records(batches(), columns, limits, where, name), where)


def dataset_rows(path: Path, columns: Columns, limits: Limits, warn: Warn) -> Rows:
    """The records of a `save_to_disk` folder (a Dataset: `NAME row N`; a DatasetDict:
    `NAME[split] row N`, its train and test splits mapped to Sieve's)."""
    name, fields = path.name, columns.fields()
    parts = _load_dataset(path)
    if any(split is not None for split, _ in parts) and columns.split is not None:
        raise SieveError(
            f"{name}: a saved DatasetDict's splits are the rows' splits; --split-field is for a "
            "split column of one file or Dataset"
        )
    starts: list[int] = []  # the number before each part's first row
    names: list[str] = []
    sources: list[Any] = []
    total = rows = 0
    for split, part in parts:
        label = name if split is None else f"{name}[{split}]"
        check_types(part.data.schema, columns, label)
        selected = part.select_columns(fields)
        total += selected.data.nbytes
        starts.append(rows)
        rows += selected.num_rows
        names.append(label)
        sources.append(selected)
    if total > limits.total:
        raise SieveError(
            f"{name}: {total:,} bytes of text in {', '.join(map(repr, fields))}; an import "
            f"reads at most {limits.total:,} (split the dataset)"
        )

    def locate(number: int) -> int:
        return bisect.bisect_right(starts, number - 1) - 1

    def where(number: int) -> str:
        part = locate(number)
        return f"{names[part]} row {number - starts[part]}"

    def batches() -> Iterator[pa.RecordBatch]:
        for part in sources:
            for table in part.with_format("arrow").iter(batch_size=BATCH_ROWS):
                yield from table.to_batches()

    splits = [split for split, _ in parts]
    split_of = None if splits == [None] else (lambda n: str(splits[locate(n)]))
    for label, part in zip(names, sources, strict=True):
        _warn_float32(part.data.schema, columns, part.num_rows, label, warn)
    return Rows(_records(batches(), columns, limits, where, name), where, split_of)


def _load_dataset(path: Path) -> list[tuple[str | None, Any]]:
    """[(split or None, Dataset)] of a save_to_disk folder; a DatasetDict's splits must be
    train or test (or heldout)."""
    try:
        import datasets
    except ImportError:
        raise SieveError(
            f"{path.name}: a saved dataset folder is read with the `datasets` package "
            "(pip install datasets, or the trl extra)"
        ) from None
    if not any((path / f).is_file() for f in ("dataset_info.json", "dataset_dict.json")):
        raise SieveError(
            f"{path.name}: not a saved dataset (a folder written by Dataset.save_to_disk or "
            "DatasetDict.save_to_disk)"
        )
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises many types for a damaged folder
        raise SieveError(
            f"{path.name}: cannot read the saved dataset ({type(exc).__name__})"
        ) from None
    if not isinstance(loaded, datasets.DatasetDict):
        return [(None, loaded)]
    for split in loaded:
        if split.lower() not in SPLITS:
            raise SieveError(
                f"{path.name}: split {split!r} of the saved DatasetDict is not train or test "
                "(save the splits to import, or import it as a Dataset of its own)"
            )
    return [(str(split), loaded[split]) for split in loaded]


def _warn_float32(schema: pa.Schema, columns: Columns, rows: int, name: str, warn: Warn) -> None:
    for field in dict.fromkeys([columns.question, columns.answer]):
        if rows and pa.types.is_float32(schema.field(field).type):
            warn(
                f"{name}: column {field!r} is float32 (about 7 significant digits); its "
                "values are read as their shortest float32 text — store answers as text or "
                "decimals to keep more"
            )


def _records(
    batches: Iterable[pa.RecordBatch],
    columns: Columns,
    limits: Limits,
    where: Callable[[int], str],
    name: str,
) -> Iterator[Record]:
    """Rows of `batches` as records, each batch's cells checked before it is expanded."""
    fields, number, total = columns.fields(), 0, 0
    for batch in batches:
        sizes = np.zeros(batch.num_rows, dtype=np.int64)
        for field in fields:
            cells = row_bytes(batch.column(field))
            if cells.size and cells.max() > limits.cell:
                big = int(cells.argmax())
                raise SieveError(
                    f"{where(number + big + 1)}: column {field!r} holds a cell of "
                    f"{int(cells[big]):,} bytes; a cell is at most {limits.cell:,} bytes "
                    "(raise --max-line-bytes)"
                )
            sizes += cells
        total += int(sizes.sum())
        if total > limits.total:
            raise SieveError(
                f"{name}: {total:,} bytes of text in {', '.join(map(repr, fields))} up to "
                f"{where(number + batch.num_rows)}; an import reads at most {limits.total:,} "
                "(split the file)"
            )
        for start, stop in _slices(sizes):
            part = batch.slice(start, stop - start)
            values = [_python(part.column(field)) for field in fields]
            for offset, row in enumerate(zip(*values, strict=True)):
                yield number + start + offset + 1, dict(zip(fields, row, strict=True))
        number += batch.num_rows


def _slices(sizes: np.ndarray) -> Iterator[tuple[int, int]]:
    """(start, stop) row ranges of about `SLICE_BYTES` of text each (at least one row)."""
    ends = np.cumsum(sizes)
    start = 0
    while start < len(sizes):
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + SLICE_BYTES, side="right"))
        stop = max(stop, start + 1)
        yield start, stop
        start = stop


def row_bytes(array: pa.Array) -> np.ndarray:
    """Bytes of text in each row of `array` once expanded (dictionaries, lists and structs
    included; numbers count 0), computed without expanding it."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        lengths = _lengths(array.dictionary)
        if not lengths.size:  # no values: every row is null
            return np.zeros(len(array), dtype=np.int64)
        indices = array.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return lengths[indices] * np.asarray(array.is_valid(), dtype=np.int64)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        parents = pc.list_parent_indices(array).to_numpy(zero_copy_only=False)
        child = row_bytes(array.flatten())
        return np.bincount(parents, weights=child, minlength=len(array)).astype(np.int64)
    if pa.types.is_struct(kind):
        parts = [row_bytes(field) for field in array.flatten()]
        return np.asarray(sum(parts, np.zeros(len(array), dtype=np.int64)), dtype=np.int64)
    return _lengths(array)


def _lengths(array: pa.Array) -> np.ndarray:
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pc.binary_length(array).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.zeros(len(array), dtype=np.int64)


def _python(array: pa.Array) -> list[Any]:
    """Python values of a column: floats and decimals as their exact text (module doc)."""
    kind = array.type
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        series = pl.Series(array)
        text = series.cast(pl.Utf8)
        if pa.types.is_decimal(kind):
            text = text.str.replace(r"(\.\d*?)0+$", "$1").str.replace(r"\.$", "")
        return text.to_list()
    if pa.types.is_dictionary(kind):
        array = array.dictionary.take(array.indices)
    if _kind(array.type) in ("text", "int"):
        return pl.Series(array).to_list()  # several times faster than arrow's to_pylist
    return array.to_pylist()
