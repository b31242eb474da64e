"""`rollout_steps` (migration 0006): written with the rollouts in one transaction, idempotent,
added to an existing ledger, and read through the `step_accuracy_by_family` and
`first_wrong_step` views, also by `sieve sql`.

Test: `.venv/bin/pytest tests/store/test_rollout_steps.py -q`
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import pipeline.jobs.curate.rollouts as rollouts_module
import pipeline.store.ledger as ledger_module
from pipeline.jobs.curate.rollouts import STEP_SCHEMA, RunInfo, record_run, score_groups
from pipeline.problems import generate
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.store import Ledger, migrations
from tests.cli_runner import run_cli

KEY = ["run_id", "problem_id", "sample_idx", "step_index"]


def completion(text: str) -> Completion:
    return Completion(text=text, token_ids=tuple(range(len(text))), finish_reason="stop")


def scored_run(ledger: Ledger) -> tuple[pl.DataFrame, pl.DataFrame, list[list[str]]]:
    problems = generate("arith", [1], 2, seed=0)
    a = problems["answer"][0]
    texts = [
        [a, "9" + a, f"{a} = {a}\n1+1 = 3\n\\boxed{{{a}}}"],
        ["", "2+2=4\n\\boxed{0}"],
    ]
    info = RunInfo("screen", "tiny", "rev1", "hf", 3, SamplingParams(1.0, seed=1), run_id="run-a")
    record_run(ledger, info, problems, [[completion(t) for t in g] for g in texts])
    return problems, ledger.sql("SELECT * FROM rollout_steps ORDER BY ALL"), texts


def test_round_trip_matches_the_verdicts(ledger: Ledger) -> None:
    problems, stored, texts = scored_run(ledger)
    a = problems["answer"][0]
    p0, p1 = problems["problem_id"].to_list()
    rows = {(r["problem_id"], r["sample_idx"]): [] for r in stored.iter_rows(named=True)}
    for r in stored.iter_rows(named=True):
        rows[(r["problem_id"], r["sample_idx"])].append(
            (r["step_index"], r["char_start"], r["char_end"], r["correct"], r["kind"])
        )
    assert rows[(p0, 0)] == [(i, i, i + 1, True, "prefix") for i in range(len(a))]
    assert [c for *_, c, _ in rows[(p0, 1)]] == [False] * (len(a) + 1)  # "9" + answer
    third = texts[0][2]
    assert [(third[s:e], ok, k) for _, s, e, ok, k in rows[(p0, 2)]] == [
        (f"{a} = {a}", True, "equation"),
        ("1+1 = 3", False, "equation"),
    ]
    assert (p1, 0) not in rows  # empty completion: nothing to fragment
    assert rows[(p1, 1)] == [(0, 0, 5, True, "equation")]
    components = ledger.sql(
        "SELECT reward_components FROM rollouts WHERE problem_id = $p AND sample_idx = 2",
        {"p": p0},
    )["reward_components"][0]
    assert json.loads(components)["step_accuracy"] == 0.5
    assert dict(zip(stored.columns, stored.dtypes, strict=True)).keys() == STEP_SCHEMA.keys()


def test_writing_again_adds_nothing(ledger: Ledger) -> None:
    problems, first, texts = scored_run(ledger)
    scored = score_groups("run-a", problems, [[completion(t) for t in g] for g in texts])
    assert ledger.write_batch(scored.tables()) == {"rollouts": 0, "rollout_steps": 0}
    assert ledger.checksum("rollout_steps")[0] == first.height


def test_steps_and_rollouts_land_in_one_transaction(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = rollouts_module.step_frame

    def broken(*args: object) -> pl.DataFrame:  # a row the CHECK constraint refuses
        return real(*args).with_columns(pl.lit("bogus").alias("kind"))  # type: ignore[arg-type]

    monkeypatch.setattr(rollouts_module, "step_frame", broken)
    with pytest.raises(Exception, match=r"(?i)constraint"):
        scored_run(ledger)
    for table in ("sampling_runs", "rollouts", "rollout_steps"):
        assert ledger.checksum(table)[0] == 0, table


def test_an_existing_ledger_gets_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sieve.duckdb"
    older = [m for m in migrations() if m[0] < 6]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0006
    with Ledger.open(path=path) as led:
        assert not led.run(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'rollout_steps'"
        )[0][0]
    monkeypatch.undo()
    with Ledger.open(path=path) as led:
        assert 6 in led.applied_migrations()
        assert led.sql("SELECT * FROM first_wrong_step").height == 0
        _, stored, _ = scored_run(led)
        assert stored.height > 0


def hand_built(ledger: Ledger) -> None:
    """Two problems (arith 1, linear 2), one run; fragments written by hand."""
    now = datetime(2026, 1, 1, tzinfo=UTC)
    problems = pl.DataFrame(
        {
            "problem_id": ["pa", "pl"],
            "source": ["gen:arith", "gen:linear"],
            "family": ["arith", "linear"],
            "level": [1, 2],
            "params": ["{}", "{}"],
            "question": ["1+1", "2x=6, x"],
            "answer": ["2", "3"],
            "verifier": ["math", "math"],
            "split": ["train", "train"],
            "created_at": [now, now],
        }
    )
    run = pl.DataFrame(
        {"run_id": ["r"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
         "backend": ["hf"], "group_size": [2], "status": ["finished"]}
    )  # fmt: skip
    steps = [  # (problem, sample, step, start, end, correct, kind)
        ("pa", 0, 0, 0, 1, True, "prefix"),
        ("pa", 0, 1, 1, 2, False, "prefix"),
        ("pa", 1, 0, 0, 1, True, "prefix"),
        ("pl", 0, 0, 0, 6, True, "equation"),
        ("pl", 0, 1, 7, 12, True, "equation"),
        ("pl", 0, 2, 13, 18, False, "equation"),
        ("pl", 0, 3, 19, 24, False, "equation"),
        ("pl", 1, 0, 0, 5, True, "equation"),
    ]
    frame = pl.DataFrame([("r", *s) for s in steps], schema=STEP_SCHEMA, orient="row")
    ledger.write_batch({"problems": problems, "sampling_runs": run, "rollout_steps": frame})


def test_step_accuracy_by_family(ledger: Ledger) -> None:
    hand_built(ledger)
    got = ledger.sql(
        "SELECT family, level, kind, model_revision, rollouts, steps, correct_share "
        "FROM step_accuracy_by_family ORDER BY family"
    )
    assert got.rows() == [
        ("arith", 1, "prefix", "rev", 2, 3, pytest.approx(2 / 3)),
        ("linear", 2, "equation", "rev", 2, 5, pytest.approx(3 / 5)),
    ]


def test_first_wrong_step(ledger: Ledger) -> None:
    hand_built(ledger)
    got = ledger.sql(
        "SELECT problem_id, sample_idx, steps, correct_steps, first_wrong_step, first_wrong_char "
        "FROM first_wrong_step ORDER BY ALL"
    )
    assert got.rows() == [
        ("pa", 0, 2, 1, 1, 1),
        ("pa", 1, 1, 1, None, None),
        ("pl", 0, 4, 2, 2, 13),
        ("pl", 1, 1, 1, None, None),
    ]


def test_sieve_sql_reads_both_views(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    with Ledger.open(home) as led:
        hand_built(led)
    for query, expected in [
        ("SELECT family, steps FROM step_accuracy_by_family ORDER BY 1", "arith,3"),
        ("SELECT count(first_wrong_step) AS n FROM first_wrong_step", "n\n2"),
    ]:
        code, out, err = run_cli(
            ["sql", "--home", str(home), "--format", "csv", "--", query], capsys
        )
        assert code == 0 and err == "", err
        assert expected in out, out
