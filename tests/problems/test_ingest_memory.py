"""Ingest in bounded memory: Parquet columns are judged on their type and their uncompressed
sizes from the file's metadata before any page is read, cells before they are expanded, and
rows stream in batches into compact chunks, so millions of short problems fit under an
address-space cap that the same reader without chunks exceeds.

The cap tests run `read_external` / `ingest_file` in a child process under
`resource.setrlimit(RLIMIT_AS)`. The child first ingests a small file (imports, thread pools,
allocator arenas), then caps its address space at what it has mapped plus a budget, so the cap
measures the rows and not the libraries. `MALLOC_ARENA_MAX=2` and `ARROW_DEFAULT_MEMORY_POOL=
system` keep glibc's per-thread arenas (64 MB of address space each) and mimalloc's 1 GiB
reservation out of the count. `test_five_million_problems_under_4_gib` is opt-in (`-m slow`,
about 3 minutes on 2 busy cores).

Run: `.venv/bin/pytest tests/problems/test_ingest_memory.py -q` (add `-m slow` for the 5 M one).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline.problems.ingest
from pipeline.core.errors import SieveError
from pipeline.problems.columns import Columns
from pipeline.problems.ingest import read_external

ROOT = Path(__file__).parents[2]


def one_line(info: pytest.ExceptionInfo[SieveError]) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


@pytest.fixture
def no_page_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any read of a Parquet page fails the test: a refusal must come from the metadata."""

    def forbidden(*_: Any, **__: Any) -> Any:
        raise AssertionError("a Parquet page was read")

    for name in ("iter_batches", "read", "read_row_group", "read_row_groups"):
        monkeypatch.setattr(pq.ParquetFile, name, forbidden)


# ---- every Parquet type for the question column: ingested, or one clear line ------------------

TEXT = ["What is 1+1?", "What is 2+2?"]
TYPES: dict[str, tuple[pa.Array, str | list[str]]] = {
    "int32": (pa.array([11, 12], pa.int32()), ["11", "12"]),
    "int64": (pa.array([11, 12], pa.int64()), ["11", "12"]),
    "uint8": (pa.array([11, 12], pa.uint8()), ["11", "12"]),
    "float": (pa.array([1.5, 2.25], pa.float32()), ["1.5", "2.25"]),
    "double": (pa.array([0.1, 2.5], pa.float64()), ["0.1", "2.5"]),
    "decimal": (pa.array([1, 2], pa.decimal128(10, 2)), ["1", "2"]),
    "string": (pa.array(TEXT), TEXT),
    "large_string": (pa.array(TEXT, pa.large_string()), TEXT),
    "string_view": (pa.array(TEXT, pa.string_view()), TEXT),
    "dictionary string": (pa.array(TEXT).dictionary_encode(), TEXT),
    "bool": (pa.array([True, False]), "is bool; the question column holds text"),
    "binary": (pa.array([b"a", b"b"]), "is binary; the question column holds text"),
    "fixed-size binary": (
        pa.array([b"ab", b"cd"], pa.binary(2)),
        "is fixed_size_binary[2]; the question column holds text",
    ),
    "date": (pa.array([1, 2], pa.date32()), "is date32[day]; the question column holds text"),
    "null": (pa.array([None, None], pa.null()), "is null; the question column holds text"),
    "list<string>": (pa.array([["a"], ["b"]]), "is list<element: string>; the question column"),
    "struct": (
        pa.array([{"a": "x"}, {"a": "y"}]),
        "is struct<a: string>; the question column holds text",
    ),
    "map": (
        pa.array([[("a", "x")], [("b", "y")]], pa.map_(pa.string(), pa.string())),
        "is map<string, string ('question')>; the question column holds text",
    ),
    "list<struct<role, content>>": (
        pa.array([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]]),
        "(a chat conversation: pass --chat-field question)",
    ),
}


