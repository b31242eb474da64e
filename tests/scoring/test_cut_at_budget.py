"""A completion cut at its token budget is not paid for an answer that runs to the cut.

The first case is the text SmolLM2-135M wrote in uniform seed 1 of benchmarks/real_curriculum.py
(linear 2, `11x = 99`, gold 9): "The final answer is 981" over and over until the 256-token budget
cut the last one to "The final answer is 9", which the verifier paid before this rule.
"""

from __future__ import annotations

import polars as pl
import pytest

from grpo_core.trainer import Item, Sample
from pipeline.jobs.curate.rollouts import score_groups
from pipeline.jobs.train.curriculum_batches import verifier_reward
from pipeline.sampling.base import Completion
from pipeline.scoring import verify, verify_batch
from pipeline.scoring.verifiers import CUT_DETAIL, runs_to_cut

LOOP = (
    "To solve for x, divide both sides by 11: x = 99 / 11.\n"
    + "The final answer is 981\n" * 12
    + "The final answer is 9"
)


def test_the_looping_text_is_paid_uncut_and_refused_cut() -> None:
    finished = verify(LOOP, "9")
    assert finished.correct is True  # read as a finished text, its last answer is 9
    cut = verify(LOOP, "9", truncated=True)
    assert (cut.correct, cut.reward, cut.reason, cut.detail) == (False, 0.0, "wrong", CUT_DETAIL)


@pytest.mark.parametrize(
    "text",
    [
        "The final answer is 9",  # may go on as 98
        "The final answer is 9.",  # may go on as 9.5
        "The final answer is 9 ",  # may go on as 9 000 (space-grouped digits)
        "So x = 9, and \\boxed{9}",  # a digit after a box joins it (\boxed{9}0 reads 90)
        "\\boxed{9",  # the box never closed
        "9",  # the raw bare-answer reading: the whole text is the answer
    ],
)
def test_an_answer_touching_the_cut_is_not_paid(text: str) -> None:
    marker = not text.startswith("9")
    assert verify(text, "9", marker_required=marker).correct is True
    assert runs_to_cut(text)
    cut = verify(text, "9", marker_required=marker, truncated=True)
    assert cut.correct is False and cut.detail == CUT_DETAIL


@pytest.mark.parametrize(
    "text",
    [
        "The final answer is 9. Let me also check: 11 * 9 = 99, which",
        "The final answer is 9\nTo check, 11 * 9",
        "The answer is \\boxed{9} because 11 times 9 is",
    ],
)
def test_an_answer_finished_before_the_cut_is_paid(text: str) -> None:
    assert not runs_to_cut(text)
    assert verify(text, "9", truncated=True).correct is True


def test_a_wrong_cut_answer_keeps_its_own_detail() -> None:
    cut = verify("The final answer is 7", "9", truncated=True)
    assert cut.correct is False and cut.detail != CUT_DETAIL


def test_exact_verifier_follows_the_rule() -> None:
    assert verify("Answer: abc", "abc", "exact").correct is True
    assert verify("Answer: abc", "abc", "exact", truncated=True).detail == CUT_DETAIL


def test_verify_batch_takes_one_flag_per_item() -> None:
    texts = ["The final answer is 9", "The final answer is 9. Done here."]
    got = verify_batch(texts, ["9", "9"], truncated=[True, True])
    assert [v.correct for v in got] == [False, True]
    got = verify_batch(texts, ["9", "9"], truncated=[False, True])
    assert [v.correct for v in got] == [True, True]
    with pytest.raises(ValueError, match="truncated"):
        verify_batch(texts, ["9", "9"], truncated=[True])


def test_curation_reads_the_samplers_finish_reason() -> None:
    problems = pl.DataFrame(
        {
            "problem_id": ["p"],
            "answer": ["9"],
            "verifier": ["math"],
            "question": ["Solve for x: 11x = 99"],
            "family": ["linear"],
            "params": ["{}"],
        }
    )
    group = [
        Completion(text=LOOP, token_ids=(1,) * 256, finish_reason="length"),
        Completion(text=LOOP, token_ids=(1,) * 250, finish_reason="stop"),
    ]
    rows = score_groups("r", problems, [group]).rollouts
    assert rows.sort("sample_idx")["correct"].to_list() == [False, True]


def test_training_reward_reads_the_samples_truncation() -> None:
    item = Item(prompt="Solve for x: 11x = 99", answer="9", group_size=2, verifier="math")
    samples = [Sample((1, 2), LOOP, truncated=True), Sample((1, 2), LOOP, truncated=False)]
    scores = verifier_reward([item, item], samples)
    assert scores.correct == [False, True]
    assert scores.rewards == [0.0, 1.0]


def test_a_frames_finish_reason_gives_the_flags() -> None:
    """Rescore rows and backtest pools pass their stored finish_reason (a pool without the
    column reads every text as finished)."""
    from pipeline.jobs.curate.rollouts import cut_flags

    frame = pl.DataFrame({"finish_reason": ["length", "stop", None]})
    assert cut_flags(frame) == [True, False, False]
    assert cut_flags(frame.drop("finish_reason")) is False
