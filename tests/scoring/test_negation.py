"""Negation is a class, not a word (sieve-math/10): a committed answer that carries any negating
word is not paid, wherever the word sits (in `\\text{}`, a styled wrapper, a bare box, after a
phrase marker); a correction after the answer in the same words withdraws it.

Before sieve-math/10 the hedge scan knew `not`, `no`, `never`, `isn't`, `false`, `wrong` and
`incorrect`: `\\boxed{\\text{not } 42}` was refused, but `\\boxed{\\text{cannot } 42}`,
`\\boxed{\\text{none } 42}`, `\\boxed{\\text{doesn't } 42}`, `\\boxed{\\text{isn’t } 42}` (a
typographic apostrophe) and `\\boxed{\\text{negative } 42}` were paid for 42 (all of the words
below but the seven, in every placement). The mirror: a gold that is itself such a word
(`\\text{None}`), working that negates before the marked answer, and pleasantries after it are
still paid.

Test: `.venv/bin/pytest tests/scoring/test_negation.py -q`
"""

from __future__ import annotations

import pytest

from pipeline.scoring import verify, verify_batch

# One or more of each kind: contractions (any `n't`, with either apostrophe, and without one),
# `cannot`, negative pronouns and adverbs, exclusions, denials, degree words, a sign in words.
WORDS = [
    "not", "no", "never", "isn't", "isn’t", "isnt", "can't", "can’t", "cant", "cannot",
    "doesn't", "don't", "won't", "wasn't", "aren't", "couldn't", "shouldn't", "ain't", "none",
    "nothing", "nobody", "nowhere", "neither", "nor", "nope", "nay", "without", "except",
    "excluding", "but", "false", "untrue", "wrong", "incorrect", "invalid", "impossible",
    "denied", "rejected", "refuted", "hardly", "scarcely", "non", "negative", "minus", "NEVER",
    "Cannot",
]  # fmt: skip
PLACEMENTS = [
    "The final answer is $\\boxed{{\\text{{{w} }} {g}}}$",
    "The final answer is $\\boxed{{\\text{{{w}}} \\, {g}}}$",
    "The final answer is $\\boxed{{{w} {g}}}$",
    "The final answer is $\\boxed{{\\textbf{{{w}}}\\ {g}}}$",
    "The final answer is $\\boxed{{\\mathrm{{{w}}}~{g}}}$",
    "The final answer is $\\boxed{{\\text{{it is {w} }}{g}}}$",
    "The final answer is $\\boxed{{{g} \\text{{ ({w})}}}}$",
    "The final answer is {w} {g}.",
    "Answer: {w} {g}",
    "Final Answer: The final answer is $\\text{{{w} }}{g}$. I hope it is correct.",
    "#### {w} {g}",
]
GOLDS = [7, 42, 105, -15]


def test_a_negating_word_in_the_committed_answer_is_never_paid() -> None:
    pairs = [
        (placement.format(w=word, g=g), str(g))
        for word in WORDS
        for placement in PLACEMENTS
        for g in GOLDS
    ]
    verdicts = verify_batch([c for c, _ in pairs], [g for _, g in pairs], timeout=10.0)
    paid = [c for (c, _), v in zip(pairs, verdicts, strict=True) if v.correct]
    errors = [c for (c, _), v in zip(pairs, verdicts, strict=True) if v.reason == "verifier_error"]
    assert len(pairs) == 2024
    assert paid == [], paid[:10]
    assert errors == []


@pytest.mark.parametrize("word", ["cannot", "none", "doesn't", "isn’t", "neither", "negative"])
def test_the_detail_names_the_word(word: str) -> None:
    verdict = verify(f"The final answer is $\\boxed{{\\text{{{word} }} 42}}$", "42")
    assert verdict.correct is False
    assert verdict.detail == f"hedged: {word.replace('’', chr(39))}"


@pytest.mark.parametrize("text", ["isn't 42", "cannot 42", "none 42", "negative 42"])
def test_the_raw_reading_refuses_a_short_negated_answer_too(text: str) -> None:
    assert verify(text, "42", marker_required=False).correct is False


@pytest.mark.parametrize(
    "tail",
    [
        "42 is false.",
        "That's false.",
        "That’s wrong.",
        "42 is untrue.",
        "This is invalid.",
        "But 42 can't be right.",
        "That cannot be correct.",
        "It isn’t right.",
        "Which isn't the answer.",
        "Never mind.",
    ],
)
def test_a_negation_after_the_answer_withdraws_it(tail: str) -> None:
    verdict = verify(f"The final answer is $\\boxed{{42}}$. {tail}", "42")
    assert verdict.correct is False
    assert verdict.detail.startswith("retracted: ")


@pytest.mark.parametrize(
    ("text", "gold"),
    [
        ("The final answer is $\\boxed{\\text{None}}$", "\\text{None}"),
        ("The final answer is $\\boxed{\\text{no solution}}$", "\\text{No solution}"),
        ("The final answer is $\\boxed{\\text{impossible}}$", "\\text{impossible}"),
        ("The final answer is $\\boxed{\\text{No}}$", "\\text{No}"),
        ("We can't use 5, and 7 doesn't work either; none of 1, 2, 3 fit.\n\\boxed{42}", "42"),
        ("It isn’t 41 and it cannot be 43. The final answer is 42.", "42"),
        ("The final answer is $\\boxed{42}$. I hope it is correct. Don't hesitate to ask!", "42"),
        ("The final answer is $\\boxed{42}$. A negative count is impossible, so 42 it is.", "42"),
        ("The final answer is $\\boxed{-42}$", "-42"),
        ("The answer is 42, not 41.", "42"),
    ],
)
def test_right_answers_around_negations_are_still_paid(text: str, gold: str) -> None:
    verdict = verify(text, gold, timeout=10.0)
    assert verdict.correct is True, verdict.detail
