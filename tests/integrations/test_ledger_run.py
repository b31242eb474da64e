"""LedgerRun, the core of the TRL and verl integrations: picks that are a function of (seed, step,
the evidence they read), groups written as a training run of the lineage, a resumed run and a
run from the trained weights reading them, and datasets the ledger cannot vouch for refused."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.integrations.ledger_run import SAMPLE_SCHEMA, LedgerRun
from pipeline.problems import generate
from pipeline.selection.stats import learnability
from pipeline.store import Ledger


@pytest.fixture
def ids(ledger: Ledger) -> list[str]:
    frame = generate("arith", [2, 3], 12, seed=0, heldout_pct=0)
    ledger.write("problems", frame)
    return frame["problem_id"].to_list()


def samples(picks: dict[str, list[bool]]) -> pl.DataFrame:
    """One row per sample: problem → its samples' verdicts (reward 1.0 when correct)."""
    rows = [(p, "x", 3, "stop", float(c), c) for p, cs in picks.items() for c in cs]
    return pl.DataFrame(rows, schema=SAMPLE_SCHEMA, orient="row")


def score(run: LedgerRun, key: str, upto: int, now: int) -> float:
    """E[p(1 − p)] of one prompt under the evidence of steps ≤ upto."""
    alpha, beta = run.model(run.evidence(upto), [key], [run.cell_of[key]], now)
    return float(learnability(alpha, beta)[0])


def test_a_pick_is_a_function_of_seed_step_and_the_evidence_it_reads(
    ledger: Ledger, ids: list[str]
) -> None:
    run = LedgerRun(ledger, ids, "rev-base", "run-a", seed=3)
    same = LedgerRun(ledger, ids, "rev-base", "run-a", seed=3)
    first = run.pick(2, 4, upto=-1)
    assert first == same.pick(2, 4, upto=-1) and len(set(first)) == 4
    assert {run.pick(s, 4, upto=-1)[0] for s in range(6)} != {first[0]}  # steps differ
    run.observe(0, samples({ids[first[0]]: [False] * 4}))
    assert run.pick(2, 4, upto=-1) == first  # evidence past `upto` is not read
    assert len(run.evidence(0).rows) == 1 and run.steps == {0}


def test_all_wrong_groups_lower_a_prompts_learnability(ledger: Ledger, ids: list[str]) -> None:
    run = LedgerRun(ledger, ids, "rev-base", "run-a")
    run.observe(0, samples({ids[0]: [False] * 4, ids[1]: [True, False, True, False]}))
    assert score(run, ids[0], 0, 1) < score(run, ids[0], -1, 1)  # flat: less to learn
    assert score(run, ids[1], 0, 1) > score(run, ids[0], 0, 1)


def test_groups_land_as_a_training_run_that_the_lineage_continues(
    ledger: Ledger, ids: list[str]
) -> None:
    run = LedgerRun(ledger, ids, "rev-base", "run-a")
    run.start("test", {"lr": 1e-6}, base_model="tiny")
    run.record(0, samples({ids[0]: [False] * 4, ids[1]: [True, False, True, True]}))
    run.checkpoint(1, "rev-step1", "/tmp/ckpt-1")
    run.record(1, samples({ids[2]: [True] * 4}))
    run.finish()
    groups = ledger.sql(
        "SELECT step, problem_id, k, n, policy FROM train_group_stats WHERE train_id = 'run-a' "
        "ORDER BY step, problem_id"
    )
    assert groups.height == 3 and groups["n"].to_list() == [4, 4, 4]
    assert groups.filter(pl.col("step") == 1)["policy"].to_list() == ["rev-step1"]
    assert groups.filter(pl.col("step") == 0)["policy"].unique().to_list() == ["rev-base"]
    assert ledger.run("SELECT status FROM train_runs WHERE train_id = 'run-a'") == [("finished",)]
    # a run from the step-1 weights reads the groups of steps ≤ 1 (step 1's sampled by them)
    later = LedgerRun(ledger, ids, "rev-step1", "run-b")
    assert later.clock == 1 and sorted(r[0] for r in later.prior) == sorted(ids[:3])
    assert sorted(r[4] for r in later.prior) == [0, 0, 1]  # each at its update
    assert later.own == [] and later.steps == set()
    # the same run resumed holds its own groups, not twice
    resumed = LedgerRun(ledger, ids, "rev-base", "run-a")
    assert resumed.steps == {0, 1} and len(resumed.own) == 3
    # another run from the base reads run-a's groups as a sibling's, each at run-a's clock
    other = LedgerRun(ledger, ids, "rev-base", "run-c")
    assert sorted((r[0], r[4]) for r in other.prior) == sorted(
        [(ids[0], 0), (ids[1], 0), (ids[2], 1)]
    )
    resumed.observe(1, samples({ids[3]: [True, False]}))  # a resumed step replaces its groups
    assert [r[1] for r in resumed.own if r[0] == 1] == [ids[3]]


def test_a_pool_smaller_than_the_batch_gives_the_best_prompts_a_second_group(
    ledger: Ledger, ids: list[str]
) -> None:
    run = LedgerRun(ledger, ids[:3], "rev-base", "run-a")
    picks = run.pick(0, 5, upto=-1)
    assert len(picks) == 5 and set(picks) == {0, 1, 2}
    assert np.bincount(picks).max() == 2


def test_problems_the_ledger_cannot_vouch_for_are_refused(ledger: Ledger, ids: list[str]) -> None:
    with pytest.raises(SieveError, match="1 of the dataset's 2 problems are not in the ledger"):
        LedgerRun(ledger, [ids[0], "nope"], "rev-base", "run-a")
    held = generate("arith", [4], 2, seed=1, heldout_pct=100)
    ledger.write("problems", held)
    with pytest.raises(SieveError, match="held out for evaluation"):
        LedgerRun(ledger, [ids[0], held["problem_id"][0]], "rev-base", "run-a")
    with pytest.raises(SieveError, match="row 1 has no problem_id"):
        LedgerRun(ledger, [ids[0], ""], "rev-base", "run-a")