@pytest.mark.parametrize("kind", sorted(k for k, (_, e) in TYPES.items() if isinstance(e, str)))
def test_each_other_parquet_type_is_one_line_from_the_schema(
    tmp_path: Path, kind: str, no_page_reads: None
) -> None:
    column, expected = TYPES[kind]
    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"question": column, "answer": ["1", "2"]}), path)
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line(info)
    assert message.startswith("set.parquet: column 'question' ") and str(expected) in message


@pytest.mark.parametrize("kind", sorted(k for k, (_, e) in TYPES.items() if isinstance(e, list)))
def test_each_text_or_number_type_is_ingested(tmp_path: Path, kind: str) -> None:
    column, expected = TYPES[kind]
    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"question": column, "answer": column}), path)
    frame = read_external(path, warn=lambda _: None)
    assert frame["question"].to_list() == expected == frame["answer"].to_list()


@pytest.mark.parametrize(
    ("role", "column", "message"),
    [
        ("level", pa.array(["1", "2"]), "column 'c' is string; the level column holds integers"),
        (
            "split",
            pa.array([1, 2]),
            "column 'c' is int64; the split column holds text (train or test)",
        ),
        ("family", pa.array([True, False]), "column 'c' is bool; the family column holds text"),
        ("id", pa.array([1.5, 2.5]), "column 'c' is double; the id column holds text or integers"),
    ],
)
def test_the_other_roles_are_typed_too(
    tmp_path: Path, role: str, column: pa.Array, message: str, no_page_reads: None
) -> None:
    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"question": TEXT, "answer": ["1", "2"], "c": column}), path)
    with pytest.raises(SieveError) as info:
        read_external(path, Columns(**{role: "c"}))
    assert one_line(info) == f"set.parquet: {message}"


# ---- sizes from the metadata, before a page is read ------------------------------------------


def test_compressed_text_past_the_total_is_refused_from_the_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_page_reads: None
) -> None:
    """71 KB of zstd held 1.67 GB of text, which was decompressed before the total was checked;
    here 3 MiB of text in a few KB, against a total lowered to 2 MiB."""
    monkeypatch.setattr(pipeline.problems.ingest, "MAX_PARQUET_TEXT", 2 << 20)
    rows = 3 << 10
    questions = [f"{i:08d}" + "y" * 1016 for i in range(rows)]  # distinct: no dictionary
    path = tmp_path / "z.parquet"
    pq.write_table(
        pa.table({"question": questions, "answer": ["1"] * rows}),
        path,
        compression="zstd",
        use_dictionary=False,
    )
    assert path.stat().st_size < 200_000
    with pytest.raises(SieveError) as info:
        read_external(path)
    message = one_line(info)
    assert (
        message.startswith("z.parquet: ") and "(uncompressed, from the file's metadata)" in message
    )


@pytest.mark.parametrize("kind", ["list<string>", "struct", "chat"])
def test_a_nested_column_is_sized_too(
    tmp_path: Path, kind: str, no_page_reads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list or struct question column escaped every size check (a 10 KB file took 1.4 GB);
    nested columns are typed and their leaves' sizes counted."""
    monkeypatch.setattr(pipeline.problems.ingest, "MAX_PARQUET_TEXT", 1 << 20)
    big = "z" * 2000
    column = {
        "list<string>": pa.array([[big] * 300] * 2),
        "struct": pa.array([{"a": big * 300, "b": "x"}] * 2),
        "chat": pa.array([[{"role": "user", "content": f"{i}" + big * 300}] for i in range(2)]),
    }[kind]
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"question": column, "answer": ["1", "2"]}), path, use_dictionary=False)
    with pytest.raises(SieveError) as info:
        read_external(path, Columns(chat=kind == "chat"))
    message = one_line(info)
    expected = "bytes of text in 'question', 'answer'" if kind == "chat" else "the question column"
    assert message.startswith("n.parquet: ") and expected in message


