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
from pipeline.scoring.commit import hedge

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


# sieve-math/9. The first three texts are SmolLM2-135M's: Sieve seed 2's held-out evaluation in
# benchmarks/real_curriculum.py (paid for 0 under sieve-math/8), and two training rollouts of
# Sieve seed 1 / seed 2 (an equation answer restated: withdrawn under sieve-math/8, kept now).
RESULTS_IN = "5 - 5 = 0\n\nThe final answer is 0.\n\nThe final calculation results in 5."
RESTATED_EQUATION = "6 + 3 = 9\n\nThe final answer is 9.\n\nThe final solution is 6 + 3 = 9."
EQUATION_ANSWER = "5 + 6 = 11\n\nThe final answer is 5 + 6 = 11.\n\nThe answer is: 11"


def test_a_later_result_that_differs_withdraws_the_answer() -> None:
    got = verify(RESULTS_IN, "0")
    assert (got.correct, got.detail) == (False, "retracted: restated")
    assert verify(RESULTS_IN.replace("in 5", "in 0"), "0").correct is True


@pytest.mark.parametrize(
    "tail",
    [
        "The answer is: 41",
        "The answer is therefore 41.",
        "The answer is \\(41\\).",
        "It is the answer, and the answer is therefore \\(41\\).",
        "The result comes to 41.",
        "The answer equals 41.",
        "The final result is **41**.",
        "So the answer is 40 + 1 = 41.",
    ],
)
def test_more_ways_of_restating_another_number_withdraw_it(tail: str) -> None:
    got = verify(f"The final answer is 42.\n\n{tail}", "42", "math")
    assert (got.correct, got.detail) == (False, "retracted: restated")
    assert verify(f"The final answer is 42.\n\n{tail}".replace("41", "42"), "42").correct is True


@pytest.mark.parametrize(
    "text",
    [
        # SmolLM2's, the every-rollout arm's seed 1 training: kept, its equation ends in 3
        "The problem is to find the answer of 15 mod 6, which is 3.\nThe final answer is 3.\n\n"
        "The solution is:\n15 mod 6 = 3",
        "The final answer is 3.\n\nThe solution is 15 \\bmod 6 = 3.",
    ],
)
def test_a_restated_remainder_counts_by_its_value(text: str) -> None:
    assert verify(text, "3").correct is True
    assert verify(text.replace("= 3", "= 4"), "3").detail == "retracted: restated"


@pytest.mark.parametrize("verifier", ["math", "exact"])
def test_a_restated_equation_counts_by_its_last_side(verifier: str) -> None:
    assert verify(RESTATED_EQUATION, "9", verifier).correct is True
    withdrawn = RESTATED_EQUATION.replace("6 + 3 = 9.", "6 + 3 = 10.")
    assert verify(withdrawn, "9", verifier).detail == "retracted: restated"


def test_an_equation_answer_restated_by_its_value_is_kept() -> None:
    assert verify(EQUATION_ANSWER, "11").correct is True
    got = verify(EQUATION_ANSWER.replace("is: 11", "is: 12"), "11")
    assert (got.correct, got.detail) == (False, "retracted: restated")


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("2 in the binary representation of 1", "1"),  # SmolLM2, count_bits (the number read: 1)
        ("2 in the binary representation of 1", "2"),
        ("12 apples in 3 baskets", "12"),
        ("2 times 3 which is 6", "6"),
    ],
)
def test_an_answer_that_opens_with_one_number_and_ends_with_another_is_wrong(
    answer: str, gold: str
) -> None:
    got = verify(f"The answer is {answer}.", gold)
    assert (got.correct, got.detail) == (False, "hedged: several values")
    assert hedge(answer, gold) == "several values"
    assert hedge(answer, gold, relations=False) is None  # the raw reading is left as it was


@pytest.mark.parametrize(
    ("answer", "gold"),
    [
        ("7 because 3 plus 4 makes 7", "7"),
        ("12 cm^{2}", "12"),
        ("5 apples", "5"),
        ("3 + 4 = 7", "7"),
        ("$9$ in total", "9"),
    ],
)
def test_one_number_with_words_or_an_equation_is_still_one_value(answer: str, gold: str) -> None:
    assert verify(f"The answer is {answer}.", gold).correct is True


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        # SmolLM2's, the every-rollout arm's seed 1 evaluation (31 mod 5; 5 * 3): paid under
        # sieve-math/8, which read neither "is:" nor ", which is the final answer"
        ("The final answer is 1.\n\nThe solution is: 31.", "1"),
        (
            "5 * 3 = 15\nThe answer is 15.\n\nIn this example, 5 is taken away from 3, which "
            "results in 1, which is the final answer.",
            "15",
        ),
    ],
)
def test_a_later_solution_or_final_answer_clause_withdraws_it(text: str, gold: str) -> None:
    got = verify(text, gold)
    assert (got.correct, got.detail) == (False, "retracted: restated")
    assert verify(text.replace("31", "1").replace("in 1, which", "in 15, which"), gold).correct
