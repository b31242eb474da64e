"""`rollouts.token_ids` (migration 0013): each completion's sampled ids, written by
`score_groups` (NULL where the sampler reported none), carried through a curation shard, and
added to a ledger created before the migration, whose older rows keep NULL and still replay.

Test: `.venv/bin/pytest tests/store/test_rollout_token_ids.py -q`
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import pipeline.store.ledger as ledger_module
from pipeline.jobs.curate import shards
from pipeline.jobs.curate.rollouts import RunInfo, record_run, score_groups
from pipeline.jobs.train.replay import stored_groups
from pipeline.policy.tokenizer import build_tokenizer
from pipeline.problems import generate
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.store import Ledger, migrations

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=16)


def info(run_id: str) -> RunInfo:
    return RunInfo("screen", "tiny", "rev", "hf", 2, PARAMS, run_id=run_id)


def test_score_groups_keeps_the_sampled_ids_and_null_where_there_are_none(
    ledger: Ledger,
) -> None:
    problems = generate("arith", [1], 2, seed=0)
    groups = [
        [Completion("12", (21, 22, 2), "stop"), Completion("", (), "stop")],
        # an openai server without return_token_ids: no ids, only a count
        [Completion("34", (), "length", n_tokens=2), Completion("5", (25,), "length")],
    ]
    rows = score_groups("r", problems, groups).rollouts
    assert rows.schema["token_ids"] == pl.List(pl.Int32)
    assert rows["token_ids"].to_list() == [[21, 22, 2], None, None, [25]]
    record_run(ledger, info("r"), problems, groups)
    stored = ledger.sql("SELECT token_ids, n_tokens FROM rollouts ORDER BY problem_id, sample_idx")
    assert stored.rows() == [([21, 22, 2], 3), (None, 0), (None, 2), ([25], 1)]
    assert ledger.sql("SELECT typeof(token_ids) AS t FROM rollouts LIMIT 1")["t"][0] == "INTEGER[]"


def test_ids_travel_through_a_shard_and_an_older_shard_commits_without_them(
    tmp_path: Path,
) -> None:
    problems = generate("arith", [1], 2, seed=0)
    groups = [[Completion("12", (21, 22, 2), "stop")], [Completion("7", (27,), "length")]]
    new = score_groups("run-new", problems, groups).tables()
    old = score_groups("run-old", problems, groups).tables()
    old["rollouts"] = old["rollouts"].drop("token_ids")  # a shard written before 0013
    refs = [
        shards.write_shard(new, str(tmp_path), "run-new", 0, "f-new"),
        shards.write_shard(old, str(tmp_path), "run-old", 0, "f-old"),
    ]
    with Ledger.memory() as led:
        assert [shards.commit_shard(led, ref) for ref in refs] == [2, 2]
        stored = led.sql("SELECT run_id, token_ids FROM rollouts ORDER BY run_id, problem_id")
        assert stored.rows() == [
            ("run-new", [21, 22, 2]),
            ("run-new", [27]),
            ("run-old", None),
            ("run-old", None),
        ]
        assert [shards.commit_shard(led, ref) for ref in refs] == [0, 0]  # idempotent


def test_an_existing_ledger_gets_the_column_and_its_rows_still_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sieve.duckdb"
    tok = build_tokenizer()
    eos, unk = tok.eos_token_id, tok.unk_token_id
    problems = generate("arith", [1], 2, seed=0)
    a, b = problems["problem_id"].to_list()
    older = [m for m in migrations() if m[0] < 13]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0013
    with Ledger.open(path=path) as led:
        assert "token_ids" not in led.table_columns("rollouts")
        rows = score_groups("s-old", problems[:1], [[Completion("12", (21, 22), "stop")]])
        run = pl.DataFrame(
            {"run_id": ["s-old"], "purpose": ["screen"], "model": ["tiny"],
             "model_revision": ["rev"], "backend": ["hf"], "group_size": [1],
             "temperature": [1.0], "top_p": [1.0], "max_new_tokens": [16],
             "status": ["finished"]}
        )  # fmt: skip
        # what that Sieve wrote: no token_ids column
        led.write_batch({"sampling_runs": run, "rollouts": rows.rollouts.drop("token_ids")})
        before = led.sql("SELECT * FROM rollouts").rows()
        groups_before = led.sql("SELECT * FROM group_stats").rows()
    monkeypatch.undo()
    with Ledger.open(path=path) as led:
        assert 13 in led.applied_migrations()
        assert led.table_columns("rollouts")[-1] == "token_ids"
        assert led.sql("SELECT * EXCLUDE (token_ids) FROM rollouts").rows() == before
        assert led.sql("SELECT token_ids FROM rollouts").rows() == [(None,)]
        assert led.sql("SELECT * FROM group_stats").rows() == groups_before
        # a new run stores its ids; replay reads both: the old row re-tokenised, the new exact
        record_run(led, info("s-new"), problems[1:], [[Completion("1", (21, unk), "stop")]])
        got = stored_groups(led, ["s-old", "s-new"], tok, temperature=1.0, max_new_tokens=16)
    assert got.retokenised_off == 0
    assert [s.token_ids for s in got.groups[a]] == [(21, 22, eos)]
    assert [s.token_ids for s in got.groups[b]] == [(21, unk, eos)]
