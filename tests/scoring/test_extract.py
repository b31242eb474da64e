"""Answer extraction: precedence (boxed > #### > Answer: > raw), nested braces, linear time.

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
    ],
)
def test_extraction_is_linear(text: str) -> None:
    start = time.perf_counter()
    extract_answer(text)
    assert time.perf_counter() - start < 0.5
