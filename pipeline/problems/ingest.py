"""Import a user's problem file into a problem frame, all or nothing: JSONL, CSV, Parquet, or a
folder written by `datasets`' `save_to_disk` (`readers.py`, `tables.py`).

`Columns` (`columns.py`) names the question column (or a chat conversation holding it), the
answer column and, optionally, level, split (train/test), family and id columns. Answers:
- GSM8K-style, a worked solution ending `#### 42`: the answer is the text after the last `####`
  with thousands separators removed;
- MATH-style, a solution holding `\\boxed{...}`: the answer is what the verifier reads from it as
  from a completion (`pipeline/scoring/extract.py`: the last box, boxes just before it joined);
- either way the full solution is kept in params as `solution` (and a file's id as `id`).
Any bad record raises `SieveError` naming the file and the line or row a user sees, and nothing
is returned, so a caller imports all of a file or none of it.

What is refused, with the reason:
- A line, CSV record or Parquet/dataset cell over `max_line_bytes` (1 MiB by default), read no
  further; Parquet and dataset columns whose type cannot hold the role, and more than
  `MAX_PARQUET_TEXT` (1 GiB) of their text in all, both judged before a page is read
  (`tables.py`).
- An answer that is NaN or infinite (JSON `NaN`, `Infinity`, `1e999`, or the text `nan`/`inf`):
  no verifier ever scores it correct. An answer over `MAX_ANSWER_CHARS` (1,000) characters: a
  final answer is short (the longest MATH answers are a few hundred characters of LaTeX); longer
  text is a solution in the wrong field, and the cap also keeps digit strings far below Python's
  4,300-digit `int()` limit. A `\\boxed{` that does not close.
- A numeric answer that underflows: a nonzero number such as `1e-999` that a float reads as 0
  (a verifier comparing numbers would then pay `0`).
- A math gold the verifier cannot read within its deadline (say 400 nested parentheses): every
  later verdict on it would be a timeout. Each distinct math gold that is not a plain decimal
  number is judged against itself in its boxed form (`verify_batch`); a timeout refuses the file,
  a gold that is not accepted against itself is kept with one warning line (no completion can be
  paid for it). A gold the fast path pays against itself (equal text) is also judged by
  math-verify against a wrong answer (`0`): every other completion reaches math-verify, and
  `{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}` passed the self-check, then timed out on each of them. A
  plain decimal number (`-12.50`) is always paid against itself on the fast path, so it is not
  sent (`tests/problems/test_ingest_text.py` holds that).
- A gold holding a control character other than a tab or line break (`"4\\x00"`) or any other
  invisible character (`"4\\u200b"`, U+3164 HANGUL FILLER, U+2800 BRAILLE PATTERN BLANK, a
  trailing U+034F; `text.py`), and a question or answer with no visible character.
- Text that is not valid Unicode (a lone surrogate such as JSON `"\\ud800"`), a level outside
  32 bits, a split other than train or test, a chat conversation with a system turn.
- The same question (as a user sees it: `text.py`'s `question_key`) with two different answers,
  unless `allow_conflicts`; the same question with the same answer is a duplicate and keeps its
  first occurrence (`duplicates.py`). `sieve ingest` also refuses a question the ledger already
  holds with another answer (`check_stored_conflicts`), unless `allow_conflicts`.

Numbers are kept exactly as written: JSON numbers as their literal text
(`3.14159265358979323846`, `1e-7` stay as they are), CSV cells as text, Parquet decimals as their
exact value, Parquet floats as their shortest round-trip text in their own width. An input with
no records imports nothing and says so in one warning line. Rows are kept as compact polars
chunks, never as Python objects, so millions of short problems fit in bounded memory.

Test: `.venv/bin/pytest tests/problems/test_ingest*.py -q`.
"""

from __future__ import annotations

