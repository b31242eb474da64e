"""Held-out evaluation: the same problems every time, both runs recorded, pass rates by level."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set
from pipeline.sampling.base import Completion, SamplingParams
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
