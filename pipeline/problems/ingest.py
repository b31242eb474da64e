"""Import external problem files (`.jsonl` or `.parquet`) into a problem frame.

GSM8K-style answers (a worked solution ending `#### 42`) are recognised: the answer becomes the
text after the last `####` with thousands separators removed, and the full solution is kept in
params as `solution`. Any bad record raises `SieveError` naming the file and line (or row), and
nothing is returned, so a caller imports all of a file or none of it.

What is refused, with the reason:
- JSONL is split on `\\n` only (read as bytes, never `str.splitlines`, which also breaks at U+2028,
  U+0085 or a form feed inside a string); a line over `max_line_bytes` (default 1 MiB) is refused
  without reading the rest of it; raw control characters inside strings are tolerated. A Parquet
  question or answer cell over `max_line_bytes` is refused too, before it is expanded, and so is
  more than `MAX_PARQUET_TEXT` (1 GiB) of their text in all (Parquet compresses: a 7.5 KB file
  held a 200 MB question).
- An answer that is NaN or infinite (JSON `NaN`, `Infinity`, `1e999`, or the text `nan`/`inf`):
  no verifier ever scores it correct. An answer over `MAX_ANSWER_CHARS` (1,000) characters: a
  final answer is short (the longest MATH answers are a few hundred characters of LaTeX); longer
  text is a solution in the wrong field, and the cap also keeps digit strings far below Python's
  4,300-digit `int()` limit.
- A numeric answer that underflows: a nonzero number such as `1e-999` that a float reads as 0
  (a verifier comparing numbers would then pay `0`).
- A math gold the verifier cannot read within its deadline (say 400 nested parentheses): every
  later verdict on it would be a timeout. Each distinct math gold is judged against itself in its
  boxed form (`verify_batch`, numbers on the fast path); a timeout refuses the file, a gold that
  is not accepted against itself is kept with one warning line (no completion can be paid for it).
  A gold that is not a plain number and that the fast path pays against itself (equal text) is
  also judged by math-verify against a wrong answer (`0`): every other completion reaches
  math-verify, and `{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}` passed the self-check, then timed out on
  each of them.
- A gold holding a control character other than a tab or line break (`"4\\x00"`) or an invisible
  format character (`"\\u200b"`, U+FEFF, ...), and a question or answer with no visible character.
- Text that is not valid Unicode (a lone surrogate such as JSON `"\\ud800"`), a level outside
  32 bits.

Numbers are kept exactly as written: JSON numbers are read as their literal text
(`3.14159265358979323846`, `123456789012345678901234567890.5` and `1e-7` stay as they are), Parquet
decimals as their exact value, Parquet floats as their shortest round-trip text in their own
width (a float32 `0.1` is `0.1`, not `0.10000000149011612`, with one warning line that a float32
column holds only about 7 significant digits). An input with no records imports nothing and
says so in one warning line.
- The same question with two different answers (after the `####` split), unless
  `allow_conflicts`; the same question with the same answer is a duplicate and keeps its first
  occurrence. `sieve ingest` also refuses a question the ledger already holds with another
  answer (`check_stored_conflicts`), unless `allow_conflicts`.

Test: `.venv/bin/pytest tests/problems/test_ingest.py -q`.
"""

from __future__ import annotations

import codecs
import decimal
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.problems.base import Row, build_frame, check_heldout_pct, make_row, params_json
from pipeline.scoring import verify_batch
from pipeline.scoring.commit import fold
from pipeline.scoring.depth import MAX_DEPTH, peel, too_deep
from pipeline.scoring.numeric import gold_number, is_non_finite
from pipeline.scoring.units import apply_scale
from pipeline.scoring.verifiers import math_verify_gold
from pipeline.scoring.worker import WorkerError, math_verify_equivalent, resolve_timeout