import decimal
import math
import re
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.problems.base import (
    PROBLEM_SCHEMA,
    Split,
    check_heldout_pct,
    params_json,
    problem_id,
    split_for,
)
from pipeline.problems.columns import Columns, chat_question, sieve_split
from pipeline.problems.duplicates import Chunks, clip, settle
from pipeline.problems.readers import (
    BigInt,
    JsonNumber,
    Limits,
    Rows,
    Warn,
    csv_rows,
    jsonl_rows,
)
from pipeline.problems.tables import dataset_rows, parquet_rows
from pipeline.problems.text import hidden, invisible, key_hashes, question_key
from pipeline.scoring import verify_batch
from pipeline.scoring.commit import fold
from pipeline.scoring.depth import MAX_DEPTH, peel, too_deep
from pipeline.scoring.extract import boxed_content, extract
from pipeline.scoring.numeric import gold_number, is_non_finite
from pipeline.scoring.units import apply_scale
from pipeline.scoring.verifiers import math_verify_gold
from pipeline.scoring.worker import WorkerError, math_verify_equivalent, resolve_timeout

GSM_MARK = "####"
MAX_LINE_BYTES = 1 << 20  # default limit on one JSONL line or CSV record, or one cell (1 MiB)
MAX_PARQUET_TEXT = 1 << 30  # text of the read columns of a Parquet file or dataset (1 GiB)
MAX_ANSWER_CHARS = 1000  # longest final answer accepted (see the module docstring)
GOLD_BATCH = 20_000  # distinct golds judged at a time
_INT32 = (-(2**31), 2**31 - 1)  # the ledger's `level` column is INTEGER
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_PLAIN = r"^-?[0-9]+(\.[0-9]+)?$"  # a gold the fast path always pays against itself
_ASCII_VISIBLE = re.compile(r"[!-~]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # not tab or line breaks


def split_gsm_answer(text: str) -> tuple[str, str | None]:
    """(canonical answer, full solution or None) for an answer that may end in `#### 42`."""
    if GSM_MARK not in text:
        return text.strip(), None
    final = text.rsplit(GSM_MARK, 1)[1].strip()
    if _THOUSANDS.fullmatch(final):
        final = final.replace(",", "")
    return final, text


def split_solution(text: str, field: str, where: str) -> tuple[str, str | None]:
    """(final answer, full solution or None): `#### 42`, else a closed `\\boxed{}`, else the
    text itself."""
    if GSM_MARK in text or ("\\boxed" not in text and "\\fbox" not in text):
        return split_gsm_answer(text)
    if boxed_content(text, closed=True) is None:
        if boxed_content(text) is None:  # `\\boxed` as a word, with no group after it
            return text.strip(), None
        raise SieveError(f"{where}: the last \\boxed{{ in {field!r} is not closed")
    return (extract(text).text or "").strip(), text


def _as_float(text: str) -> float | None:
    """The float a plain number reads as (`1e-999` -> 0.0, `1e999` -> inf); None for other text."""
    if len(text) > 400 or _NUMBER.fullmatch(text) is None:
        return None
    return float(text)


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


def _field(record: dict[str, Any], field: str, where: str) -> Any:
    if field not in record:
        raise SieveError(f"{where}: missing field {field!r}")
    return record[field]


def _text(value: Any, field: str, where: str) -> str:
    """A required text value with a visible character; finite numbers (not booleans) are
    accepted as their text."""
    if isinstance(value, bool) or (value is not None and not isinstance(value, str | int | float)):
        hint = ""
        if isinstance(value, list) and value and isinstance(value[0], dict) and "role" in value[0]:
            hint = f" (a chat conversation: pass --chat-field {field})"
        raise SieveError(f"{where}: field {field!r} must be text or a number{hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SieveError(f"{where}: field {field!r} is {value}, not a finite number")
    text = "" if value is None else str(value).strip()
    if not text:
        raise SieveError(f"{where}: empty {field!r}")
    if text.isascii() and _ASCII_VISIBLE.search(text) is not None:
        return text  # the common case, decided at C speed
    _check_unicode(text, f"field {field!r}", where)
    if all(invisible(c) for c in text):
        shown = ", ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(text))
        raise SieveError(f"{where}: field {field!r} has no visible character (only {shown})")
    return text


def _check_gold_text(answer: str, where: str) -> None:
    """Refuse a gold holding a control character other than a tab or line break (`"4\\x00"`) or
    an invisible character (`"4\\u200b"`, `"4\\u3164"`): no completion writes it, so no answer is
    paid or the comparison rests on a character nobody sees."""
    if answer.isascii() and _ASCII_CONTROL.search(answer) is None:
        return
    for i, char in enumerate(answer):
        if hidden(char) and char not in "\t\n\r":
            kind = unicodedata.category(char)
            what = {"Cc": "a control character", "Cf": "an invisible format character"}.get(
                kind, "an invisible character"
            )
            raise SieveError(
                f"{where}: answer {clip(answer)} holds {what} (U+{ord(char):04X}) at character "
                f"{i}; a gold answer is visible text"
            )


def _answer(value: Any, field: str, where: str) -> tuple[str, str | None]:
    """(final answer, full solution or None) of a record, refused when it cannot be a gold."""
    answer, solution = split_solution(_text(value, field, where), field, where)
    if not answer:
        after = f"after {GSM_MARK!r}" if GSM_MARK in (solution or "") else "in its \\boxed{}"
        raise SieveError(f"{where}: empty answer {after}")
    if solution is not None:
        _text(answer, field, where)  # `#### \u3164`: nothing visible after the mark
    _check_gold_text(answer, where)
    if len(answer) > MAX_ANSWER_CHARS:
        raise SieveError(
            f"{where}: answer is {len(answer):,} characters long; at most {MAX_ANSWER_CHARS:,} "
            f"(a final answer, not a solution: end a worked solution with '{GSM_MARK} answer')"
        )
    if is_non_finite(answer):
        raise SieveError(f"{where}: answer {clip(answer)} is not a finite number")
    value = _as_float(answer)
    if value is not None and math.isinf(value):
        raise SieveError(
            f"{where}: answer {clip(answer)} is not a finite number (a float reads it as inf)"
        )
    if value == 0.0 and decimal.Decimal(answer) != 0:
        raise SieveError(
            f"{where}: answer {clip(answer)} underflows (a float reads it as 0); "
            "write it as text the verifier can compare, or round it"
        )
    return answer, solution


def _level(value: Any, field: str, where: str) -> int:
    low, high = _INT32
    if isinstance(value, BigInt) or (isinstance(value, int) and not low <= value <= high):
        raise SieveError(f"{where}: level field {field!r} is out of range ({low} to {high})")
    if isinstance(value, bool) or not isinstance(value, int):
        shown = clip(value) if isinstance(value, str) else repr(value)
        raise SieveError(f"{where}: level field {field!r} must be an integer, got {shown}")
    return value


def _id(value: Any, field: str, where: str) -> str | int:
    if isinstance(value, int) and not isinstance(value, bool | BigInt):
        return value
    if not isinstance(value, str) or isinstance(value, JsonNumber) or not value.strip():
        raise SieveError(f"{where}: id field {field!r} must be text or an integer")
    _check_unicode(value, f"id field {field!r}", where)
    return value


class _Row:
    """One record's problem, in `duplicates.CHUNK_SCHEMA` order (less `row`)."""

    def __init__(self, columns: Columns, heldout_pct: float, verifier: str) -> None:
        self.c, self.pct, self.verifier = columns, heldout_pct, verifier

    def __call__(self, record: dict[str, Any], where: str, split: Any) -> tuple[Any, ...]:
        c = self.c
        asked = _field(record, c.question, where)
        if c.chat:
            asked = chat_question(asked, c.question, where)
        question = _text(asked, c.question, where)
        answer, solution = _answer(_field(record, c.answer, where), c.answer, where)
        level = 0 if c.level is None else _level(_field(record, c.level, where), c.level, where)
        family = None  # the file's one family, filled in at the end
        if c.family is not None:
            family = _text(_field(record, c.family, where), c.family, where)
        given: Split | None = None
        if c.split is not None:
            given = sieve_split(_field(record, c.split, where), where)
        elif split is not None:
            given = sieve_split(split, where)
        ident = None if c.id is None else _id(_field(record, c.id, where), c.id, where)
        params: dict[str, Any] = {} if solution is None else {"solution": solution}
        if ident is not None:
            params["id"] = ident
        pid = problem_id(question, answer, self.verifier)
        split_name = given if given is not None else split_for(pid, self.pct)
        text = params_json(params) if params else "{}"
        shown = None if ident is None else str(ident)
        return pid, family, level, text, question, answer, split_name, shown


def read_external(
    path: str | Path,
    columns: Columns | None = None,
    *,
    family: str = "external",
    source: str | None = None,
    heldout_pct: float = 10.0,
    verifier: str = "math",
    allow_conflicts: bool = False,
    max_line_bytes: int = MAX_LINE_BYTES,
    warn: Warn | None = None,
) -> pl.DataFrame:
    """Problems from a file or saved dataset folder as a `PROBLEM_SCHEMA` frame.

    `columns` (default: `question` and `answer`) says which columns hold what; `family` names
    every problem unless a family column does. Duplicates (the same question, answer and
    verifier) keep their first occurrence. Raises `SieveError` on any bad record, naming the
    file and line, so nothing is imported from a partly bad file; also on a question given two
    different answers unless `allow_conflicts` (then every answer is kept, each as its own
    problem; `conflicting_questions` counts them). `warn` receives one line per warning (float32
    columns, an empty input, golds the verifier does not accept against themselves); by default
    they are dropped.
    """
    warn = warn if warn is not None else (lambda _line: None)
    columns = columns if columns is not None else Columns()
    check_heldout_pct(heldout_pct)
    if max_line_bytes < 1:
        raise SieveError(
            f"--max-line-bytes must be a positive number of bytes, got {max_line_bytes}"
        )
    file = Path(path)
    label = source if source is not None else f"file:{file.name}"
    _check_unicode(label, "the source label", file.name)
    _check_unicode(family, "the family name", file.name)
    rows = open_rows(file, columns, Limits(max_line_bytes, MAX_PARQUET_TEXT), warn)
    frame = _read(rows, columns, _Row(columns, heldout_pct, verifier))
    if frame.is_empty():
        warn(f"{file.name}: no records; nothing to import")
    splits_given = columns.split is not None or rows.split_of is not None
    frame = settle(frame, rows.where, allow_conflicts=allow_conflicts, splits_given=splits_given)
    frame = frame.select(
        pl.col("problem_id"),
        pl.lit(label, pl.Utf8).alias("source"),
        "family" if columns.family is not None else pl.lit(family, pl.Utf8).alias("family"),
        "level",
        "params",
        "question",
        "answer",
        pl.lit(verifier, pl.Utf8).alias("verifier"),
        "split",
        pl.lit(datetime.now(UTC)).cast(PROBLEM_SCHEMA["created_at"]).alias("created_at"),
    )
    check_golds(frame, file.name, warn)
    return frame


def open_rows(path: Path, columns: Columns, limits: Limits, warn: Warn) -> Rows:
    """The records of `path` by its kind: a folder is a saved dataset, else by suffix."""
    if path.is_dir():
        return dataset_rows(path, columns, limits, warn)
    if not path.is_file():
        raise SieveError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return jsonl_rows(path, limits.cell)
    if suffix == ".csv":
        return csv_rows(path, columns, limits.cell)
    if suffix == ".parquet":
        return parquet_rows(path, columns, limits, warn)
    raise SieveError(
        f"{path.name}: unsupported file type {suffix!r}; use .jsonl, .csv, .parquet or a folder "
        "written by datasets' save_to_disk"
    )


def _read(rows: Rows, columns: Columns, make: _Row) -> pl.DataFrame:
    chunks = Chunks()
    split_of = rows.split_of
    for number, record in rows.records:
        split = split_of(number) if split_of is not None else None
        chunks.add((number, *make(record, rows.where(number), split)))
    return chunks.frame()


def check_golds(frame: pl.DataFrame, name: str, warn: Warn) -> None:
    """Refuse math golds the verifier cannot read within its deadline; warn (one line) about
    golds it does not accept against themselves. Each distinct gold that is not a plain number
    is judged once, boxed, `GOLD_BATCH` at a time."""
    golds = (
        frame.lazy()
        .filter((pl.col("verifier") == "math") & ~pl.col("answer").str.contains(_PLAIN))
        .select(pl.col("answer").unique(maintain_order=True))
        .collect()["answer"]
    )
    batches = [golds.slice(s, GOLD_BATCH) for s in range(0, len(golds), GOLD_BATCH)]
    deep = [a for batch in batches for a in batch if unjudgeable(a)]
    if deep:
        raise SieveError(
            f"{name}: answer {clip(deep[0])} nests brackets deeper than {MAX_DEPTH} and is not a "
            f"plain number ({len(deep)} such answer(s)); no completion could be judged against "
            "it — simplify the gold or import it with another verifier"
        )
    unpaid: list[str] = []
    for batch in batches:
        answers = batch.to_list()
        verdicts = verify_batch([f"\\boxed{{{a}}}" for a in answers], answers, "math")
        timeouts = [
            a for a, v in zip(answers, verdicts, strict=True)
            if v.reason == "verifier_error" or (v.detail.startswith("fast_path") and _unreadable(a))
        ]  # fmt: skip
        if timeouts:
            raise SieveError(
                f"{name}: the math verifier cannot read answer {clip(timeouts[0])} within its "
                f"deadline ({len(timeouts)} such answer(s)); every verdict on it would be a "
                "timeout — simplify the gold or import it with another verifier"
            )
        unpaid += [a for a, v in zip(answers, verdicts, strict=True) if v.correct is not True]
    if unpaid:
        warn(
            f"{name}: {len(unpaid)} answer(s) are not accepted by the math verifier even against "
            f"themselves (first {clip(unpaid[0])}): no completion can be scored correct for them"
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
    """Refuse questions of `frame` that the ledger (`stored`: at least its problems whose
    question is the same as one of `frame`'s, as `question_key` reads them; columns question,
    answer, source) holds with another answer: the per-file check cannot see what other files
    brought (56 from one file, then 57 from another, was added without a word). An answer the
    ledger already holds for the question is no conflict."""
    if frame.is_empty() or stored.is_empty():
        return
    ident = question_key(pl.col("question")).alias("ident")
    known = stored.select(ident, "answer").unique()
    candidates = frame.filter(
        key_hashes(frame["question"]).is_in(known["ident"].hash(seed=0).implode())
    )
    new = candidates.select("question", ident, "answer").unique(["ident", "answer"])
    new = new.join(known, ["ident", "answer"], "anti")
    there = stored.select(ident, pl.col("answer").alias("stored"), "source")
    clashes = new.join(there, "ident", maintain_order="left").sort("question", "stored")
    if clashes.is_empty():
        return
    question, _, answer, first, source = clashes.row(0)
    n = clashes["ident"].n_unique()
    raise SieveError(
        f"{name}: question {clip(question)} is already in the ledger with a different answer "
        f"({clip(answer)} here, {clip(first)} from {source}); {n} question(s) with "
        "conflicting answers in all; fix the file, or pass --allow-conflicts to keep them all"
    )


def conflicting_questions(frame: pl.DataFrame) -> int:
    """How many questions of a problem frame (as `question_key` reads them) carry more than one
    distinct answer."""
    hashes = key_hashes(frame["question"])
    shared = frame.filter(hashes.is_duplicated())  # the text is compared below
    ident = question_key(pl.col("question")).alias("ident")
    per_question = shared.group_by(ident).agg(pl.col("answer").n_unique().alias("answers"))
    return per_question.filter(pl.col("answers") > 1).height
