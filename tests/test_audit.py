"""The verifier audit inside curation (pipeline/jobs/curate/audit.py): which rollouts are audited
(seeded, resumable, every guessed verdict), that the rows land in the chunk's transaction, that eval
runs and code problems are left out, the curation's one-line warning, and that the audit's knobs
change no curation key.

Test: `.venv/bin/pytest tests/test_audit.py -q`
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
import pipeline.jobs.curate.rollouts as rollouts_module
from flows.curate import curate
from pipeline.jobs.curate import curation
from pipeline.jobs.curate.audit import AUDIT_SCHEMA, audit_rows, selected
from pipeline.jobs.curate.curation import Policy, curation_key
from pipeline.jobs.curate.rollouts import RunInfo, Scored
from pipeline.scoring import GUESSED_DETAILS, Verdict
from pipeline.selection import CurateConfig
from pipeline.selection.config import TINY_CURATE
from pipeline.store import Ledger
from tests.simulated import RATES, reachable_problems, simulated_policy

CFG = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=40)
GUESS = sorted(GUESSED_DETAILS)[0]
KEY = ["run_id", "problem_id", "sample_idx"]


def policy(cfg: CurateConfig = CFG) -> Policy:
    return simulated_policy(reachable_problems(cfg), RATES)


def first_chunk(pol: Policy, purpose: str = "screen") -> tuple[pl.DataFrame, RunInfo]:
    """The first chunk of a screen run over CFG's candidates, and the run's info."""
    problems = reachable_problems(CFG).filter(pl.col("split") == "train")
    info = curation.run_info(pol, purpose, CFG.screen_g, "k", CFG)
    return curation.chunks(problems, CFG)[0], info


def keys(ledger: Ledger, table: str, where: str = "true") -> set[tuple[Any, ...]]:
    query = f"SELECT run_id, problem_id, sample_idx FROM {table} WHERE {where}"
    return set(ledger.sql(query).rows())


def wrong_is_a_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wrong verdict is marked guessed (as the fast path marks a guessed reading)."""
    real = rollouts_module.verify_batch

    def guessing(*args: Any, **kwargs: Any) -> list[Verdict]:
        verdicts = real(*args, **kwargs)
        return [replace(v, detail=GUESS) if v.correct is False else v for v in verdicts]

    monkeypatch.setattr(rollouts_module, "verify_batch", guessing)


# ---------------------------------------------------------------------- which rollouts


def test_selection_is_a_seeded_share_of_the_rollouts() -> None:
    def picks(seed: int) -> list[bool]:
        return [selected(seed, "screen-k", f"p{i}", j, 0.02) for i in range(2000) for j in range(8)]

    first = picks(3)
    assert 0.015 < sum(first) / len(first) < 0.025
    assert first == picks(3) and first != picks(4)
    assert not any(selected(3, "r", "p", j, 0.0) for j in range(1000))
    assert all(selected(3, "r", "p", j, 1.0) for j in range(1000))


def test_a_curation_audits_exactly_the_seeded_rollouts_and_a_resumed_run_the_same(
    ledger: Ledger,
) -> None:
    result = curate(ledger, policy(), CFG)
    audited = ledger.sql("SELECT * FROM verifier_audit")
    assert audited.height > 0 and set(audited["why"]) == {"sample"}
    assert set(audited["verifier_version"]) == {rollouts_module.VERIFIER_VERSION}
    stored = keys(ledger, "rollouts")
    expected = {(r, p, j) for r, p, j in stored if selected(CFG.seed, r, p, j, CFG.audit_share)}
    assert set(audited.select(KEY).rows()) == expected
    before = ledger.checksum("verifier_audit")
    screened = ledger.sql(
        "SELECT DISTINCT problem_id FROM rollouts WHERE run_id = $r", {"r": result.screen_run}
    )
    chunk = curation.chunks(screened, CFG)[1]
    ids = {"run": result.screen_run, "ids": chunk["problem_id"].to_list()}
    lost = {}
    for table in ("rollouts", "rollout_steps", "verifier_audit"):  # a chunk lost in a crash
        where = "WHERE run_id = $run AND list_contains($ids, problem_id)"
        lost[table] = ledger.run(f"SELECT count(*) FROM {table} {where}", ids)[0][0]
        ledger.run(f"DELETE FROM {table} {where}", ids)
    assert lost["verifier_audit"] > 0
    ledger.run("UPDATE sampling_runs SET status = 'crashed' WHERE run_id = $r", {"r": ids["run"]})
    again = policy()
    curate(ledger, again, CFG)  # resumed: the lost chunk is drawn and audited again
    assert again.sampler.calls == lost["rollouts"]  # type: ignore[attr-defined]
    assert ledger.checksum("verifier_audit") == before


