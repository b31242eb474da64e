"""Each family's answers, checked independently of the generators (eval, substitution, formulas).

Run: `.venv/bin/pytest tests/problems/test_families.py -q`.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from pipeline.core.errors import SieveError
from pipeline.problems import FAMILIES, family_levels, generate
from pipeline.problems.base import canonical_number

PER_LEVEL = 150
CANONICAL = re.compile(r"-?(0|[1-9]\d*)(/[1-9]\d*)?")


def problems(family: str) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    frame = generate(family, family_levels(family), PER_LEVEL * len(FAMILIES[family].LEVELS), 11)
    for row in frame.iter_rows(named=True):
        yield row["level"], row["question"], row["answer"], json.loads(row["params"])


def _safe_eval(expression: str, names: dict[str, Any] | None = None) -> Any:
    return eval(expression, {"__builtins__": {}}, names or {})


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_answers_are_canonical_and_questions_short_ascii(family: str) -> None:
    for level, question, answer, _ in problems(family):
        assert CANONICAL.fullmatch(answer), (level, question, answer)
        assert canonical_number(Fraction(answer)) == answer
        assert question.isascii() and question == question.strip()
        assert "\n" not in question and "=" not in question[-1:]
        assert len(question) <= (220 if family == "word" else 30)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_levels_are_described_and_unknown_level_rejected(family: str) -> None:
    module = FAMILIES[family]
    assert family == module.NAME
    assert all(text.strip() for text in module.LEVELS.values())
    with pytest.raises(SieveError, match=f"not in {family} levels"):
        module.make(max(module.LEVELS) + 1, random.Random(0))


def test_arith_answers_match_eval() -> None:
    for level, question, answer, _ in problems("arith"):
        assert re.fullmatch(r"[0-9+\-*()]+", question), question
        assert Fraction(_safe_eval(question)) == Fraction(answer), (level, question)


def test_arith_levels_follow_their_descriptions() -> None:
    for level, question, answer, params in problems("arith"):
        if level <= 5:
            assert [len(part) for part in re.split(r"[+\-]", question)] == params["digits"]
        if level <= 9:
            assert int(answer) >= 0
        else:
            assert "-" in question and (int(answer) < 0 or "(-" in question or question[0] == "-")


def _linear_sides(question: str) -> tuple[str, str]:
    assert question.endswith(", x"), question
    equation = question[: -len(", x")]
    assert re.fullmatch(r"[0-9x+\-()=]+", equation), question
    explicit = re.sub(r"(\d)([x(])", r"\1*\2", equation)
    left, right = explicit.split("=")
    return left, right


def test_linear_answers_satisfy_the_equation() -> None:
    for level, question, answer, _ in problems("linear"):
        left, right = _linear_sides(question)
        x = Fraction(answer)
        assert _safe_eval(left, {"x": x}) == _safe_eval(right, {"x": x}), (level, question)
        # the equation has exactly one solution: the two sides differ at another x
        other = x + 1
        assert _safe_eval(left, {"x": other}) != _safe_eval(right, {"x": other}), question
        assert (x.denominator > 1) == (level >= 6), (level, question, answer)


def test_modular_answers_recomputed() -> None:
    for level, question, answer, params in problems("modular"):
        assert re.fullmatch(r"[0-9+*()^ ]+ mod [0-9]+", question), question
        left, modulus = question.split(" mod ")
        value = _safe_eval(left.replace("^", "**")) % int(modulus)
        assert str(value) == answer, (level, question)
        assert 0 <= int(answer) < params["m"] == int(modulus)


def _word_answer(p: dict[str, Any]) -> Fraction:
    """The answer from the params, by formulas written apart from the generator's."""
    f = Fraction
    template = p["template"]
    if template == "speed":
        return f(p["distance"], p["speed"])
    if template == "together":
        return f(p["a"] * p["b"], p["a"] + p["b"])
    if template == "drain":
        return f(p["a"] * p["d"], p["d"] - p["a"])
    if template == "meet":
        return f(p["distance"], p["u"] + p["v"])
    if template == "mix":
        return f(p["x"] * p["p"] + p["y"] * p["q"], p["x"] + p["y"])
    if template == "close":  # B's share left after t hours, at B's rate
        return p["b"] - f(p["t"] * p["b"], p["a"]) - p["t"]
    if template == "joins":
        return f((p["a"] - p["t"]) * p["b"], p["a"] + p["b"])
    assert template == "three"
    a, b, c = p["a"], p["b"], p["c"]
    return f(a * b * c, b * c + a * c - a * b)


def test_word_answers_recomputed_and_well_posed() -> None:
    templates = set()
    for level, question, answer, params in problems("word"):
        templates.add(params["template"])
        expected = _word_answer(params)
        assert expected > 0, (level, question)
        assert Fraction(answer) == expected, (level, question)
        numbers = [v for k, v in params.items() if isinstance(v, int)]
        assert all(str(v) in question for v in numbers), (question, params)
    assert templates == {"speed", "together", "drain", "meet", "mix", "close", "joins", "three"}


def test_word_example_from_the_brief() -> None:
    params = {"template": "close", "a": 6, "b": 8, "t": 1}
    assert _word_answer(params) == Fraction(17, 3)