def test_a_big_chat_cell_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    turns = [[{"role": "user", "content": "short"}], [{"role": "user", "content": "y" * 5000}]]
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": turns, "answer": ["1", "2"]}), path)
    with pytest.raises(SieveError) as info:
        read_external(path, Columns("messages", chat=True), max_line_bytes=4096)
    assert one_line(info).startswith(
        "c.parquet row 2: column 'messages' holds a cell of 5,004 bytes; a cell is at most 4,096"
    )


def test_a_repeated_value_is_checked_on_its_dictionary(tmp_path: Path) -> None:
    """One 600 KB question repeated 2,000 times is 1.2 GB of text once expanded and a few KB on
    disk: each cell is checked from the dictionary, and the total before the batch expands."""
    path = tmp_path / "d.parquet"
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), ["q" * 600_000])
    table = pa.table({"question": repeated, "answer": ["1"] * 2000})
    pq.write_table(table, path, compression="zstd")
    assert path.stat().st_size < 100_000
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert "bytes of text in 'question', 'answer' up to d.parquet row 2000" in one_line(info)
    with pytest.raises(SieveError) as info:
        read_external(path, max_line_bytes=1000)
    assert one_line(info).startswith("d.parquet row 1: column 'question' holds a cell of 600,000")


# ---- millions of rows: chunks, under an address-space cap -------------------------------------

CHILD = textwrap.dedent(
    """
    import resource, sys, tempfile
    from pathlib import Path
    import pipeline.problems.duplicates as duplicates
    from pipeline.jobs.data.intake import ingest_file
    from pipeline.problems.ingest import read_external

    path, budget, whole, chunk_rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    duplicates.CHUNK_ROWS = chunk_rows or duplicates.CHUNK_ROWS  # 0: the product's own

    def mapped():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize"):
                return int(line.split()[1]) << 10

    ingest_file(Path(tempfile.mkdtemp()), Path(sys.argv[5]))  # warm: imports, pools, arenas
    home = Path(tempfile.mkdtemp())
    cap = budget if whole == "absolute" else mapped() + budget
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        if whole == "read":
            print("rows", read_external(path).height)
        else:
            print("rows", ingest_file(home, Path(path)).new)
    except MemoryError:
        print("MemoryError")
    """
)


def short_problems(path: Path, rows: int) -> Path:
    """`rows` distinct short problems, answers 0-999 (GSM8K-sized questions are longer)."""
    i = pl.int_range(rows)
    frame = pl.select(
        question=pl.format("What is {} plus {}?", i, i % 97), answer=(i % 1000).cast(pl.Utf8)
    )
    frame.write_parquet(path)
    return path


def run_capped(path: Path, budget: int, mode: str, chunk_rows: int, tmp_path: Path) -> str:
    warm = short_problems(tmp_path / "warm.parquet", 1000)
    env = {**os.environ, "MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}
    argv = [sys.executable, "-c", CHILD, str(path), str(budget), mode, str(chunk_rows), str(warm)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    lines = done.stdout.split()
    return (
        " ".join(lines) if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-300:]}"
    )


def test_rows_stream_into_chunks_under_a_cap_the_unchunked_reader_exceeds(tmp_path: Path) -> None:
    """600,000 short problems read with 300 MiB of address space to spare: in chunks (the
    product: about 190 MiB of it on this machine) they fit; the same reader keeping every row
    as Python objects until the end, as it did before (about 450 MiB), runs out."""
    path = short_problems(tmp_path / "many.parquet", 600_000)
    budget = 300 << 20
    assert run_capped(path, budget, "read", 0, tmp_path) == "rows 600000"
    unchunked = run_capped(path, budget, "read", 10**9, tmp_path)
    assert unchunked == "MemoryError" or "memory allocation" in unchunked, unchunked


@pytest.mark.slow
def test_five_million_problems_under_4_gib(tmp_path: Path) -> None:
    """`sieve ingest`'s job (read, checks, ledger write) of 5,000,000 short problems in a
    process whose whole address space is capped at 4 GiB."""
    path = short_problems(tmp_path / "five.parquet", 5_000_000)
    assert run_capped(path, 4 << 30, "absolute", 0, tmp_path) == "rows 5000000"