GSM_MARK = "####"
MAX_LINE_BYTES = 1 << 20  # default limit on one JSONL line (1 MiB)
MAX_ANSWER_CHARS = 1000  # longest final answer accepted (see the module docstring)
_INT32 = (-(2**31), 2**31 - 1)  # the ledger's `level` column is INTEGER
_INT_DIGITS = 4300  # Python's default limit for int() on a string of digits
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_FLOATS = (pl.Float32, pl.Float64)

Warn = Callable[[str], None]

# (where, record): `where` is "data.jsonl:17" or "data.parquet row 17", for error messages.
Record = tuple[str, dict[str, Any]]


def split_gsm_answer(text: str) -> tuple[str, str | None]:
    """(canonical answer, full solution or None) for an answer that may end in `#### 42`."""
    if GSM_MARK not in text:
        return text.strip(), None
    final = text.rsplit(GSM_MARK, 1)[1].strip()
    if _THOUSANDS.fullmatch(final):
        final = final.replace(",", "")
    return final, text


class _BigInt(str):
    """A JSON integer too long for `int()`, kept as its digits (only a problem if it is used)."""


class _JsonNumber(str):
    """A JSON number with a fraction or exponent, kept as the literal text of the file."""


def _parse_int(digits: str) -> int | str:
    return int(digits) if len(digits) <= _INT_DIGITS else _BigInt(digits)


def _as_float(text: str) -> float | None:
    """The float a plain number reads as (`1e-999` -> 0.0, `1e999` -> inf); None for other text."""
    if len(text) > 400 or _NUMBER.fullmatch(text) is None:
        return None
    return float(text)


def _underflows(text: str) -> bool:
    """True for a plain number that is not zero but that a float reads as 0 (`1e-999`)."""
    return _as_float(text) == 0.0 and decimal.Decimal(text) != 0


def _json_record(raw: bytes, where: str) -> dict[str, Any]:
    """One JSONL line as a JSON object; `SieveError` naming `where` otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SieveError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        record = json.loads(text, strict=False, parse_int=_parse_int, parse_float=_JsonNumber)
    except json.JSONDecodeError as exc:
        raise SieveError(f"{where}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise SieveError(f"{where}: invalid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise SieveError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def _jsonl_records(path: Path, max_line_bytes: int) -> Iterator[Record]:
    """Records of a JSONL file, split on `\\n` only; a line over `max_line_bytes` is refused."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise SieveError(f"{path.name}: cannot read ({exc.strerror})") from None
    with f:
        number = 0
        while raw := f.readline(max_line_bytes + 1):  # never more than one limit's worth
            number += 1
            where = f"{path.name}:{number}"
            if len(raw.removesuffix(b"\n")) > max_line_bytes:
                raise SieveError(
                    f"{where}: line longer than {max_line_bytes:,} bytes (raise --max-line-bytes)"
                )
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if raw.strip():
                yield where, _json_record(raw, where)


MAX_PARQUET_TEXT = 1 << 30  # decoded text of the read columns, all cells together (1 GiB)


def _parquet_records(
    path: Path, fields: list[str], max_cell_bytes: int, warn: Warn
) -> Iterator[Record]:
    frame = _parquet_frame(path, fields, max_cell_bytes)
    text_fields = [f for f in dict.fromkeys(fields[:2]) if _numeric_column(frame, f)]
    for field in text_fields:
        if frame.schema[field] == pl.Float32 and frame.height:
            warn(
                f"{path.name}: column {field!r} is float32 (about 7 significant digits); its "
                "values are read as their shortest float32 text — store answers as text or "
                "decimals to keep more"
            )
    frame = frame.select(fields).with_columns(_exact_text(frame, f) for f in text_fields)
    for number, record in enumerate(frame.iter_rows(named=True), start=1):
        yield f"{path.name} row {number}", record


