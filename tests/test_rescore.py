"""Rescoring stored completions (pipeline/jobs/curate/rescore.py): new verdicts land beside the
stored ones under the current verifier version, the rollouts stay byte-identical, a second rescore
adds nothing, another version adds a second set, and `verdict_changes` lists what changed.

Test: `.venv/bin/pytest tests/test_rescore.py -q`
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
import pipeline.jobs.curate.rescore as rescore_module
from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.curate.curation import CurateResult
from pipeline.jobs.curate.rescore import rescore
from pipeline.scoring import VERIFIER_VERSION, StepContext, Verdict
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.simulated import RATES, reachable_problems, simulated_policy, use_verifier_version

CFG = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=40)
STORED = ("rollouts", "rollout_steps", "sampling_runs", "verifier_audit")
NEWER = "sieve-math/99+math-verify/0.9.0"  # a version after the current one


@pytest.fixture
def curated(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> tuple[Ledger, CurateResult]:
    """A ledger with one curation of the simulated policy (the audit's second opinion, which
    is not under test here, stubbed)."""
    with monkeypatch.context() as m:
        m.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: None)
        result = curate(ledger, simulated_policy(reachable_problems(CFG), RATES), CFG)
    return ledger, result


def stored(ledger: Ledger) -> dict[str, tuple[int, int]]:
    return {t: ledger.checksum(t) for t in STORED}


def rollouts_of(ledger: Ledger, runs: list[str]) -> int:
    query = "SELECT count(*) FROM rollouts WHERE list_contains($r, run_id)"
    return int(ledger.run(query, {"r": runs})[0][0])


def test_rescore_adds_verdicts_beside_untouched_rollouts_once(
    curated: tuple[Ledger, CurateResult],
) -> None:
    ledger, result = curated
    before = stored(ledger)
    done = rescore(ledger, "latest")
    runs = [result.screen_run, result.refine_run]
    assert done.runs == runs and done.label == f"curation {result.curriculum_id}"
    assert done.version == VERIFIER_VERSION and done.judged == rollouts_of(ledger, runs) > 0
    assert stored(ledger) == before  # the rollouts (and runs, steps, audit) are not rewritten
    same = ledger.sql(
        "SELECT count(*) AS n, count(*) FILTER (WHERE r.correct = v.correct AND r.reward = "
        "v.reward) AS equal, list(DISTINCT v.verifier_version) AS versions "
        "FROM rescored_verdicts AS v JOIN rollouts AS r USING (run_id, problem_id, sample_idx)"
    ).row(0)
    assert same == (done.judged, done.judged, [VERIFIER_VERSION])  # the same verifier agrees
    assert done.changes["rescored"].sum() == done.judged and done.changes["changed"].sum() == 0
    assert ledger.sql("SELECT * FROM verdict_changes").height == 0
    rescored = ledger.checksum("rescored_verdicts")
    again = rescore(ledger, "latest")
    assert again.judged == 0 and ledger.checksum("rescored_verdicts") == rescored
    assert again.changes.equals(done.changes) and stored(ledger) == before


def test_a_newer_verifier_adds_a_second_set_and_keeps_the_first(
    curated: tuple[Ledger, CurateResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, _ = curated
    first = rescore(ledger, "latest")
    kept = ledger.sql("SELECT * FROM rescored_verdicts ORDER BY ALL")
    before = stored(ledger)
    use_verifier_version(monkeypatch, NEWER)
    second = rescore(ledger, "latest")
    assert second.version == NEWER and second.judged == first.judged
    counts = ledger.sql(
        "SELECT verifier_version, count(*) AS n FROM rescored_verdicts GROUP BY ALL ORDER BY ALL"
    )
    assert counts.rows() == [(VERIFIER_VERSION, first.judged), (NEWER, first.judged)]
    old_rows = ledger.sql(
        "SELECT * FROM rescored_verdicts WHERE verifier_version = $v ORDER BY ALL",
        {"v": VERIFIER_VERSION},
    )
    assert old_rows.equals(kept) and stored(ledger) == before


def flip_first(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The rescore's verifier turns its first verdict around; returns each call's arguments."""
    real = rescore_module.verify_batch
    calls: list[dict[str, Any]] = []

    def flipping(*args: Any, **kwargs: Any) -> list[Verdict]:
        calls.append({"args": args, **kwargs})
        verdicts = real(*args, **kwargs)
        if verdicts:
            v = verdicts[0]
            flipped = not v.correct
            reason = "correct" if flipped else "wrong"
            verdicts[0] = replace(v, correct=flipped, reward=float(flipped), reason=reason)
        return verdicts

    monkeypatch.setattr(rescore_module, "verify_batch", flipping)
    return calls


