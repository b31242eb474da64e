"""Held-out evaluation: the same problems every time, both runs recorded, pass@1 by level from
the ledger's heldout_pass1 view (greedy and sampled told apart by temperature)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set, overall
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.budget import SamplingConfig
from pipeline.store import Ledger


class AnswersArithOnly:
    """Right on arithmetic prompts, wrong elsewhere."""

    backend = "fake"
    model_name = "fake"

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        out = []
        for p in prompts:
            text = self.answers.get(p, "wrong")
            out.append([Completion(text, (1,), "stop")] * n)
        return out


def test_heldout_set_is_fixed_and_held_out() -> None:
    a, b = heldout_set(5), heldout_set(5)
    assert a.drop("created_at").equals(b.drop("created_at"))
    assert set(a["split"]) == {"heldout"}
    assert a.group_by("family", "level").len()["len"].max() == 5


def test_evaluate_records_two_runs_and_reports_by_level(ledger: Ledger) -> None:
    problems = heldout_set(4)
    prompts_of = {q: f"{q}=" for q in problems["question"]}
    arith = problems.filter(pl.col("family") == "arith")
    answers = {f"{q}=": a for q, a in zip(arith["question"], arith["answer"], strict=True)}
    table = evaluate(
        AnswersArithOnly(answers), ledger, "rev", prompts_of, EvalConfig(samples=3), problems
    )
    by_family = table.group_by("family").agg(pl.col("greedy").mean(), pl.col("sampled").mean())
    rates = {f: (g, s) for f, g, s in by_family.iter_rows()}
    assert rates["arith"] == (1.0, 1.0)
    assert rates["word"] == (0.0, 0.0)
    runs = ledger.sql("SELECT purpose, group_size, temperature FROM sampling_runs ORDER BY 2")
    assert runs.rows() == [("eval", 1, 0.0), ("eval", 3, 1.0)]
    assert ledger.checksum("rollouts")[0] == problems.height * 4


class RightWhenSampled:
    """Right at temperature > 0, wrong when greedy: the two columns cannot be confused."""

    backend = "fake"
    model_name = "fake"

    def __init__(self, answers: dict[str, str]):
        self.answers = answers

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        right = params.temperature > 0
        return [
            [Completion(self.answers[p] if right else "wrong", (1,), "stop")] * n for p in prompts
        ]


def test_an_eval_table_of_levels_is_the_families_set_cut_to_those_levels() -> None:
    """{family: levels} evaluates those cells alone, on the very problems the whole family's
    set holds for them (so a figure on the cells compares with one on the whole family)."""
    cut = heldout_set(3, {"arith": "2-3", "linear": [1]})
    whole = heldout_set(3, ["arith", "linear"])
    wanted = ((pl.col("family") == "arith") & pl.col("level").is_in([2, 3])) | (
        (pl.col("family") == "linear") & (pl.col("level") == 1)
    )
    assert cut["problem_id"].to_list() == whole.filter(wanted)["problem_id"].to_list()
    cells = set(cut.select("family", "level").iter_rows())
    assert cells == {("arith", 2), ("arith", 3), ("linear", 1)}


def test_one_sample_at_temperature_one_is_the_sampled_column(ledger: Ledger) -> None:
    """eval_samples = 1 gives two runs of group size 1; the stored table (what a resumed
    training reads back) still tells them apart by temperature."""
    from pipeline.jobs.train.recorder import heldout_table

    problems = heldout_set(2, ["arith"])
    prompts_of = {q: f"{q}=" for q in problems["question"]}
    answers = {f"{q}=": a for q, a in zip(problems["question"], problems["answer"], strict=True)}
    cfg = EvalConfig(samples=1)
    table = evaluate(RightWhenSampled(answers), ledger, "rev", prompts_of, cfg, problems)
    assert set(table["greedy"]) == {0.0} and set(table["sampled"]) == {1.0}
    assert (overall(table, "greedy"), overall(table, "sampled")) == (0.0, 1.0)
    assert heldout_table(ledger, "rev").equals(table)


def test_temperature_zero_records_only_the_greedy_run(ledger: Ledger) -> None:
    problems = heldout_set(2, ["arith"])
    prompts_of = {q: f"{q}=" for q in problems["question"]}
    answers = {f"{q}=": a for q, a in zip(problems["question"], problems["answer"], strict=True)}
    cfg = EvalConfig(samples=4, sampling=SamplingConfig(temperature=0.0))
    table = evaluate(AnswersArithOnly(answers), ledger, "rev", prompts_of, cfg, problems)
    assert ledger.run("SELECT group_size, temperature FROM sampling_runs") == [(1, 0.0)]
    assert set(table["greedy"]) == {1.0} and table["sampled"].null_count() == table.height
    assert overall(table, "sampled") is None


# word levels 5 and 8 both draw this problem ("Pipe A fills a tank in 12 hours...", answer 2)
# among their first 16 held-out ones: found by listing heldout_set(16)'s repeated ids before it
# kept each problem once (533 rows, 532 distinct).
SHARED = "2e82be313aaef8f7"


def test_heldout_rows_are_distinct_problems() -> None:
    """Every row is its own problem, within each cell and across cells; a problem two levels
    draw stays in the lower one, and the later cell is not refilled (15 of 16)."""
    for per_level, families in [(16, None), (16, ["word"]), (5, None), (3, {"arith": "1-3"})]:
        problems = heldout_set(per_level, families)
        assert problems["problem_id"].n_unique() == problems.height, (per_level, families)
        by_cell = problems.group_by("family", "level").agg(
            pl.col("problem_id").n_unique(), pl.len()
        )
        assert (by_cell["problem_id"] == by_cell["len"]).all()
        assert by_cell["len"].max() == per_level
    word = heldout_set(16, ["word"])
    shared = word.filter(pl.col("problem_id") == SHARED)
    assert shared.select("family", "level").rows() == [("word", 5)]
    counts = dict(word.group_by("level").len().iter_rows())
    assert counts[5] == 16 and counts[8] == 15
    # a cut selection is the whole family's set filtered to it, the shared problem included
    cut = heldout_set(16, {"word": [8]})
    assert SHARED not in cut["problem_id"].to_list() and cut.height == 15
    assert cut.drop("created_at").equals(word.filter(pl.col("level") == 8).drop("created_at"))


def test_an_evaluation_scores_every_distinct_held_out_problem(ledger: Ledger) -> None:
    """Each held-out row is asked and scored, every sample of it, and the by-level table counts
    the same problems per cell as the held-out set holds (word 5 and 8 share a problem)."""
    problems = heldout_set(16, {"word": [5, 8]})
    prompts_of = {q: f"{q}=" for q in problems["question"]}
    table = evaluate(
        AnswersArithOnly({}), ledger, "rev", prompts_of, EvalConfig(samples=3), problems
    )
    scored = ledger.sql(
        "SELECT run_id, problem_id, count(*) AS n, count(reward) AS judged FROM rollouts "
        "GROUP BY ALL"
    )
    assert scored.height == 2 * problems.height  # greedy and sampled runs, every problem
    assert set(scored["problem_id"]) == set(problems["problem_id"])
    assert sorted(set(scored["n"])) == [1, 3] and (scored["judged"] == scored["n"]).all()
    held = dict(problems.group_by("level").len().iter_rows())
    assert dict(table.select("level", "problems").iter_rows()) == held == {5: 16, 8: 15}