def _parquet_frame(path: Path, fields: list[str], max_cell_bytes: int) -> pl.DataFrame:
    """The `fields` columns of a Parquet file, each text cell at most `max_cell_bytes` (as a JSONL
    line) and all of them together at most `MAX_PARQUET_TEXT`: Parquet compresses, so a few KB
    of file can hold a 200 MB cell, or one cell repeated a million times by its dictionary. The
    column chunks' uncompressed sizes are checked before anything is decompressed, then text
    columns are read dictionary-encoded and their lengths checked before they are expanded."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
    except Exception as exc:  # arrow raises several types for unreadable files
        raise SieveError(f"{path.name}: cannot read Parquet ({type(exc).__name__})") from None
    names = handle.schema_arrow.names
    for field in fields:
        if field not in names:
            available = ", ".join(names) or "none"
            raise SieveError(f"{path.name}: no column {field!r}; available: {available}")
    columns = list(dict.fromkeys(fields))
    meta = handle.metadata

    def too_big(field: str, size: int, average: bool = False) -> SieveError:
        cells = "cells of" if average else "a cell of"
        return SieveError(
            f"{path.name}: column {field!r} holds {cells} {size:,} bytes"
            + (" on average" if average else "")
            + f"; a cell is at most {max_cell_bytes:,} bytes (raise --max-line-bytes)"
        )

    for group in range(meta.num_row_groups):  # before decompressing: the average cell
        rows = meta.row_group(group)
        count = max(rows.num_rows, 1)
        for index in range(rows.num_columns):
            chunk = rows.column(index)
            size = chunk.total_uncompressed_size - (1 << 16)  # pages' headers, dictionary
            if chunk.path_in_schema in columns and size > max_cell_bytes * count:
                raise too_big(chunk.path_in_schema, size // count, average=True)

    def textual(kind: pa.DataType) -> bool:
        if pa.types.is_dictionary(kind):
            return textual(kind.value_type)
        return any(f(kind) for f in (pa.types.is_string, pa.types.is_large_string,
                                     pa.types.is_binary, pa.types.is_large_binary))  # fmt: skip

    text = [f for f in columns if textual(handle.schema_arrow.field(f).type)]
    try:
        table = handle.read(columns=columns) if not text else pq.read_table(
            path, columns=columns, read_dictionary=text
        )  # fmt: skip
    except Exception as exc:
        raise SieveError(f"{path.name}: cannot read Parquet ({type(exc).__name__})") from None
    total = 0
    for field in text:
        for chunk in table.column(field).chunks:
            lengths = pc.binary_length(chunk.dictionary)
            longest = pc.max(lengths).as_py() or 0
            if longest > max_cell_bytes:
                raise too_big(field, longest)
            total += pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
    if total > MAX_PARQUET_TEXT:
        raise SieveError(
            f"{path.name}: {total:,} bytes of text in {', '.join(map(repr, text))}; an import "
            f"reads at most {MAX_PARQUET_TEXT:,} (split the file)"
        )
    for field in text:
        kind = table.schema.field(field).type.value_type
        table = table.set_column(
            table.schema.get_field_index(field), field, table.column(field).cast(kind)
        )
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _numeric_column(frame: pl.DataFrame, field: str) -> bool:
    dtype = frame.schema[field]
    return dtype in _FLOATS or isinstance(dtype, pl.Decimal)


def _exact_text(frame: pl.DataFrame, field: str) -> pl.Expr:
    """A float or decimal column as text: floats by their shortest round-trip text in their own
    width (polars formats a float32 as float32), decimals exactly, trailing zeros dropped."""
    text = pl.col(field).cast(pl.Utf8)
    if isinstance(frame.schema[field], pl.Decimal):
        text = text.str.replace(r"(\.\d*?)0+$", "$1").str.replace(r"\.$", "")
    return text


def _clip(text: str, width: int = 40) -> str:
    """`text` for an error message: repr'd, and cut to about `width` characters."""
    return repr(text) if len(text) <= width else repr(text[:width]) + f"... ({len(text):,} chars)"


