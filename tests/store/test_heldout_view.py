"""The held-out pass@1 views (migration 0005): a hand computation on a small constructed case,
greedy told from sampled by temperature (never group size), verifier errors counted as wrong,
each revision's newest run shown, and the readers (`sieve eval`'s table, `sieve stats`, the
report) built on them.

Test: `pytest tests/store/test_heldout_view.py`.
"""

from __future__ import annotations

import pytest

from pipeline.jobs.analysis.evaluate import overall, revision_table, runs_table
from pipeline.jobs.analysis.stats import heldout_by_revision
from pipeline.store import Ledger
from tests.store.eval_rows import Outcomes, add_problems, add_run, slow_pass1

CELLS = {"a1": ("arith", 1), "a2": ("arith", 1), "a3": ("arith", 2), "w1": ("word", 1)}
GREEDY: Outcomes = {"a1": [True], "a2": [False], "a3": [True], "w1": [None]}
SAMPLED: Outcomes = {
    "a1": [True, True, False, None],  # 2/4: the error is a wrong answer, not a smaller group
    "a2": [False, False, False, False],  # 0/4
    "a3": [True, True, True, True],  # 4/4
    "w1": [None, True, None, False],  # 1/4
}


@pytest.fixture
def constructed(ledger: Ledger) -> Ledger:
    add_problems(ledger, CELLS)
    add_run(ledger, "g", "rev-a", 0.0, GREEDY, minute=0)
    add_run(ledger, "s", "rev-a", 1.0, SAMPLED, minute=1)
    add_run(ledger, "screen", "rev-a", 1.0, {p: [True] * 4 for p in CELLS}, purpose="screen")
    return ledger


def test_the_view_equals_a_hand_computation(constructed: Ledger) -> None:
    rows = constructed.sql(
        "SELECT run_id, mode, family, level, problems, samples, errors, pass1 "
        "FROM heldout_pass1 ORDER BY run_id, family, level"
    ).rows()
    assert rows == [
        ("g", "greedy", "arith", 1, 2, 2, 0, 0.5),  # (1 + 0) / 2
        ("g", "greedy", "arith", 2, 1, 1, 0, 1.0),
        ("g", "greedy", "word", 1, 1, 1, 1, 0.0),  # the error counts as wrong
        ("s", "sampled", "arith", 1, 2, 8, 1, 0.25),  # (2/4 + 0/4) / 2
        ("s", "sampled", "arith", 2, 1, 4, 0, 1.0),
        ("s", "sampled", "word", 1, 1, 4, 2, 0.25),  # 1/4, two errors
    ]  # the screen run on the same problems is not an eval run: absent
    runs = constructed.sql(
        "SELECT run_id, mode, latest, problems, samples, errors, pass1 FROM heldout_runs "
        "ORDER BY run_id"
    ).rows()
    assert runs == [
        ("g", "greedy", True, 4, 4, 1, 0.5),  # (1 + 0 + 1 + 0) / 4
        ("s", "sampled", True, 4, 16, 3, 0.4375),  # (2/4 + 0 + 1 + 1/4) / 4
    ]


@pytest.mark.parametrize(("run_id", "outcomes"), [("g", GREEDY), ("s", SAMPLED)])
def test_the_view_matches_a_slow_loop(constructed: Ledger, run_id: str, outcomes: Outcomes) -> None:
    got = constructed.sql(
        "SELECT family, level, pass1, errors FROM heldout_pass1 WHERE run_id = $r", {"r": run_id}
    )
    assert {(f, lv): (p, e) for f, lv, p, e in got.rows()} == slow_pass1(CELLS, outcomes)


def test_the_run_table_and_its_overall_read_the_view(constructed: Ledger) -> None:
    table = runs_table(constructed, ["g", "s"])
    assert table.columns == ["family", "level", "problems", "greedy", "sampled", "errors"]
    assert table.rows() == [
        ("arith", 1, 2, 0.5, 0.25, 1),
        ("arith", 2, 1, 1.0, 1.0, 0),
        ("word", 1, 1, 0.0, 0.25, 3),  # errors of both runs
    ]
    overall_of = dict(constructed.run("SELECT mode, pass1 FROM heldout_runs"))
    assert overall(table, "greedy") == pytest.approx(overall_of["greedy"])
    assert overall(table, "sampled") == pytest.approx(overall_of["sampled"])
    assert revision_table(constructed, "rev-a").equals(table)


def test_one_sample_per_problem_at_a_temperature_is_sampled_not_greedy(ledger: Ledger) -> None:
    """eval_samples = 1: both runs have group size 1; only the temperature tells them apart."""
    add_problems(ledger, CELLS)
    greedy = {"a1": [True], "a2": [False], "a3": [False], "w1": [False]}
    sampled = {"a1": [False], "a2": [True], "a3": [True], "w1": [True]}
    add_run(ledger, "g1", "rev-a", 0.0, greedy, minute=0)
    add_run(ledger, "s1", "rev-a", 0.7, sampled, minute=1)
    modes = dict(ledger.run("SELECT run_id, mode FROM heldout_runs"))
    assert modes == {"g1": "greedy", "s1": "sampled"}
    table = revision_table(ledger, "rev-a")
    assert table.select("greedy", "sampled").rows() == [(0.5, 0.5), (0.0, 1.0), (0.0, 1.0)]
    assert (overall(table, "greedy"), overall(table, "sampled")) == (0.25, 0.75)
    wide = heldout_by_revision(ledger)
    assert wide["rev-a"].to_list() == [0.5, 1.0, 1.0]  # the sampled run, not the greedy one


def test_each_revision_shows_its_newest_run_of_each_mode(constructed: Ledger) -> None:
    add_run(constructed, "s-new", "rev-a", 1.0, {p: [True, True] for p in CELLS}, minute=5)
    add_run(constructed, "b-s", "rev-b", 1.0, {p: [False] for p in CELLS}, minute=9)
    latest = dict(constructed.run("SELECT run_id, latest FROM heldout_runs"))
    assert latest == {"g": True, "s": False, "s-new": True, "b-s": True}
    table = revision_table(constructed, "rev-a")
    assert table["greedy"].to_list() == [0.5, 1.0, 0.0]  # still the one greedy run
    assert table["sampled"].to_list() == [1.0, 1.0, 1.0]  # the newer sampled run
    wide = heldout_by_revision(constructed)
    assert wide.columns == ["family", "level", "rev-a", "rev-b"]  # first evaluated first
    assert wide["rev-b"].to_list() == [0.0, 0.0, 0.0]
    # a revision without a greedy run has an empty greedy column, not a 0.0
    only_sampled = revision_table(constructed, "rev-b")
    assert only_sampled["greedy"].null_count() == only_sampled.height
    assert overall(only_sampled, "greedy") is None


def test_no_eval_runs_give_empty_tables(ledger: Ledger) -> None:
    assert runs_table(ledger, []).is_empty()
    assert revision_table(ledger, "nope").is_empty()
    assert heldout_by_revision(ledger).is_empty()
    assert ledger.query("report_heldout").is_empty()
