"""Every generated problem verifies against its own answer, and perturbed answers are rejected.

Uses `pipeline.scoring.verify` (the scoring package's verifier), so it checks that generators and
scorer agree on the canonical answer forms.
Run: `.venv/bin/pytest tests/problems/test_verify_roundtrip.py -q`.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.problems import FAMILIES, family_levels, generate
from pipeline.problems.base import canonical_number
from pipeline.scoring import verify

PER_LEVEL = 50


def perturbations(answer: str) -> list[str]:
    """answer +/- 1, numerator +/- 1 for fractions, sign flip for nonzero answers."""
    value = Fraction(answer)
    wrong = {value + 1, value - 1}
    if value.denominator > 1:
        wrong |= {Fraction(value.numerator + d, value.denominator) for d in (1, -1)}
    if value != 0:
        wrong.add(-value)
    wrong.discard(value)
    return sorted(canonical_number(w) for w in wrong)


def test_perturbations() -> None:
    assert perturbations("17/3") == sorted(["14/3", "20/3", "16/3", "6", "-17/3"])
    assert perturbations("0") == ["-1", "1"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_answers_verify_and_perturbations_fail(family: str) -> None:
    levels = family_levels(family)
    frame = generate(family, levels, PER_LEVEL * len(levels), seed=23)
    for question, answer, verifier in frame.select("question", "answer", "verifier").iter_rows():
        verdict = verify(answer, answer, verifier, marker_required=False)
        assert verdict.correct is True, (question, answer, verdict.reason)
        assert verdict.reward is not None and verdict.reward > 0
        for wrong in perturbations(answer):
            bad = verify(wrong, answer, verifier, marker_required=False)
            assert bad.correct is False, (question, answer, wrong, bad.reason)  # not an error


@st.composite
def family_level_seed(draw: st.DrawFn) -> tuple[str, int, int]:
    family = draw(st.sampled_from(sorted(FAMILIES)))
    level = draw(st.sampled_from(family_levels(family)))
    return family, level, draw(st.integers(min_value=0, max_value=2**32))


@settings(max_examples=60, deadline=None)
@given(family_level_seed())
def test_any_seed_verifies_in_every_answer_style(case: tuple[str, int, int]) -> None:
    """For any seed, the answer passes bare, boxed and after '####'; perturbations fail."""
    family, level, seed = case
    frame = generate(family, [level], 5, seed=seed)
    for answer, verifier in frame.select("answer", "verifier").iter_rows():
        for shown in (answer, f"so the result is \\boxed{{{answer}}}", f"work...\n#### {answer}"):
            assert verify(shown, answer, verifier, marker_required=False).correct is True, (
                shown,
                answer,
            )
        for wrong in perturbations(answer):
            assert verify(f"\\boxed{{{wrong}}}", answer, verifier).correct is False, (wrong, answer)