def test_guessed_verdicts_are_always_audited(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong_is_a_guess(monkeypatch)
    pol = policy()
    chunk, info = first_chunk(pol)
    curation.sample_chunk(ledger, pol, chunk, info, CFG.seed, 0, 0.02)
    audited = ledger.sql("SELECT * FROM verifier_audit")
    guessed = keys(ledger, "rollouts", "NOT correct")
    assert guessed and guessed <= set(audited.select(KEY).rows())
    guesses = audited.filter(pl.col("why") == "guess")
    assert set(guesses.select(KEY).rows()) == guessed
    assert set(guesses["sieve_detail"]) == {GUESS}
    samples = audited.filter(pl.col("why") == "sample")
    assert samples.height > 0 and not samples["sieve_detail"].is_in([GUESS]).any()


def test_share_zero_audits_only_the_guesses(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = policy()
    chunk, info = first_chunk(pol)
    curation.sample_chunk(ledger, pol, chunk, info, CFG.seed, 0, 0.0)
    assert ledger.checksum("verifier_audit")[0] == 0  # no guess, nothing sampled
    wrong_is_a_guess(monkeypatch)
    with Ledger.memory() as other:
        curation.sample_chunk(other, pol, chunk, info, CFG.seed, 0, 0.0)
        audited = other.sql("SELECT * FROM verifier_audit")
        assert set(audited["why"]) == {"guess"}
        assert set(audited.select(KEY).rows()) == keys(other, "rollouts", "NOT correct")


def test_audit_rows_land_in_the_chunks_transaction(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    pol = policy()
    chunk, info = first_chunk(pol)
    real = curation.audit_rows

    def refused(*args: Any) -> pl.DataFrame:  # a row the CHECK constraint refuses
        return real(*args).with_columns(pl.lit("bogus").alias("why"))

    monkeypatch.setattr(curation, "audit_rows", refused)
    with pytest.raises(Exception, match=r"(?i)constraint"):
        curation.sample_chunk(ledger, pol, chunk, info, CFG.seed, 0, 1.0)
    for table in ("rollouts", "rollout_steps", "verifier_audit"):
        assert ledger.checksum(table)[0] == 0, table
    monkeypatch.undo()
    written = curation.sample_chunk(ledger, pol, chunk, info, CFG.seed, 0, 1.0)
    assert ledger.checksum("verifier_audit")[0] == written == chunk.height * CFG.screen_g


def test_eval_runs_and_code_problems_are_not_audited() -> None:
    pol = policy()
    chunk, info = first_chunk(pol, purpose="eval")
    assert "verifier_audit" not in curation.sample_rows(pol, chunk, info, CFG.seed, 0, 1.0)
    chunk, info = first_chunk(pol)
    assert "verifier_audit" not in curation.sample_rows(pol, chunk, info, CFG.seed, 0)  # no share
    code = chunk.with_columns(pl.lit("code").alias("verifier"))
    rollouts = pl.DataFrame(
        {"run_id": "r", "problem_id": code["problem_id"], "sample_idx": 0, "completion": "1"}
    )
    verdict = Verdict(1.0, True, "correct", {"correctness": 1.0}, GUESS)
    scored = Scored(rollouts, pl.DataFrame(), (verdict,) * code.height)
    rows = audit_rows(code, scored, CFG.seed, 1.0)
    assert rows.height == 0 and dict(rows.schema) == AUDIT_SCHEMA


# ---------------------------------------------------------------------- the warning


def test_the_curation_warns_in_one_line_when_a_family_disagrees(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: False)
    result = curate(ledger, policy(), CFG)  # every audited right answer now disagrees
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("warning: verifier audit:"), err
    (line,) = result.warnings
    assert err[0] == f"warning: {line}"
    rate = audit_module.by_family(ledger, [result.screen_run, result.refine_run])
    assert rate["family"].to_list() == ["arith"] and rate["disagreement_rate"][0] > 0.05
    assert f"arith {rate['disagreement_rate'][0]:.1%}" in line
    assert f"`sieve audit {result.curriculum_id}`" in line
    quiet = curate(ledger, policy(), CFG.model_copy(update={"audit_warn": 1.0}))
    assert quiet.warnings == [] and capsys.readouterr().err == ""
    assert quiet.curriculum_id == result.curriculum_id  # the same curation


def test_no_warning_when_math_verify_agrees(
    ledger: Ledger, capsys: pytest.CaptureFixture[str]
) -> None:
    result = curate(ledger, policy(), CFG)
    assert result.warnings == [] and capsys.readouterr().err == ""
    n, d = ledger.run("SELECT count(*), count(*) FILTER (WHERE disagree) FROM verifier_audit")[0]
    assert n > 0 and d == 0


# ---------------------------------------------------------------------- config and keys


def test_the_audit_knobs_change_no_curation_key() -> None:
    # keys from before the audit existed (the values pinned by tests/selection/test_process_signal)
    assert curation_key(CurateConfig(), "rev-a") == "638be73c7bbc"
    assert curation_key(CurateConfig.model_validate(TINY_CURATE), "rev-a") == "08600da5b49a"
    for update in ({"audit_share": 0.0}, {"audit_share": 1.0}, {"audit_warn": 0.5}):
        key = curation_key(CurateConfig.model_validate(update), "rev-a")
        assert key == "638be73c7bbc", update
    assert (CurateConfig().audit_share, CurateConfig().audit_warn) == (0.02, 0.05)


@pytest.mark.parametrize(
    "values",
    [{"audit_share": -0.1}, {"audit_share": 1.5}, {"audit_share": float("nan")},
     {"audit_warn": float("inf")}, {"audit_warn": -1.0}],
)  # fmt: skip
def test_the_audit_knobs_are_checked(values: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(values))):
        CurateConfig.model_validate(values)
