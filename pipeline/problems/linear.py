"""Linear equations in one unknown: integer solutions at low levels, fractional ones higher up.

Questions read `3x-4=11, x` so the tiny model's prompt is `3x-4=11, x=` and the completion is the
solution (`5`, or a reduced fraction such as `5/3`). Coefficients are written without `*`.
Test: `.venv/bin/pytest tests/problems -q -k linear`.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

from pipeline.problems.base import canonical_number, check_level

NAME = "linear"

LEVELS: dict[int, str] = {
    1: "x+a=b or x-a=b, non-negative integer solution",
    2: "ax=b, positive integer solution",
    3: "ax+b=c, positive integer solution",
    4: "ax+b=cx+d, integer solution (may be negative)",
    5: "a(x+b)=cx+d, integer solution (may be negative)",
    6: "ax+b=c, fractional solution",
    7: "ax+b=cx+d, fractional solution",
    8: "a(x+b)=c(x+d), fractional solution",
}


def _side(coef: int, const: int) -> str:
    """`coef*x + const` written compactly: `3x-4`, `-x+2`, `x`, `7`."""
    if coef == 0:
        return str(const)
    text = {1: "x", -1: "-x"}.get(coef, f"{coef}x")
    if const > 0:
        return f"{text}+{const}"
    if const < 0:
        return f"{text}{const}"
    return text


def _nonzero(rng: random.Random, bound: int) -> int:
    """A random integer in [-bound, bound] other than 0."""
    value = rng.randint(1, bound)
    return value if rng.random() < 0.5 else -value


def _level1(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    x, a = rng.randint(0, 30), rng.randint(1, 20)
    if rng.random() < 0.5 or x < a:
        return f"x+{a}={x + a}", Fraction(x), {"a": a, "b": x + a, "op": "+"}
    return f"x-{a}={x - a}", Fraction(x), {"a": a, "b": x - a, "op": "-"}


def _level2(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    a, x = rng.randint(2, 12), rng.randint(1, 12)
    return f"{a}x={a * x}", Fraction(x), {"a": a, "b": a * x}


def _level3(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    a, x, b = rng.randint(2, 9), rng.randint(1, 12), _nonzero(rng, 20)
    c = a * x + b
    return f"{_side(a, b)}={c}", Fraction(x), {"a": a, "b": b, "c": c}


def _level4(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    a, c = rng.sample(range(1, 10), 2)
    x, b = rng.randint(-10, 10), _nonzero(rng, 20)
    d = a * x + b - c * x
    return f"{_side(a, b)}={_side(c, d)}", Fraction(x), {"a": a, "b": b, "c": c, "d": d}


def _level5(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    a, c = rng.randint(2, 6), rng.randint(1, 9)
    c = c + 1 if c == a else c
    x, b = rng.randint(-10, 10), _nonzero(rng, 9)
    d = a * (x + b) - c * x
    params = {"a": a, "b": b, "c": c, "d": d}
    return f"{a}({_side(1, b)})={_side(c, d)}", Fraction(x), params


def _level6(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    while True:
        a, b, c = rng.randint(2, 9), _nonzero(rng, 20), rng.randint(-20, 20)
        x = Fraction(c - b, a)
        if x.denominator > 1:
            return f"{_side(a, b)}={c}", x, {"a": a, "b": b, "c": c}


def _level7(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    while True:
        a, c = rng.sample(range(1, 13), 2)
        b, d = _nonzero(rng, 30), rng.randint(-30, 30)
        x = Fraction(d - b, a - c)
        if x.denominator > 1:
            params = {"a": a, "b": b, "c": c, "d": d}
            return f"{_side(a, b)}={_side(c, d)}", x, params


def _level8(rng: random.Random) -> tuple[str, Fraction, dict[str, Any]]:
    while True:
        a, c = rng.sample(range(2, 10), 2)
        b, d = _nonzero(rng, 9), _nonzero(rng, 9)
        x = Fraction(c * d - a * b, a - c)
        if x.denominator > 1:
            params = {"a": a, "b": b, "c": c, "d": d}
            return f"{a}({_side(1, b)})={c}({_side(1, d)})", x, params


_BUILDERS = {
    1: _level1,
    2: _level2,
    3: _level3,
    4: _level4,
    5: _level5,
    6: _level6,
    7: _level7,
    8: _level8,
}


def make(level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One problem of `level`: (question, canonical answer, params)."""
    check_level(NAME, LEVELS, level)
    equation, solution, params = _BUILDERS[level](rng)
    return f"{equation}, x", canonical_number(solution), params
