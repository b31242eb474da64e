"""A later "N is the answer" with another N withdraws the marked answer (sieve-math/6).

The first text is SmolLM2-135M's, from dapo seed 1's held-out evaluation in
benchmarks/real_curriculum.py (`64 mod 2`, gold 0): it marks 0, then calls 64 the answer, and
sieve-math/5 paid it.
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
