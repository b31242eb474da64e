"""Curriculum exports read back with each consumer's own reader; bad input writes nothing."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import datasets
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.data.export import (
    EVIDENCE_COLUMNS,
    FORMATS,
    SIEVE_COLUMNS,
    curriculum_prompt_format,
    curriculum_table,
    export_curriculum,
)
from pipeline.policy.prompts import INSTRUCTION, render_chat, render_raw
from pipeline.problems import generate_mix
from pipeline.scoring import VERIFIER_VERSION
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from pipeline.store.ids import resolve_curriculum
from tests.simulated import RATES, simulated_policy

STATS = [c for c in SIEVE_COLUMNS if c not in ("family", "level", "problem_id")]


def curated(ledger: Ledger, seed: int = 3) -> str:
    """A curriculum curated on a simulated policy whose pass rate falls with the level."""
    cfg = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=seed, chunk_size=40)
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    return curate(ledger, simulated_policy(problems, RATES), cfg).curriculum_id


@pytest.fixture
def cid(ledger: Ledger) -> str:
    return curated(ledger)


def expected(ledger: Ledger, cid: str) -> pl.DataFrame:
    """The curriculum as the ledger holds it, in position order."""
    return ledger.sql(
        "SELECT i.*, p.family, p.level, p.question, p.answer FROM curriculum_items i "
        "JOIN problems p USING (problem_id) WHERE curriculum_id = $c ORDER BY position",
        {"c": cid},
    )


def test_trl_export_loads_with_datasets_and_round_trips(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    result = export_curriculum(ledger, cid, "trl", tmp_path)
    ds = datasets.load_dataset("parquet", data_files=str(result.path), split="train")
    want = expected(ledger, cid)
    assert ds.num_rows == want.height == result.rows > 0
    assert {"prompt", "answer", *SIEVE_COLUMNS} <= set(ds.column_names)
    got = pl.from_arrow(ds.data.table)
    assert isinstance(got, pl.DataFrame)
    assert got["prompt"].to_list() == [render_raw(q) for q in want["question"]]
    assert got["answer"].to_list() == want["answer"].to_list()
    for column in (*SIEVE_COLUMNS,):
        assert got[column].to_list() == want[column].to_list(), column
    assert set(got["stage"]) == {1, 2} and result.stages == dict(
        want.group_by("stage").len().sort("stage").iter_rows()
    )
    assert not list(tmp_path.glob(".*tmp*"))  # the temporary file was renamed away


def test_trl_chat_prompts_are_the_messages_render_chat_sends(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    class Recorder:  # a tokenizer whose "template" is the messages themselves, as JSON
        def apply_chat_template(self, messages: list, **_: object) -> str:
            return json.dumps(messages)

    path = export_curriculum(ledger, cid, "trl", tmp_path, prompt_format="chat").path
    row = datasets.load_dataset("parquet", data_files=str(path), split="train")[0]
    question = expected(ledger, cid)["question"][0]
    assert row["prompt"] == [{"role": "user", "content": f"{INSTRUCTION}\n\n{question}"}]
    assert json.dumps(row["prompt"]) == render_chat(question, Recorder())  # type: ignore[arg-type]


def test_prompt_format_follows_the_curated_model_folder(
    ledger: Ledger, cid: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    assert curriculum_prompt_format(ledger, cid) == "raw"  # "simulated" is no folder
    chat_dir = tmp_path / "chat-model"
    shutil.copytree(tiny_model_dir, chat_dir)
    meta = json.loads((chat_dir / "sieve.json").read_text())
    (chat_dir / "sieve.json").write_text(json.dumps({**meta, "prompt_format": "chat"}))
    for folder, fmt in ((tiny_model_dir, "raw"), (chat_dir, "chat")):
        ledger.run(
            "UPDATE curricula SET model = $m WHERE curriculum_id = $c", {"m": str(folder), "c": cid}
        )
        assert curriculum_prompt_format(ledger, cid) == fmt


def test_verl_export_has_verls_documented_fields_and_types(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    path = export_curriculum(ledger, cid, "verl", tmp_path).path
    schema = pq.read_schema(path)
    assert schema.names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    assert schema.field("data_source").type == pa.string()
    assert schema.field("prompt").type == pa.list_(message)
    assert schema.field("ability").type == pa.string()
    assert schema.field("reward_model").type == pa.struct(
        [("style", pa.string()), ("ground_truth", pa.string())]
    )
    extra = schema.field("extra_info").type
    assert extra.field("split").type == pa.string() and extra.field("index").type == pa.int64()
    rows = pq.read_table(path).to_pylist()
    want = expected(ledger, cid)
    assert len(rows) == want.height
    for row, item in zip(rows, want.iter_rows(named=True), strict=True):
        assert row["data_source"] == f"sieve/{item['family']}" and row["ability"] == "math"
        assert row["prompt"] == [{"role": "user", "content": render_raw(item["question"])}]
        assert row["reward_model"] == {"style": "rule", "ground_truth": item["answer"]}
        info = row["extra_info"]
        assert info["split"] == "train" and info["index"] == item["position"]
        assert {k: info[k] for k in SIEVE_COLUMNS if k != "position"} == {
            k: item[k] for k in SIEVE_COLUMNS if k != "position"
        }


def test_openrlhf_export_is_jsonl_with_the_chosen_keys(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    path = export_curriculum(
        ledger, cid, "openrlhf", tmp_path, input_key="query", label_key="target"
    ).path
    lines = path.read_text().splitlines()
    want = expected(ledger, cid)
    assert len(lines) == want.height
    for line, item in zip(lines, want.iter_rows(named=True), strict=True):
        row = json.loads(line)
        assert row["query"] == render_raw(item["question"]) and row["target"] == item["answer"]
        assert {k: row[k] for k in STATS} == {k: item[k] for k in STATS}
    with pytest.raises(SieveError, match="must differ"):
        export_curriculum(ledger, cid, "openrlhf", tmp_path / "x", input_key="a", label_key="a")
    assert not (tmp_path / "x").exists()


def test_jsonl_export_round_trips_every_column(ledger: Ledger, cid: str, tmp_path: Path) -> None:
    path = export_curriculum(ledger, cid, "jsonl", tmp_path).path
    got = pl.read_ndjson(path)
    want = pl.from_arrow(curriculum_table(ledger, cid))
    assert isinstance(want, pl.DataFrame)
    assert got.drop("prompt").equals(want.cast(got.drop("prompt").schema))  # type: ignore[arg-type]
    assert got["prompt"].to_list() == [render_raw(q) for q in want["question"]]


def test_latest_resolves_to_the_newest_curriculum_with_items(ledger: Ledger, cid: str) -> None:
    """A newer curriculum that kept nothing is recorded but never `latest` (`sieve export`
    after a curation that kept nothing exported zero rows); its id still names it."""
    ledger.write(
        "curricula",
        pl.DataFrame({"curriculum_id": ["cur-empty"], "created_at": [datetime.now(UTC)]}),
    )
    assert resolve_curriculum(ledger, "latest") == cid
    assert resolve_curriculum(ledger, "cur-empty") == "cur-empty"
    assert resolve_curriculum(ledger, cid) == cid


def test_an_empty_curriculum_exports_zero_rows_with_the_schema(
    ledger: Ledger, tmp_path: Path
) -> None:
    ledger.write(
        "curricula", pl.DataFrame({"curriculum_id": ["c0"], "created_at": [datetime.now(UTC)]})
    )
    for fmt in FORMATS:  # a folder each: a folder holds one export (its README.md the card)
        result = export_curriculum(ledger, "c0", fmt, tmp_path / fmt)
        assert result.rows == 0 and result.stages == {}
    assert pq.read_schema(tmp_path / "verl" / "c0.verl.parquet").names[0] == "data_source"


@pytest.mark.parametrize(
    ("curriculum", "fmt", "needle"),
    [
        ("latest", "csv", "unknown export format 'csv'"),
        ("cur-nope", "trl", "no curriculum 'cur-nope'"),
    ],
)
def test_bad_input_raises_one_clear_error_and_writes_nothing(
    ledger: Ledger, cid: str, tmp_path: Path, curriculum: str, fmt: str, needle: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(SieveError, match=needle):
        export_curriculum(ledger, curriculum, fmt, out)
    assert not out.exists()


def test_no_curriculum_yet_and_unwritable_output(ledger: Ledger, tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="no curriculum yet"):
        export_curriculum(ledger, "latest", "trl", tmp_path / "out")
    cid = curated(ledger)
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SieveError, match="not a directory"):
        export_curriculum(ledger, cid, "trl", blocker)
    with pytest.raises(SieveError, match="cannot create"):
        export_curriculum(ledger, cid, "trl", blocker / "sub")


def test_a_failed_write_leaves_no_file_behind(
    ledger: Ledger, cid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(table: pa.Table, where: IO[bytes]) -> None:
        where.write(b"half a file")  # the guarded writer's file, beside the target
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(SieveError, match="No space left"):
        export_curriculum(ledger, cid, "verl", tmp_path)
    assert list(tmp_path.iterdir()) == []


def evidence(ledger: Ledger, cid: str) -> pl.DataFrame:
    """What every exported row must say it was kept on, computed here from the raw tables."""
    from pipeline.store.ids import curation_runs

    return ledger.sql(
        "SELECT i.problem_id, count(r.run_id) AS n_samples, count(r.run_id) FILTER "
        "(WHERE r.correct) AS n_correct, any_value(c.model_revision) AS model_revision "
        "FROM curriculum_items i JOIN curricula c USING (curriculum_id) "
        "LEFT JOIN rollouts r ON r.problem_id = i.problem_id AND list_contains($runs, r.run_id) "
        "WHERE i.curriculum_id = $c GROUP BY i.problem_id, i.position ORDER BY i.position",
        {"c": cid, "runs": curation_runs(cid)},
    )


def read_back(path: Path, fmt: str) -> pl.DataFrame:
    """An export as rows of its Sieve and evidence columns (verl's from `extra_info`)."""
    if fmt == "verl":
        info = pq.read_table(path).column("extra_info").combine_chunks()
        frame = pl.from_arrow(pa.Table.from_struct_array(info))
    elif fmt == "trl":
        frame = pl.from_arrow(pq.read_table(path))
    else:
        frame = pl.read_ndjson(path)
    assert isinstance(frame, pl.DataFrame)
    return frame


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_carries_the_evidence_in_curriculum_order(
    ledger: Ledger, cid: str, tmp_path: Path, fmt: str
) -> None:
    got = read_back(export_curriculum(ledger, cid, fmt, tmp_path).path, fmt)
    want = evidence(ledger, cid)
    assert set(EVIDENCE_COLUMNS) <= set(got.columns)
    assert got["problem_id"].to_list() == want["problem_id"].to_list()
    for column in ("n_samples", "n_correct", "model_revision"):
        assert got[column].to_list() == want[column].to_list(), column
    assert (got["n_samples"] >= 8).all()  # every kept prompt was at least screened
    assert set(got["verifier_version"]) == {VERIFIER_VERSION}
    assert set(got["curriculum_id"]) == {cid}
    stages = got["stage"].to_list()
    assert stages == sorted(stages) and set(stages) == {1, 2}


def test_repeat_for_g_repeats_rows_in_place_for_one_group_size(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    plain = read_back(export_curriculum(ledger, cid, "openrlhf", tmp_path / "a").path, "x")
    result = export_curriculum(ledger, cid, "openrlhf", tmp_path / "b", repeat_for_g=8)
    repeated = read_back(result.path, "x")
    copies = [max(1, round(g / 8)) for g in plain["group_size"]]
    assert repeated["problem_id"].to_list() == [
        p for p, k in zip(plain["problem_id"], copies, strict=True) for _ in range(k)
    ]
    assert result.rows == sum(copies) > plain.height and result.stages == dict(
        plain.group_by("stage").len().sort("stage").iter_rows()
    )
    with pytest.raises(SieveError, match="positive group size"):
        export_curriculum(ledger, cid, "trl", tmp_path / "c", repeat_for_g=0)
    assert not (tmp_path / "c").exists()


def test_the_card_says_what_was_filtered_with_what_on_which_model(
    ledger: Ledger, cid: str, tmp_path: Path
) -> None:
    import yaml

    result = export_curriculum(ledger, cid, "trl", tmp_path, repeat_for_g=8)
    assert result.card == tmp_path / "README.md"
    text = result.card.read_text()
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["configs"][0]["data_files"][0]["path"] == result.path.name
    assert {"rlvr", "grpo", "curriculum"} <= set(meta["tags"])
    head = ledger.sql("SELECT * FROM curricula WHERE curriculum_id = $c", {"c": cid}).row(
        0, named=True
    )
    assert f"weights revision `{head['model_revision']}`" in body
    assert f"model: `{head['model']}`" in body and f"verifier: `{VERIFIER_VERSION}`" in body
    config = body.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(config) == json.loads(head["config"])

    def table_after(title: str) -> dict[tuple[str, ...], int]:
        lines = body.split(f"## {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
        cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
        return {tuple(c[:-1]): int(c[-1]) for c in cells}

    counts = expected(ledger, cid).group_by("family", "level", "stage").len()
    assert table_after("Counts by family × level × stage") == {
        (f, str(lv), str(s)): n for f, lv, s, n in counts.iter_rows()
    }
    rejected = ledger.sql(
        "SELECT reason, count(*) AS n FROM rejections WHERE curriculum_id = $c GROUP BY 1",
        {"c": cid},
    )
    assert table_after("Rejected, by reason") == {(r,): n for r, n in rejected.iter_rows()}
    assert "round(group_size / 8)" in body and "shuffle_dataset=False" in body
