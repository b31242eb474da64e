"""`marker_required=True` (chat models): answers only from a marker, no credit for a copied
question, unevaluated arithmetic or a list number; `verify_batch` takes one flag or one per item;
the bundled GSM8K-style worked solutions stay 100 % correct in both modes.

Test: `.venv/bin/pytest tests/scoring/test_marker_mode.py -q`
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from pipeline.problems.ingest import split_gsm_answer
from pipeline.scoring import VERIFIER_VERSION, is_guess, verify, verify_batch


@pytest.mark.parametrize(
    ("completion", "gold", "reason", "detail"),
    [
        # the three false positives measured on SmolLM2-135M-Instruct (issue 15)
        ("Solve the equation 75 + 74 - 77 =", "72", "no_answer", "no answer marker"),
        ("\\boxed{40+9*69}", "661", "wrong", "unevaluated expression"),
        ("1. Define the desired output...", "1", "no_answer", "no answer marker"),
        ("The answer is:\n1. Define the desired output", "1", "no_answer", "no answer found"),
        ("Answer: 75 + 74 - 77 =", "72", "wrong", "unevaluated expression"),
        ("\\boxed{2^{10}}", "1024", "wrong", "unevaluated expression"),
        ("\\boxed{(619+60) \\bmod 65}", "29", "wrong", "unevaluated expression"),
        ("So 17/3 it is.", "17/3", "no_answer", "no answer marker"),
        ("17/3", "17/3", "no_answer", "no answer marker"),
        ("\\boxed{}", "5", "no_answer", "no answer found"),
        # answered through a marker
        ("\\boxed{72}", "72", "correct", "fast_path"),
        ("75 + 74 - 77 = \\boxed{72}", "72", "correct", "fast_path"),
        ("\\boxed{75 + 74 - 77 = 72}", "72", "correct", "fast_path"),
        ("\\boxed{17/3}", "17/3", "correct", "fast_path"),
        ("\\boxed{\\frac{17}{3}}", "17/3", "correct", "fast_path"),
        ("The answer is 12 apples.", "12", "correct", "fast_path"),
        ("Final Answer: The final answer is $-4$. I hope it is correct.", "-4", "correct", ""),
        ("work...\n#### 1,234", "1234", "correct", "fast_path"),
        ("\\boxed{73}", "72", "wrong", "fast_path"),
        ("\\boxed{\\sqrt{4}}", "2", "correct", "math_verify"),  # a closed form, not arithmetic
    ],
)
def test_marker_required(completion: str, gold: str, reason: str, detail: str) -> None:
    verdict = verify(completion, gold, marker_required=True, timeout=10.0)
    assert verdict.reason == reason, verdict
    if detail:
        assert verdict.detail == detail, verdict
    if reason == "no_answer":
        assert verdict.correct is False and verdict.components["correctness"] == 0.0


def test_marker_mode_is_the_default_and_raw_mode_is_opt_in() -> None:
    assert verify("17/3", "17/3").reason == "no_answer"  # safe by default
    assert verify("17/3", "17/3", marker_required=False).reason == "correct"
    assert verify("5+2", "7", timeout=10.0, marker_required=False).reason == "correct"  # raw
    assert verify("5+2", "7").reason == "no_answer"
    assert verify_batch(["17/3"], ["17/3"])[0].reason == "no_answer"
    assert verify("\\boxed{5+2}", "7", marker_required=True).detail == "unevaluated expression"


def test_symbolic_golds_are_not_checked_for_arithmetic() -> None:
    verdict = verify("\\boxed{(x+1)^2}", "x^2+2x+1", marker_required=True, timeout=10.0)
    assert verdict.reason == "correct"


def test_exact_verifier_marker_mode() -> None:
    assert verify("B", "B", "exact", marker_required=False).correct is True
    assert verify("B", "B", "exact").reason == "no_answer"
    assert verify("\\boxed{B}. Wait, actually C.", "B", "exact").detail.startswith("retracted")
    assert verify("\\boxed{B}", "B", "exact", marker_required=True).correct is True


def test_batch_flags() -> None:
    completions = ["17/3", "17/3", "\\boxed{17/3}"]
    golds = ["17/3"] * 3
    reasons = [
        v.reason for v in verify_batch(completions, golds, marker_required=[False, True, True])
    ]
    assert reasons == ["correct", "no_answer", "correct"]
    assert [v.reason for v in verify_batch(completions, golds, marker_required=True)] == [
        "no_answer",
        "no_answer",
        "correct",
    ]
    with pytest.raises(ValueError, match="marker_required"):
        verify_batch(completions, golds, marker_required=[True])


def test_guessed_readings_are_marked_for_the_audit() -> None:
    """A decimal comma (or space-grouped digits) judged equal is a guess (`is_guess`), which
    curation's verifier audit always re-checks; a clean parse is not."""
    assert verify("\\boxed{1,5}", "1.5").detail == "fast_path_guess"
    assert is_guess(verify("\\boxed{0,25}", "0.25"))
    assert not is_guess(verify("\\boxed{1000}", "1000"))
    assert not is_guess(verify("\\boxed{1,000}", "1000"))


def test_version() -> None:
    assert VERIFIER_VERSION.startswith("sieve-math/11+math-verify/")


def gsm8k_solutions() -> list[tuple[str, str]]:
    path = resources.files("pipeline.problems").joinpath("examples/gsm8k_style.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    out = []
    for row in rows:
        answer, solution = split_gsm_answer(str(row["answer"]))
        if solution is not None:
            out.append((solution, answer))
    return out


@pytest.mark.parametrize("marker_required", [False, True])
def test_gsm8k_worked_solutions_verify(marker_required: bool) -> None:
    cases = gsm8k_solutions()
    assert len(cases) >= 5
    for solution, answer in cases:
        verdict = verify(solution, answer, marker_required=marker_required, timeout=10.0)
        assert verdict.correct is True, (solution, answer, verdict)
