"""`pipeline.core.hooks`: one progress protocol; curation, evaluation and training all report
through it (the flows' own events are checked in tests/flows/test_runtime.py)."""

from __future__ import annotations

import polars as pl

from pipeline.core.hooks import ProgressEvent, report
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set
from pipeline.sampling.simulated import SimulatedSampler
from pipeline.store import Ledger


def test_report_sends_one_event_and_nothing_without_a_hook() -> None:
    seen: list[ProgressEvent] = []
    report(seen.append, "train", "train", 3, 10, {"kl": 0.1})
    report(None, "train", "train", 4, 10)
    assert seen == [ProgressEvent("train", "train", 3, 10, {"kl": 0.1})]


def test_evaluation_reports_each_mode(ledger: Ledger) -> None:
    problems = heldout_set(2, ["arith"])
    answers = dict(zip(problems["question"], problems["answer"], strict=True))
    sampler = SimulatedSampler(answers, dict.fromkeys(answers, 0.5))
    prompts_of = {q: q for q in answers}
    seen: list[ProgressEvent] = []
    table = evaluate(
        sampler, ledger, "rev", prompts_of, EvalConfig(per_level=2, samples=2), problems,
        progress=seen.append,
    )  # fmt: skip
    assert [(e.job, e.stage, e.done, e.total) for e in seen] == [
        ("eval", "greedy", 1, 2),
        ("eval", "sampled", 2, 2),
    ]
    assert isinstance(table, pl.DataFrame) and table.height > 0
