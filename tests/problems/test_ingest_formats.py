"""`sieve ingest` of a user's own data: JSONL, CSV, Parquet and `datasets` save_to_disk folders,
column mapping (question or chat, answer, level, split, family, id), chat conversations and
splits; a bad row is one line naming the line or row a user sees, and nothing is stored.

The committed fixtures (tests/fixtures/ingest/, written by make_fixtures.py there) are a
GSM8K-shaped set (worked answers ending '#### N') and a MATH-shaped one (solutions with
\\boxed{...}) in each format; each is ingested and read back from the ledger.

Run: `.venv/bin/pytest tests/problems/test_ingest_formats.py -q`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.errors import SieveError
from pipeline.jobs.data.intake import ingest_file
from pipeline.problems.columns import Columns
from pipeline.problems.ingest import read_external
from pipeline.store import Ledger
from tests.cli_runner import run_cli
from tests.fixtures.ingest.make_fixtures import GSM8K, GSM8K_GOLDS, MATH, MATH_GOLDS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "ingest"
GSM_COLUMNS = Columns(split="split")
MATH_COLUMNS = Columns("problem", "solution", family="type", id="unique_id")
FORMATS = ["jsonl", "csv", "parquet", "saved"]


def fixture(name: str, form: str) -> Path:
    return FIXTURES / (f"{name}_saved" if form == "saved" else f"{name}.{form}")


def stored(home: Path) -> pl.DataFrame:
    with Ledger.open(home, read_only=True) as ledger:
        return ledger.sql("SELECT question, answer, split, family, params, source FROM problems")


def one_line(info: pytest.ExceptionInfo[SieveError]) -> str:
    message = str(info.value)
    assert "\n" not in message, message
    return message


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_fixtures_are_small() -> None:
    for path in FIXTURES.rglob("*"):
        assert not path.is_file() or path.stat().st_size < 50_000, path


@pytest.mark.parametrize("form", FORMATS)
def test_gsm8k_shaped_fixture_reads_back_with_its_golds(tmp_path: Path, form: str) -> None:
    path = fixture("gsm8k", form)
    columns = Columns() if form == "saved" else GSM_COLUMNS  # a DatasetDict's keys are splits
    added = ingest_file(tmp_path, path, columns)
    assert added.new == len(GSM8K)
    rows = {r["question"]: r for r in stored(tmp_path).iter_rows(named=True)}
    for (question, solution, split), gold in zip(GSM8K, GSM8K_GOLDS, strict=True):
        row = rows[question]
        assert row["answer"] == gold
        assert json.loads(row["params"]) == {"solution": solution}
        assert row["split"] == {"train": "train", "test": "heldout"}[split]
        assert row["family"] == "external" and row["source"] == f"file:{path.name}"


@pytest.mark.parametrize("form", FORMATS)
def test_math_shaped_fixture_reads_back_with_its_boxed_golds(tmp_path: Path, form: str) -> None:
    warnings: list[str] = []
    added = ingest_file(tmp_path, fixture("math", form), MATH_COLUMNS, warn=warnings.append)
    assert added.new == len(MATH) and warnings == []
    rows = {r["question"]: r for r in stored(tmp_path).iter_rows(named=True)}
    for (unique_id, problem, solution, _, kind), gold in zip(MATH, MATH_GOLDS, strict=True):
        row = rows[problem]
        assert row["answer"] == gold and row["family"] == kind
        assert json.loads(row["params"]) == {"solution": solution, "id": unique_id}


def test_the_cli_maps_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ingest", str(fixture("math", "csv")), "--question-field", "problem"]
    argv += ["--answer-field", "solution", "--family-field", "type", "--id-field", "unique_id"]
    code, _, err = run_cli([*argv, "--home", str(tmp_path)], capsys)
    assert code == 0, err
    assert sorted(stored(tmp_path)["answer"]) == sorted(MATH_GOLDS)
    argv = ["ingest", str(fixture("gsm8k", "jsonl")), "--split-field", "split"]
    code, _, err = run_cli([*argv, "--home", str(tmp_path)], capsys)
    assert code == 0, err
    gsm = stored(tmp_path).filter(pl.col("source") == "file:gsm8k.jsonl")
    assert gsm.filter(pl.col("split") == "heldout").height == 2


# ---- a bad row: one line with the number a user sees, nothing stored ------------------------


def bad_file(tmp_path: Path, form: str) -> tuple[Path, str]:
    """A file of two good rows, then a third whose answer is NaN; (path, where it is)."""
    rows = [("1+1?", "2"), ("2+2?", "4"), ("3+3?", "nan")]
    frame = pl.DataFrame(rows, schema=["question", "answer"], orient="row")
    if form == "jsonl":
        lines = [json.dumps({"question": q, "answer": a}) for q, a in rows]
        return write(tmp_path / "bad.jsonl", "\n\n".join(lines) + "\n"), "bad.jsonl:5"
    if form == "csv":  # the first record spans two lines: the bad one starts on line 5
        text = 'question,answer\n"1+1,\nplease?",2\n2+2?,4\n3+3?,nan\n'
        return write(tmp_path / "bad.csv", text), "bad.csv:5"
    if form == "parquet":
        frame.write_parquet(tmp_path / "bad.parquet")
        return tmp_path / "bad.parquet", "bad.parquet row 3"
    import datasets

    datasets.disable_progress_bars()
    part = datasets.Dataset.from_polars(frame)
    datasets.DatasetDict({"train": part.select([0]), "test": part}).save_to_disk(tmp_path / "bad")
    return tmp_path / "bad", "bad[test] row 3"


@pytest.mark.parametrize("form", FORMATS)
def test_a_bad_row_is_one_line_naming_it_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    home = tmp_path / "home"
    assert run_cli(["ingest", str(fixture("gsm8k", "jsonl")), "--home", str(home)], capsys)[0] == 0
    with Ledger.open(home, read_only=True) as ledger:
        before = ledger.checksum("problems")
    path, where = bad_file(tmp_path, form)
    code, _, err = run_cli(["ingest", str(path), "--home", str(home)], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and lines == [f"error: {where}: answer 'nan' is not a finite number"], err
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.checksum("problems") == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("question,answer\na,1\nb,2,3\n", "data.csv:3: 3 cells; the header has 2"),
        ("question,answer\na,1\n\nb\n", "data.csv:4: 1 cells; the header has 2"),
        ("q,answer\na,1\n", "data.csv: no column 'question'; available: q, answer"),
        ("question,answer,question\na,1,b\n", "data.csv: the header names column 'question'"),
        ("question,answer\na,\n", "data.csv:2: empty 'answer'"),
        ("question,answer\na\rb,1\n", "data.csv:2: invalid CSV (new-line character seen"),
    ],
)
def test_csv_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SieveError) as info:
        read_external(write(tmp_path / "data.csv", text))
    assert one_line(info).startswith(message)


def test_csv_cells_are_text_and_a_level_cell_an_integer(tmp_path: Path) -> None:
    text = "\ufeffquestion,answer,lv\n1+1?,2.50,3\n2+2?,0004,-1\n"
    frame = read_external(write(tmp_path / "data.csv", text), Columns(level="lv"))
    assert frame.select("answer", "level").rows() == [("2.50", 3), ("0004", -1)]
    with pytest.raises(SieveError, match=r"data\.csv:2: level field 'lv' must be an integer"):
        read_external(
            write(tmp_path / "data.csv", "question,answer,lv\na,1,2.5\n"), Columns(level="lv")
        )


def test_a_csv_record_over_the_limit_is_refused_where_it_starts(tmp_path: Path) -> None:
    text = 'question,answer\na,1\n"' + "x\n" * 600 + '",2\n'  # 1,200 bytes over 601 lines
    with pytest.raises(SieveError) as info:
        read_external(write(tmp_path / "data.csv", text), max_line_bytes=1000)
    assert one_line(info) == "data.csv:3: record longer than 1,000 bytes (raise --max-line-bytes)"
    assert read_external(tmp_path / "data.csv", max_line_bytes=2000).height == 2


# ---- splits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["validation", "dev", "", 1, None])
def test_a_split_other_than_train_or_test_names_the_row(tmp_path: Path, value: Any) -> None:
    rows = [
        {"question": "a", "answer": 1, "s": "train"},
        {"question": "b", "answer": 2, "s": "TEST"},
    ]
    rows.append({"question": "c", "answer": 3, "s": value})
    path = write(tmp_path / "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SieveError) as info:
        read_external(path, Columns(split="s"))
    assert one_line(info).startswith(f"data.jsonl:3: split {value!r} is not train or test")
    frame = read_external(
        write(path, "".join(json.dumps(r) + "\n" for r in rows[:2])), Columns(split="s")
    )
    assert frame["split"].to_list() == ["train", "heldout"]


def test_a_problem_in_both_splits_is_refused(tmp_path: Path) -> None:
    rows = [("a", "1", "train"), ("b", "2", "test"), ("a", "1", "test")]
    lines = [json.dumps({"question": q, "answer": a, "split": s}) for q, a, s in rows]
    path = write(tmp_path / "data.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(SieveError) as info:
        read_external(path, Columns(split="split"))
    assert one_line(info).startswith(
        "data.jsonl:3: same problem as data.jsonl:1, which is in train; here it is in test"
    )


def test_a_problem_the_ledger_holds_in_the_other_split_is_refused(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a.jsonl", json.dumps({"question": "q", "answer": 1, "split": "train"})
    )
    ingest_file(tmp_path, first, Columns(split="split"))
    second = write(
        tmp_path / "b.jsonl", json.dumps({"question": "q", "answer": 1, "split": "test"})
    )
    with pytest.raises(SieveError) as info:
        ingest_file(tmp_path, second, Columns(split="split"))
    assert one_line(info) == (
        "b.jsonl: question 'q' is in the ledger's train split; the file puts it in test "
        "(1 such problem(s)); a problem is in one split"
    )


def test_a_dataset_dict_with_another_split_is_one_line(tmp_path: Path) -> None:
    import datasets

    datasets.disable_progress_bars()
    part = datasets.Dataset.from_dict({"question": ["a"], "answer": ["1"]})
    datasets.DatasetDict({"train": part, "validation": part}).save_to_disk(tmp_path / "dd")
    with pytest.raises(SieveError) as info:
        read_external(tmp_path / "dd")
    assert one_line(info).startswith("dd: split 'validation' of the saved DatasetDict is not train")
    with pytest.raises(SieveError, match="--split-field is for a split column"):
        read_external(fixture("gsm8k", "saved"), Columns(split="split"))


def test_a_folder_that_is_no_dataset_and_a_missing_datasets_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SieveError) as info:
        read_external(tmp_path / "empty")
    assert one_line(info).startswith("empty: not a saved dataset")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    with pytest.raises(SieveError) as info:
        read_external(fixture("math", "saved"), MATH_COLUMNS)
    assert "is read with the `datasets` package" in one_line(info)


# ---- chat conversations ----------------------------------------------------------------------

USER = {"role": "user", "content": "What is 6*7?"}


@pytest.mark.parametrize(
    ("messages", "outcome"),
    [
        ([USER], "What is 6*7?"),
        ([USER, {"role": "assistant", "content": "42"}], "What is 6*7?"),
        (json.dumps([USER]), "What is 6*7?"),  # JSON text, as a CSV cell holds it
        ([{"role": "system", "content": "Be brief."}, USER], "has a system turn; Sieve keeps no"),
        ([{"role": "developer", "content": "x"}, USER], "has a developer turn"),
        ([USER, {"role": "assistant", "content": "42"}, USER], "turns before its last user turn"),
        ([{"role": "assistant", "content": "Hi"}, USER], "turns before its last user turn"),
        ([{"role": "assistant", "content": "Hi"}], "has no user turn"),
        ([{"role": "tool", "content": "x"}, USER], "turn 1 of 'messages' has role 'tool'"),
        ([{"content": "x"}], "turn 1 of 'messages' has no text 'role'"),
        ([{"role": "user"}], "turn 1 of 'messages' has no 'content'"),
        ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "holds list, not text"),
        ([{"role": "user", "content": " \u200b "}], "has no visible character"),
        ([], "is not a chat conversation"),
        ("not json", "is not a chat conversation"),
    ],
)
def test_chat_conversations(tmp_path: Path, messages: Any, outcome: str) -> None:
    record = {"messages": messages, "answer": "42"}
    path = write(tmp_path / "chat.jsonl", json.dumps({"messages": [USER], "answer": "1"}) + "\n"
                 + json.dumps(record) + "\n")  # fmt: skip
    columns = Columns(question="messages", chat=True, split=None)
    if outcome.endswith("?"):
        frame = read_external(path, columns, allow_conflicts=True)
        assert frame["question"].to_list() == [outcome, outcome]
        return
    with pytest.raises(SieveError) as info:
        read_external(path, columns)
    message = one_line(info)
    assert message.startswith("chat.jsonl:2: ") and outcome in message, message


def test_a_parquet_chat_column_and_the_hint_without_chat(tmp_path: Path) -> None:
    turns = [
        [USER],
        [{"role": "user", "content": "And 6*8?"}, {"role": "assistant", "content": "48"}],
    ]
    table = pa.table({"prompt": turns, "answer": ["42", "48"]})
    pq.write_table(table, tmp_path / "chat.parquet")
    frame = read_external(tmp_path / "chat.parquet", Columns("prompt", chat=True))
    assert frame.select("question", "answer").rows() == [("What is 6*7?", "42"), ("And 6*8?", "48")]
    with pytest.raises(SieveError) as info:
        read_external(tmp_path / "chat.parquet", Columns("prompt"))
    assert one_line(info).endswith("(a chat conversation: pass --chat-field prompt)")
    path = write(tmp_path / "chat.jsonl", json.dumps({"prompt": [USER], "answer": 1}))
    with pytest.raises(SieveError, match=r"\(a chat conversation: pass --chat-field prompt\)"):
        read_external(path, Columns("prompt"))


def test_the_cli_chat_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path / "chat.csv",
        'messages,answer\n"[{""role"": ""user"", ""content"": ""1+1?""}]",2\n',
    )
    code, _, err = run_cli(
        ["ingest", str(path), "--chat-field", "messages", "--home", str(tmp_path)], capsys
    )
    assert code == 0, err
    assert stored(tmp_path).select("question", "answer").rows() == [("1+1?", "2")]
    argv = ["ingest", str(path), "--chat-field", "messages", "--question-field", "q"]
    code, _, err = run_cli([*argv, "--home", str(tmp_path)], capsys)
    assert code == 1 and err.strip() == "error: give --question-field or --chat-field, not both"


# ---- ids, families, answers -----------------------------------------------------------------


def test_ids_are_kept_and_one_id_names_one_problem(tmp_path: Path) -> None:
    rows = [{"q": "a", "a": 1, "id": 7}, {"q": "a", "a": 1, "id": 7}, {"q": "b", "a": 2, "id": "x"}]
    path = write(tmp_path / "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    frame = read_external(path, Columns("q", "a", id="id"))
    assert [json.loads(p)["id"] for p in frame["params"]] == [7, "x"]  # the repeat is a duplicate
    rows.append({"q": "c", "a": 3, "id": "x"})
    path = write(tmp_path / "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SieveError) as info:
        read_external(path, Columns("q", "a", id="id"))
    assert one_line(info).startswith("data.jsonl:4: id 'x' is also the id of data.jsonl:3, a")
    path = write(tmp_path / "bad.jsonl", json.dumps({"q": "a", "a": 1, "id": 1.5}))
    with pytest.raises(SieveError, match=r"bad\.jsonl:1: id field 'id' must be text or an integer"):
        read_external(path, Columns("q", "a", id="id"))


def test_one_column_for_two_roles_is_refused() -> None:
    with pytest.raises(SieveError, match="column 'x' is given for two roles"):
        Columns("x", "x")
    with pytest.raises(SieveError, match="column 'answer' is given for two roles"):
        Columns(level="answer")


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("so $x=\\boxed{5}$.", "5"),
        ("\\boxed{5}", "5"),
        ("we get \\fbox{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("first \\boxed{2}, then $\\boxed{-1}$ and $\\boxed{3}$", "-1, 3"),  # read as a completion
        ("the word \\boxed alone", "the word \\boxed alone"),
    ],
)
def test_a_boxed_solution_gives_its_boxed_gold(tmp_path: Path, answer: str, gold: str) -> None:
    path = write(tmp_path / "data.jsonl", json.dumps({"question": "q", "answer": answer}))
    frame = read_external(path, warn=lambda _: None)
    assert frame["answer"].to_list() == [gold]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("so \\boxed{12", "data.jsonl:1: the last \\boxed{ in 'answer' is not closed"),
        ("so \\boxed{}", "data.jsonl:1: empty answer in its \\boxed{}"),
        ("so \\boxed{\u3164}", "field 'answer' has no visible character (only U+3164)"),
    ],
)
def test_a_broken_box_is_refused(tmp_path: Path, answer: str, message: str) -> None:
    path = write(tmp_path / "data.jsonl", json.dumps({"question": "q", "answer": answer}))
    with pytest.raises(SieveError) as info:
        read_external(path)
    assert message in one_line(info)


def test_a_family_column(tmp_path: Path) -> None:
    rows = [{"q": "a", "a": 1, "f": "algebra"}, {"q": "b", "a": 2, "f": " "}]
    path = write(tmp_path / "data.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SieveError, match=r"data\.jsonl:2: empty 'f'"):
        read_external(path, Columns("q", "a", family="f"))
    path = write(tmp_path / "data.jsonl", json.dumps(rows[0]))
    assert read_external(path, Columns("q", "a", family="f"))["family"].to_list() == ["algebra"]
