"""Scored groups land in the ledger as one run and its rollouts."""

from __future__ import annotations

import polars as pl

from pipeline.jobs.curate.rollouts import RunInfo, record_run
from pipeline.problems import generate
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.scoring import VERIFIER_VERSION
from pipeline.store import Ledger


def completion(text: str, reason: str = "stop") -> Completion:
    return Completion(text=text, token_ids=tuple(range(len(text))), finish_reason=reason)  # type: ignore[arg-type]


def test_record_run_scores_and_writes_one_transaction(ledger: Ledger) -> None:
    problems = generate("arith", [3], 3, seed=0)
    answers = problems["answer"].to_list()
    groups = [
        [completion(answers[0]), completion("nope"), completion("", "length")],
        [completion(answers[1])] * 3,
        [completion("0.5x")],  # groups may differ in size
    ]
    info = RunInfo("screen", "tiny", "rev1", "hf", 3, SamplingParams(1.0, seed=4))
    info, rows = record_run(ledger, info, problems, groups)
    assert info.run_id.startswith("screen-")
    assert rows.height == 7
    stored = ledger.sql("SELECT * FROM rollouts ORDER BY problem_id, sample_idx")
    assert stored.height == 7
    g = ledger.sql("SELECT problem_id, n, k FROM group_stats").sort("problem_id")
    expected = {problems["problem_id"][0]: (3, 1), problems["problem_id"][1]: (3, 3)}
    for pid, n, k in g.iter_rows():
        if pid in expected:
            assert (n, k) == expected[pid]
    run = ledger.sql("SELECT * FROM sampling_runs").to_dicts()[0]
    assert run["verifier_version"] == VERIFIER_VERSION and run["status"] == "finished"
    assert run["seed"] == 4 and run["group_size"] == 3
    first = stored.filter(pl.col("problem_id") == problems["problem_id"][0])
    assert first["finish_reason"].to_list() == ["stop", "stop", "length"]
    assert first["n_tokens"].to_list() == [len(answers[0]), 4, 0]
