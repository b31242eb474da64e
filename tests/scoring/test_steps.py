"""The step verifier: equation steps judged exactly, prefix fragments of bare answers, the
zero-weight `step_accuracy` component, and the fragments the trainer's reward function returns.

Test: `.venv/bin/pytest tests/scoring/test_steps.py -q`
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from grpo_core.types import Item, Sample
from pipeline.jobs.train.curriculum_batches import verifier_reward
from pipeline.scoring import (
    RewardSpec,
    Step,
    StepContext,
    check_steps,
    split_steps,
    step_accuracy,
    verify,
    verify_batch,
)
from pipeline.scoring.steps import MAX_STEPS, check_equation, solution_of_x
from pipeline.scoring.verifiers import _STEP_CHECKED, VERIFIERS, Check


def verdicts(completion: str, answer: str = "0", **kw: str) -> list[bool]:
    """The correctness of each equation step of `completion`."""
    steps = check_steps(kw.get("question", ""), completion, kw.get("family", ""), None, answer)
    return [s.correct for s in steps if s.kind == "equation"]


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("2+2=5", [False]),
        ("2+2=4", [True]),
        ("12/4 = 3", [True]),
        ("12 / 4 = 3.0", [True]),
        ("3*4 = 12 + 1 = 13", [True]),  # running total: 12 + 1 starts from 3*4's value
        ("3*4 = 12 + 1 = 14", [False]),
        ("3*4 = 13 + 1 = 14", [False]),  # 13 is not 3*4
        ("2 = 2 = 3", [False]),
        ("  7 -   10   =   -3  ", [True]),
        ("3 − 5 = −2", [True]),  # unicode minus
        ("3 × 4 ÷ 6 = 2", [True]),
        ("$3 \\times 4 = 12$", [True]),
        ("\\frac{1}{2} + \\frac{1}{4} = \\frac{3}{4}", [True]),
        ("1/2 + 1/4 = 3/4", [True]),
        ("0.1 + 0.2 = 0.3", [True]),  # exact: Fraction, not floats
        ("1.5 * 4 = 6", [True]),
        ("2/3 = 0.67", [True]),  # a rounded decimal
        ("2/3 = 0.66", [False]),
        ("1/3 = 0.3", [False]),  # one decimal is not read as rounding
        ("1,000 + 5 = 1,005", [True]),
        ("-(2 + 3) = -5", [True]),
        ("2(3 + 1) = 8", [True]),
        ("First 3*4 = 12. Then 12+1 = 14.\nSo 7 = 7", [True, False, True]),
        ("We get 6 + 3 = 9, and 9 + 1 = 10.", [True]),  # one sentence, two equations
        ("We get 6 + 3 = 9, and 9 + 1 = 11.", [False]),
    ],
)
def test_equation_steps(completion: str, expected: list[bool]) -> None:
    assert verdicts(completion) == expected


@pytest.mark.parametrize(
    "completion",
    [
        "no equation here",
        "2^3 = 8",  # no powers
        "2**3 = 8",
        "9" * 31 + " * 2 = 1",  # a literal over MAX_DIGITS digits
        "(" + "1+" * 150 + "1) = 151",  # a side over MAX_SIDE_CHARS characters
        "6/0 = 0",
        "3 times 4 = 12",  # prose arithmetic
        "(36*27) mod 42 = 6",
        "f(3) = 9",  # glued to a name
        "50% of 8 = 4",
        "\\sqrt{4} = 2",
        "x = 3",  # x unknown outside linear problems
        "= 12",
        "a == b",
    ],
)
def test_not_checkable(completion: str) -> None:
    assert verdicts(completion) == []


def test_huge_numbers_are_refused_not_computed() -> None:
    assert check_equation("9" * 31 + " * 9 = 1") is None
    assert check_equation("9" * 29 + " * 9 = " + str(int("9" * 29) * 9)) is True
    assert check_equation("10 ** 10000 = 1") is None


def test_spans_are_the_steps_in_text_order() -> None:
    text = "Step one: 3*4 = 12.  Then 12+1 = 13!\n\nnothing here\nx = 2"
    spans = split_steps(text)
    assert [text[a:b] for a, b in spans] == ["Step one: 3*4 = 12.", "Then 12+1 = 13!", "x = 2"]
    steps = check_steps("", text, "", None, "0")
    assert [(text[s.start : s.end], s.correct) for s in steps] == [
        ("Step one: 3*4 = 12.", True),
        ("Then 12+1 = 13!", True),
    ]


def test_linear_steps_by_substitution() -> None:
    question = "7x+2=23, x"
    text = "7x + 2 = 23\n7x = 21\n7*3 = 21\nx = 21/7 = 3\nx = 4\n7x = 23 + 2"
    got = check_steps(question, text, "linear", '{"a": 7, "b": 2, "c": 23}', "3")
    assert [s.correct for s in got] == [True, True, True, True, False, False]
    assert all(s.kind == "equation" for s in got)
    # an unknown family (the trainer only has the prompt) is read as linear from the question
    assert verdicts("x = 3", "3", question="7x+2=23, x=") == [True]
    assert verdicts("x = 3", "3", question="What is 3?", family="") == []
    assert verdicts("x = 3", "3", family="word") == []
    fractional = check_steps("2x+1=8x+21, x", "x = -10/3", "linear", None, "-10/3")
    assert [s.correct for s in fractional] == [True]


def test_solution_from_params_before_the_answer() -> None:
    assert solution_of_x("", "linear", '{"solution": "5/2"}', "9") == Fraction(5, 2)
    assert solution_of_x("", "linear", "not json", "9") == 9
    assert solution_of_x("", "arith", None, "9") is None


def test_word_problem_arithmetic_is_checked() -> None:
    text = (
        "Together they fill 1/6 + 1/8 = 7/24 of the tank per hour. "
        "So they need 24/7 = 3.43 hours.\nAnswer: 24/7"
    )
    steps = check_steps("Pipe A fills a tank in 6 hours, ...", text, "word", None, "24/7")
    assert [s.correct for s in steps] == [True, True]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("25", "25", [True, True]),
        ("27", "25", [True, False]),
        ("97", "25", [False, False]),
        ("250", "25", [True, True, False]),  # beyond the gold's length: wrong
        ("2", "25", [True]),
        ("-10/3", "-10/3", [True] * 5),
        ("-10/7", "-10/3", [True, True, True, True, False]),
    ],
)
def test_prefix_fragments_of_bare_answers(completion: str, gold: str, expected: list[bool]) -> None:
    steps = check_steps("", completion, "arith", None, gold)
    assert [s.correct for s in steps] == expected
    assert [(s.start, s.end) for s in steps] == [(i, i + 1) for i in range(len(completion))]
    assert {s.kind for s in steps} == {"prefix"}


def test_prefix_fragments_sit_on_the_answer_characters() -> None:
    steps = check_steps("", " 27\n", "arith", None, "25")
    assert steps == [Step(1, 2, True, "prefix"), Step(2, 3, False, "prefix")]
    boxed = "so \\boxed{27}"
    assert [(boxed[s.start], s.correct) for s in check_steps("", boxed, "", None, "25")] == [
        ("2", True),
        ("7", False),
    ]
    # an equivalent spelling judged correct keeps every fragment correct
    assert [s.correct for s in check_steps("", "0.5", "", None, "1/2", correct=True)] == [True] * 3
    assert check_steps("", "", "", None, "25") == []
    assert len(check_steps("", "9" * 1000, "", None, "25")) == MAX_STEPS


def test_step_accuracy_counts_equations_only() -> None:
    assert step_accuracy(check_steps("", "2+2=4\n2+2=5\n1+1=2\n3 = 4", "", None, "0")) == 0.5
    assert step_accuracy(check_steps("", "27", "", None, "25")) is None
    assert step_accuracy([]) is None


def test_component_has_no_weight_by_default() -> None:
    text = "2+2=5\n1+1=2\n\\boxed{4}"
    verdict = verify(text, "4")
    assert verdict.correct is True and verdict.reward == 1.0
    assert verdict.components == {"correctness": 1.0, "format": 1.0, "step_accuracy": 0.5}
    assert verdict.steps is not None and [s.correct for s in verdict.steps] == [False, True]
    weighted = RewardSpec(weights={"correctness": 0.5, "step_accuracy": 0.5})
    assert verify(text, "4", spec=weighted).reward == 0.75
    bare = verify("27", "25", marker_required=False)
    assert bare.components == {"correctness": 0.0, "format": 1.0}  # prefixes are no component
    assert bare.steps is not None and [s.correct for s in bare.steps] == [True, False]


def test_contexts_reach_the_checker_and_code_has_no_steps() -> None:
    ctx = StepContext("7x+2=23, x", "linear", None)
    completions = ["x = 3\n\\boxed{3}"] * 2
    with_ctx, without = verify_batch(completions, ["3", "3"], contexts=[ctx, None])
    assert with_ctx.components["step_accuracy"] == 1.0 and with_ctx.steps is not None
    assert "step_accuracy" not in without.components
    with pytest.raises(ValueError, match="contexts"):
        verify_batch(["1"], ["1"], contexts=[])
    assert VERIFIERS["code"] not in _STEP_CHECKED  # `y = 2 + 2` in code is no step


def test_a_failed_verifier_has_no_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(completion: str, answer: str, timeout: float) -> Check:
        raise RuntimeError("kaput")

    monkeypatch.setitem(VERIFIERS, "math", boom)
    verdict = verify("2+2=4", "4")
    assert verdict.reason == "verifier_error" and verdict.steps is None
    assert verdict.components == {}


def test_verifier_reward_fills_scores_steps() -> None:
    items = [
        Item("7x+2=23, x=", "3", 2, verifier="math"),
        Item("7x+2=23, x=", "3", 2, verifier="math"),
        Item("2+3=", "5", 1, verifier="math"),
    ]
    texts = ["7x = 21\nx = 4\n\\boxed{4}", "3", "2+3 = 5 + 1 = 6\n\\boxed{6}"]
    samples = [Sample(tuple(range(len(t))), t, False) for t in texts]
    scores = verifier_reward(items, samples, marker_required=False)  # the raw format
    assert scores.correct == [False, True, False]
    assert scores.steps == [
        ((0, 7, True), (8, 13, False)),
        ((0, 1, True),),
        ((0, 15, True),),
    ]