def _check_unicode(text: str, what: str, where: str) -> None:
    """Refuse text that cannot be stored as UTF-8 (a lone surrogate such as JSON "\\ud800")."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        raise SieveError(
            f"{where}: {what} holds a lone surrogate (U+{code:04X}) at character {exc.start}; "
            "it is not valid Unicode text"
        ) from None


def _text_field(record: dict[str, Any], field: str, where: str) -> str:
    """A required non-empty text field; finite numbers (not booleans) are accepted as their text."""
    if field not in record:
        raise SieveError(f"{where}: missing field {field!r}")
    value = record[field]
    if isinstance(value, bool) or (value is not None and not isinstance(value, str | int | float)):
        raise SieveError(f"{where}: field {field!r} must be text or a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise SieveError(f"{where}: field {field!r} is {value}, not a finite number")
    text = "" if value is None else str(value).strip()
    if not text:
        raise SieveError(f"{where}: empty {field!r}")
    _check_unicode(text, f"field {field!r}", where)
    if all(_invisible(c) for c in text):
        shown = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(text))
        raise SieveError(f"{where}: field {field!r} has no visible character (only {shown})")
    return text


def _invisible(char: str) -> bool:
    """Whitespace, a control character or a format character (U+200B, U+FEFF, ...)."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf")


def _check_gold_text(answer: str, where: str) -> None:
    """Refuse a gold holding a control character other than a tab or line break (`"4\\x00"`) or
    an invisible format character (`"4\\u200b"`): no completion writes it, so no answer is paid
    or the comparison rests on a character nobody sees."""
    for i, char in enumerate(answer):
        kind = unicodedata.category(char)
        if (kind == "Cc" and char not in "\t\n\r") or kind == "Cf":
            what = "a control character" if kind == "Cc" else "an invisible format character"
            raise SieveError(
                f"{where}: answer {_clip(answer)} holds {what} (U+{ord(char):04X}) at character "
                f"{i}; a gold answer is visible text"
            )


def _answer(record: dict[str, Any], field: str, where: str) -> tuple[str, str | None]:
    """(final answer, full solution or None) of a record, refused when it cannot be a gold."""
    answer, solution = split_gsm_answer(_text_field(record, field, where))
    if not answer:
        raise SieveError(f"{where}: empty answer after {GSM_MARK!r}")
    _check_gold_text(answer, where)
    if len(answer) > MAX_ANSWER_CHARS:
        raise SieveError(
            f"{where}: answer is {len(answer):,} characters long; at most {MAX_ANSWER_CHARS:,} "
            f"(a final answer, not a solution: end a worked solution with '{GSM_MARK} answer')"
        )
    if is_non_finite(answer):
        raise SieveError(f"{where}: answer {_clip(answer)} is not a finite number")
    if _overflows(answer):
        raise SieveError(
            f"{where}: answer {_clip(answer)} is not a finite number (a float reads it as inf)"
        )
    if _underflows(answer):
        raise SieveError(
            f"{where}: answer {_clip(answer)} underflows (a float reads it as 0); "
            "write it as text the verifier can compare, or round it"
        )
    return answer, solution


def _overflows(text: str) -> bool:
    """True for a plain number too large for a float (`1e999`), which reads as infinity."""
    value = _as_float(text)
    return value is not None and math.isinf(value)


def _level(record: dict[str, Any], field: str | None, where: str) -> int:
    if field is None:
        return 0
    if field not in record:
        raise SieveError(f"{where}: missing field {field!r}")
    value = record[field]
    low, high = _INT32
    if isinstance(value, _BigInt) or (isinstance(value, int) and not low <= value <= high):
        raise SieveError(f"{where}: level field {field!r} is out of range ({low} to {high})")
    if isinstance(value, bool) or not isinstance(value, int):
        shown = _clip(value) if isinstance(value, str) else repr(value)
        raise SieveError(f"{where}: level field {field!r} must be an integer, got {shown}")
    return value