def test_verdict_changes_lists_a_changed_verdict(
    curated: tuple[Ledger, CurateResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, result = curated
    flip_first(monkeypatch)
    done = rescore(ledger, result.screen_run)
    assert done.runs == [result.screen_run] and done.label == f"run {result.screen_run}"
    first = ledger.sql(
        "SELECT r.problem_id, r.sample_idx, r.correct, r.completion, p.answer, p.family "
        "FROM rollouts AS r JOIN problems AS p USING (problem_id) WHERE run_id = $r "
        "ORDER BY problem_id, sample_idx LIMIT 1",
        {"r": result.screen_run},
    ).row(0, named=True)
    changes = ledger.sql("SELECT * FROM verdict_changes")
    assert changes.height == 1
    row = changes.row(0, named=True)
    assert (row["run_id"], row["problem_id"], row["sample_idx"]) == (
        result.screen_run, first["problem_id"], first["sample_idx"]
    )  # fmt: skip
    assert row["old_correct"] == first["correct"] and row["new_correct"] == (not first["correct"])
    assert (row["old_version"], row["new_version"]) == (VERIFIER_VERSION, VERIFIER_VERSION)
    assert row["family"] == first["family"] and row["gold_answer"] == first["answer"]
    assert row["completion_excerpt"] == first["completion"][:200]
    way = "wrong_to_correct" if row["new_correct"] else "correct_to_wrong"
    totals = done.changes.select("changed", "correct_to_wrong", "wrong_to_correct", "other").sum()
    assert totals.row(0, named=True) == {
        "changed": 1,
        "correct_to_wrong": int(way == "correct_to_wrong"),
        "wrong_to_correct": int(way == "wrong_to_correct"),
        "other": 0,
    }


def test_each_run_is_judged_by_its_prompt_format_with_step_contexts(
    curated: tuple[Ledger, CurateResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, result = curated
    ledger.run(  # the screen run as a chat model's: its answers count only from a marker
        "UPDATE sampling_runs SET prompt_format = 'chat' WHERE run_id = $r",
        {"r": result.screen_run},
    )
    calls = flip_first(monkeypatch)
    rescore(ledger, "latest")
    (call,) = calls
    marker = call["marker_required"]
    order = ledger.sql(
        "SELECT run_id FROM rollouts WHERE list_contains($r, run_id) ORDER BY run_id, "
        "problem_id, sample_idx",
        {"r": [result.screen_run, result.refine_run]},
    )["run_id"]
    assert marker == [run == result.screen_run for run in order]
    contexts = call["contexts"]
    assert len(contexts) == len(order) and all(isinstance(c, StepContext) for c in contexts)
    assert {c.family for c in contexts} == {"arith"} and all(c.question for c in contexts)


def test_an_unknown_run_is_refused_and_nothing_written(
    curated: tuple[Ledger, CurateResult],
) -> None:
    ledger, _ = curated
    with pytest.raises(SieveError, match="screen-nope"):
        rescore(ledger, "screen-nope")
    assert ledger.checksum("rescored_verdicts")[0] == 0


def test_a_rescore_reads_whether_the_sampler_cut_the_completion() -> None:
    """The stored finish_reason reaches the verifier: an answer running to the budget's cut is
    not paid on a rescore either (pipeline/scoring/verifiers.py, "Cut at the budget")."""
    rows = pl.DataFrame(
        {
            "run_id": ["r", "r"],
            "problem_id": ["p", "p"],
            "sample_idx": [0, 1],
            "completion": ["The final answer is 9"] * 2,
            "finish_reason": ["length", "stop"],
            "answer": ["9", "9"],
            "verifier": ["math", "math"],
            "question": ["Solve for x: 11x = 99"] * 2,
            "family": ["linear"] * 2,
            "params": [None, None],
            "prompt_format": ["chat", "chat"],
        },
        schema_overrides={"params": pl.String},
    )
    judged = rescore_module.judge(rows)
    assert judged.sort("sample_idx")["correct"].to_list() == [False, True]
