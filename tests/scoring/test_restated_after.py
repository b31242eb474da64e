"""A later "N is the answer" with another N withdraws the marked answer (sieve-math/6); the
same N keeps it, in every verifier that reads markers (sieve-math/7).

The first text is SmolLM2-135M's, from dapo seed 1's held-out evaluation in
benchmarks/real_curriculum.py (`64 mod 2`, gold 0): it marks 0, then calls 64 the answer, and
sieve-math/5 paid it. The restated texts are SmolLM2's from sieve seed 1's training rollouts:
sieve-math/6 withdrew them in the exact and rg verifiers, which compared the restated number with
nothing (the rg case is in tests/problems/test_rg.py).
"""

from __future__ import annotations

import pytest

from pipeline.scoring import verify

DAPO_TEXT = (
    "4\n\nJustification: \nLet's break down the problem. We can use the formula 64 mod 2 = 0 mod 2 "
    "since 64 is congruent to 2 mod 2 modulo 2.\n\nThe final answer is 0.\n\nThe reason for "
    "this is that 64 is congruent to 2 mod 2 modulo 2, which means 64 is the answer we are "
    "looking for."
)


def test_the_dapo_text_is_withdrawn() -> None:
    got = verify(DAPO_TEXT, "0")
    assert (got.correct, got.detail) == (False, "retracted: restated")


@pytest.mark.parametrize(
    "tail",
    [
        "So 41 is the answer.",
        "Therefore 41 is the final answer.",
        "I believe $41$ is the correct answer.",
        "41 would be the answer, though.",
    ],
)
def test_another_number_called_the_answer_withdraws_it(tail: str) -> None:
    assert verify(f"The final answer is 42. {tail}", "42").detail == "retracted: restated"


@pytest.mark.parametrize(
    "tail",
    [
        "So 42 is the answer.",
        "I hope 42 is the correct answer!",
        "Indeed 40 + 2 = 42 is the right answer.",
        "1.5 is the result of halving 3.",  # a result, not the answer
        "The reason is that 64 is congruent to 2.",
    ],
)
def test_the_same_number_or_other_prose_keeps_it(tail: str) -> None:
    assert verify(f"The final answer is 42. {tail}", "42").correct is True


@pytest.mark.parametrize(
    "text",
    [
        "The final answer is 18.\n\n18 is the final answer.",
        "The final answer is 0.\n\nSo, the answer is 0.",
        "The final answer is 0.\n\n```python\nresult = 0\n```\n\nThis will give you 0.",
    ],
)
def test_the_exact_verifier_keeps_a_restated_answer(text: str) -> None:
    gold = text.split("is ")[1].split(".")[0]
    assert verify(text, gold, "exact").correct is True
    assert verify(text.replace(gold, "7"), gold, "exact").correct is False  # still wrong


def test_the_exact_verifier_still_withdraws_another_number() -> None:
    got = verify("The final answer is 18.\n\n17 is the final answer.", "18", "exact")
    assert (got.correct, got.detail) == (False, "retracted: restated")


def test_a_percent_is_not_a_whole_gold_divided_by_100() -> None:
    """SmolLM2 in sieve seed 1's curation: `217 mod 4` (gold 1), paid under sieve-math/6."""
    text = (
        "1. The problem is to find the remainder when 217 is divided by 4.\n2. The answer is "
        "\\boxed{217}.\n\n217 is 217, which is 100% of the given value, so the final answer "
        "is 100%."
    )
    assert verify(text, "1").correct is False
    assert verify("The final answer is 25%.", "0.25").correct is True
    assert verify("The final answer is 25%.", "25").correct is True
