"""Answer extraction: precedence (boxed, unless a later `Final Answer` phrase; > #### > Answer: >
raw), box groups, sentence-bounded phrases, list numbers, nested braces, linear time.

Test: `.venv/bin/pytest tests/scoring/test_extract.py -q`
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from pipeline.scoring import extract_answer
from tests.scoring.work import assert_linear


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("so \\boxed{5}.", ("5", True)),
        ("\\boxed{1} then \\boxed{2}", ("2", True)),
        ("\\boxed{\\frac{\\sqrt{3}}{2}}", ("\\frac{\\sqrt{3}}{2}", True)),
        ("\\boxed{\\{1, 2\\}}", ("\\{1, 2\\}", True)),
        ("\\fbox{7}", ("7", True)),
        ("\\boxed {7}", ("7", True)),
        ("\\boxed{\\boxed{8}}", ("8", True)),
        ("cut off \\boxed{42", ("42", True)),
        ("#### 72 \n more", ("72", True)),
        ("Answer: 3 \\boxed{4}", ("4", True)),
        ("#### 5\nThe answer is 6", ("5", True)),
        ("The Answer is 6.", ("6", True)),
        ("ANSWER: x = 2\nbecause", ("x = 2", True)),
        ("17/3", ("17/3", False)),
        ("  42 \n", ("42", False)),
        ("", (None, False)),
        ("   \n", (None, False)),
        ("\\boxed{}", (None, True)),
        ("####", (None, True)),
        # a Final Answer phrase after the last box wins; an empty one leaves the box
        ("\\boxed{200} ... Final Answer: The final answer is $10,455$. I hope", ("$10,455$", True)),
        ("Final Answer: The final answer is $\\boxed{5}$.", ("5", True)),
        ("\\boxed{5}\n\nFinal Answer:", ("5", True)),
        # answers end with their sentence; a numbered list after the marker is not an answer
        ("The final answer is 12,000,023. I hope it is correct.", ("12,000,023", True)),
        ("The answer is 3.5.", ("3.5", True)),
        ("The answer is 0.333...", ("0.333...", True)),
        ('The answer is "$12$".', ("$12$", True)),
        ("**Answer:** 7", ("7", True)),
        ("Answer:\n1. Define the desired output", (None, True)),
        ("Answer:\n\n42", ("42", True)),
        # boxes separated only by connectors are one answer; prose between them is not
        ("\\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}.", ("-2, 1", True)),
        ("$\\boxed{1}\\boxed{2}$", ("1, 2", True)),
        ("\\boxed{5}.\n\n\\boxed{5}", ("5", True)),
        ("\\boxed{5} no, \\boxed{6}", ("6", True)),
        ("First \\boxed{3}, wait, actually \\boxed{5}", ("5", True)),
    ],
)
def test_extract(completion: str, expected: tuple[str | None, bool]) -> None:
    assert extract_answer(completion) == expected


# Worst cases for a scanner, each built at a size n (the sizes they were once timed at).
LONG: dict[str, tuple[Callable[[int], str], int]] = {
    "boxes opened": (lambda n: "\\boxed{" * n, 20_000),
    "braces opened": (lambda n: "{" * n, 100_000),
    "one deep box": (lambda n: "\\boxed{" + "{" * n + "}" * n + "}", 50_000),
    "answer: repeated": (lambda n: "answer: " * n, 12_000),
    "#### repeated": (lambda n: "####" * n, 25_000),
    "letters": (lambda n: "a" * n, 100_000),
    "backslashes": (lambda n: "\\" * n, 100_000),
    "boxes in a row": (lambda n: "\\boxed{1}" * n, 20_000),
    "boxes joined by and": (lambda n: "\\boxed{1} and " * n, 10_000),
    "two boxes far apart": (lambda n: "\\boxed{1}" + " " * n + "\\boxed{2}", 100_000),
    "final answer is repeated": (lambda n: "final answer is " * n, 6_000),
    "a sentence of dots": (lambda n: "The answer is " + "." * n, 100_000),
    "a numbered list": (lambda n: "Answer:\n" + "1. " * n, 30_000),
}


@pytest.mark.parametrize("case", sorted(LONG))
def test_extraction_is_linear(case: str) -> None:
    """Work counted, not timed (tests/scoring/work.py): twice the input, at most twice the
    Python steps and the characters scanned."""
    build, n = LONG[case]
    assert_linear(extract_answer, build, n)


def test_the_count_catches_a_quadratic_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: with no cap on the boxes joined into one answer, each box of a row
    looks back (`rfind`) over the whole text before it, and the characters scanned quadruple."""
    monkeypatch.setattr(sys.modules["pipeline.scoring.extract"], "_MAX_GROUP", 10**9)
    build, _ = LONG["boxes in a row"]
    with pytest.raises(AssertionError):
        assert_linear(extract_answer, build, 1_000)
