"""Answer extraction: precedence (boxed, unless a later `Final Answer` phrase; > #### > Answer: >
raw), box groups, sentence-bounded phrases, list numbers, nested braces, linear time.

Test: `.venv/bin/pytest tests/scoring/test_extract.py -q`
"""

from __future__ import annotations

import time

import pytest

from pipeline.scoring import extract_answer


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


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 20_000,
        "{" * 100_000,
        "\\boxed{" + "{" * 50_000 + "}" * 50_000 + "}",
        "answer: " * 12_000,
        "####" * 25_000,
        "a" * 100_000,
        "\\" * 100_000,
        "\\boxed{1}" * 20_000,
        "\\boxed{1} and " * 10_000,
        "\\boxed{1}" + " " * 100_000 + "\\boxed{2}",
        "final answer is " * 6_000,
        "The answer is " + "." * 100_000,
        "Answer:\n" + "1. " * 30_000,
    ],
)
def test_extraction_is_linear(text: str) -> None:
    start = time.perf_counter()
    extract_answer(text)
    assert time.perf_counter() - start < 0.5