def _records(path: Path, fields: list[str], max_line_bytes: int, warn: Warn) -> Iterator[Record]:
    if not path.is_file():
        raise SieveError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_records(path, max_line_bytes)
    if suffix == ".parquet":
        return _parquet_records(path, fields, max_line_bytes, warn)
    raise SieveError(f"{path.name}: unsupported file type {suffix!r}; use .jsonl or .parquet")


class _Conflicts:
    """Questions seen with more than one answer: where each was first seen, and the clashes."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[str, str]] = {}  # question -> (answer, where)
        self.clashes: dict[str, tuple[str, str, str, str]] = {}  # question -> first clash

    def add(self, question: str, answer: str, where: str) -> None:
        seen = self.first.setdefault(question, (answer, where))
        if seen[0] != answer and question not in self.clashes:
            self.clashes[question] = (where, seen[1], answer, seen[0])

    def check(self) -> None:
        """Raise `SieveError` describing the first clash and how many questions clash."""
        if not self.clashes:
            return
        where, first_where, answer, first_answer = next(iter(self.clashes.values()))
        n = len(self.clashes)
        raise SieveError(
            f"{where}: same question as {first_where} with a different answer "
            f"({_clip(answer)} here, {_clip(first_answer)} there); {n} question(s) with "
            "conflicting answers in all; fix the file, or pass --allow-conflicts to keep them all"
        )


def read_external(
    path: str | Path,
    question_field: str = "question",
    answer_field: str = "answer",
    *,
    family: str = "external",
    level_field: str | None = None,
    source: str | None = None,
    heldout_pct: float = 10.0,
    verifier: str = "math",
    allow_conflicts: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    warn: Warn | None = None,
) -> pl.DataFrame:
    """Problems from a `.jsonl` or `.parquet` file as a `PROBLEM_SCHEMA` frame.

    Duplicates (same question, answer and verifier) keep their first occurrence. Raises
    `SieveError` on any bad record, naming the file and line, so nothing is imported from a
    partly bad file; also on a question given two different answers unless `allow_conflicts`
    (then every answer is kept, each as its own problem; `conflicting_questions` counts them).
    `warn` receives one line per warning (float32 columns, an empty input, golds the verifier
    does not accept against themselves); by default they are dropped.
    """
    warn = warn if warn is not None else (lambda _line: None)
    check_heldout_pct(heldout_pct)
    if max_line_bytes < 1:
        raise SieveError(
            f"--max-line-bytes must be a positive number of bytes, got {max_line_bytes}"
        )
    file = Path(path)
    label = source if source is not None else f"file:{file.name}"
    _check_unicode(label, "the source label", file.name)
    _check_unicode(family, "the family name", file.name)
    fields = [question_field, answer_field] + ([level_field] if level_field else [])
    rows: dict[str, Row] = {}
    conflicts = _Conflicts()
    seen = 0
    for where, record in _records(file, fields, max_line_bytes, warn):
        seen += 1
        question = _text_field(record, question_field, where)
        answer, solution = _answer(record, answer_field, where)
        row = make_row(
            source=label,
            family=family,
            level=_level(record, level_field, where),
            params=params_json({} if solution is None else {"solution": solution}),
            question=question,
            answer=answer,
            verifier=verifier,
            heldout_pct=heldout_pct,
        )
        rows.setdefault(row[0], row)
        conflicts.add(question, answer, where)
    if not allow_conflicts:
        conflicts.check()
    if not seen:
        warn(f"{file.name}: no records; nothing to import")
    frame = build_frame(rows.values())
    check_golds(frame, file.name, warn)
    return frame


def check_golds(frame: pl.DataFrame, name: str, warn: Warn) -> None:
    """Refuse math golds the verifier cannot read within its deadline; warn (one line) about
    golds it does not accept against themselves. Each distinct gold is judged once, boxed."""
    golds = frame.filter(pl.col("verifier") == "math")["answer"].unique(maintain_order=True)
    answers = golds.to_list()
    if not answers:
        return
    deep = [a for a in answers if unjudgeable(a)]
    if deep:
        raise SieveError(
            f"{name}: answer {_clip(deep[0])} nests brackets deeper than {MAX_DEPTH} and is not a "
            f"plain number ({len(deep)} such answer(s)); no completion could be judged against "
            "it — simplify the gold or import it with another verifier"
        )
    verdicts = verify_batch([f"\\boxed{{{a}}}" for a in answers], answers, "math")
    timeouts = [
        a for a, v in zip(answers, verdicts, strict=True)
        if v.reason == "verifier_error" or (v.detail.startswith("fast_path") and _unreadable(a))
    ]  # fmt: skip
    if timeouts:
        raise SieveError(
            f"{name}: the math verifier cannot read answer {_clip(timeouts[0])} within its "
            f"deadline ({len(timeouts)} such answer(s)); every verdict on it would be a timeout "
            "— simplify the gold or import it with another verifier"
        )
    unpaid = [a for a, v in zip(answers, verdicts, strict=True) if v.correct is not True]
    if unpaid:
        warn(
            f"{name}: {len(unpaid)} answer(s) are not accepted by the math verifier even against "
            f"themselves (first {_clip(unpaid[0])}): no completion can be scored correct for them"
        )


def unjudgeable(answer: str) -> bool:
    """True when a math gold nests deeper than math-verify reads in time (pipeline/scoring/
    depth.py) and the exact parser cannot read it either: every verdict on it would be
    `too_deep`."""
    gold = apply_scale(peel(fold(answer)))
    return too_deep(gold) and gold_number(gold) is None


def _unreadable(answer: str) -> bool:
    """True when math-verify cannot judge a wrong answer (`0`) against a gold that is not a
    plain number within its deadline.

    The fast path pays a completion equal to the gold without math-verify, so the self-check
    above never reached it for `{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}`, and every other completion
    goes to math-verify, which timed out on each (math-verify reads a plain number at once, and
    most completions of a numeric gold are decided without it)."""
    gold = apply_scale(peel(fold(answer)))
    if gold_number(gold) is not None:
        return False
    try:
        math_verify_equivalent(math_verify_gold(gold), "0", resolve_timeout(None), raw=False)
    except WorkerError:
        return True
    return False


def check_stored_conflicts(frame: pl.DataFrame, stored: pl.DataFrame, name: str) -> None:
    """Refuse questions of `frame` that the ledger (`stored`: its problems with these
    questions, columns question, answer, source) holds with another answer: the per-file check
    cannot see what other files brought (56 from one file, then 57 from another, was added
    without a word). An answer the ledger already holds for the question is no conflict."""
    if frame.is_empty() or stored.is_empty():
        return
    known = stored.select("question", "answer").unique()
    new = frame.select("question", "answer").unique().join(known, ["question", "answer"], "anti")
    there = stored.select("question", pl.col("answer").alias("stored"), "source")
    clashes = new.join(there, "question", maintain_order="left").sort("question", "stored")
    if clashes.is_empty():
        return
    question, answer, first, source = clashes.row(0)
    n = clashes["question"].n_unique()
    raise SieveError(
        f"{name}: question {_clip(question)} is already in the ledger with a different answer "
        f"({_clip(answer)} here, {_clip(first)} from {source}); {n} question(s) with "
        "conflicting answers in all; fix the file, or pass --allow-conflicts to keep them all"
    )


def conflicting_questions(frame: pl.DataFrame) -> int:
    """How many questions of a problem frame carry more than one distinct answer."""
    per_question = frame.group_by("question").agg(pl.col("answer").n_unique().alias("answers"))
    return per_question.filter(pl.col("answers") > 1).height
