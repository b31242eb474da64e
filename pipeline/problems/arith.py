"""Arithmetic on a fine-grained ladder: digits, carries, operand count, `*`, parentheses, signs.

Questions are bare expressions (`37+45`) so the tiny model's prompt reads `37+45=` and the
completion is the integer answer (`82`). Small steps matter: a ~1M-param character model climbs
an addition ladder one digit at a time but learns nothing from coarse jumps.
Test: `.venv/bin/pytest tests/problems -q -k arith`.
"""

from __future__ import annotations

import random
from typing import Any

from pipeline.problems.base import check_level

NAME = "arith"

LEVELS: dict[int, str] = {
    1: "1-digit + 1-digit",
    2: "2-digit +/- 1-digit (non-negative result)",
    3: "2-digit +/- 2-digit (non-negative result)",
    4: "3-digit +/- 2-digit",
    5: "3-digit +/- 3-digit (non-negative result)",
    6: "1-digit * 2-digit",
    7: "three operands: 2-digit +/- 2-digit +/- 2-digit (non-negative result)",
    8: "mixed + - * with precedence: 2-digit +/- 1-digit * 2-digit",
    9: "parentheses: (2-digit +/- 2-digit) * 1-digit",
    10: "negative operands or results: 1-2 digit operands, + - *",
}


def _number(rng: random.Random, digits: int) -> int:
    """A random non-negative integer with exactly `digits` digits (0-9 for one digit)."""
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randint(low, 10**digits - 1)


def _carries(a: int, b: int, op: str) -> int:
    """Digit-wise carries of a + b, or borrows of a - b (a >= b)."""
    count = carry = 0
    while a or b:
        da, db = a % 10, b % 10
        if op == "+":
            carry = 1 if da + db + carry >= 10 else 0
        else:
            carry = 1 if da - db - carry < 0 else 0
        count += carry
        a, b = a // 10, b // 10
    return count


def _two_operand(rng: random.Random, da: int, db: int, ops: str) -> tuple[str, int, dict[str, Any]]:
    """`a op b` with a of `da` digits and b of `db` digits; subtraction never goes negative."""
    a, b, op = _number(rng, da), _number(rng, db), rng.choice(ops)
    if op == "-" and b > a:
        a, b = b, a
    value = a + b if op == "+" else a - b
    params = {"digits": [da, db], "ops": [op], "carries": _carries(a, b, op)}
    return f"{a}{op}{b}", value, params


def _product(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    a, b = rng.randint(2, 9), _number(rng, 2)
    if rng.random() < 0.5:
        return f"{a}*{b}", a * b, {"digits": [1, 2], "ops": ["*"]}
    return f"{b}*{a}", a * b, {"digits": [2, 1], "ops": ["*"]}


def _three_operands(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    while True:
        a, b, c = (_number(rng, 2) for _ in range(3))
        op1, op2 = rng.choice("+-"), rng.choice("+-")
        mid = a + b if op1 == "+" else a - b
        value = mid + c if op2 == "+" else mid - c
        if value >= 0:
            params = {"digits": [2, 2, 2], "ops": [op1, op2]}
            return f"{a}{op1}{b}{op2}{c}", value, params


def _precedence(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    while True:
        a, b, c, op = _number(rng, 2), rng.randint(2, 9), _number(rng, 2), rng.choice("+-")
        value = a + b * c if op == "+" else a - b * c
        if value >= 0:
            return f"{a}{op}{b}*{c}", value, {"digits": [2, 1, 2], "ops": [op, "*"]}


def _parentheses(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    a, b, c, op = _number(rng, 2), _number(rng, 2), rng.randint(2, 9), rng.choice("+-")
    if op == "-" and b > a:
        a, b = b, a
    value = (a + b if op == "+" else a - b) * c
    params = {"digits": [2, 2, 1], "ops": [op, "*"], "parentheses": True}
    return f"({a}{op}{b})*{c}", value, params


def _negative(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    """One of five shapes, each with a negative operand or a negative result."""
    a, b = rng.randint(1, 99), rng.randint(1, 99)
    shape = rng.randrange(5)
    if shape == 0:  # a - b with a < b: negative result
        low, high = sorted((a, b))
        low = low - 1 if low == high else low
        question, value = f"{low}-{high}", low - high
    elif shape == 1:
        question, value = f"-{a}+{b}", -a + b
    elif shape == 2:
        question, value = f"-{a}-{b}", -a - b
    elif shape == 3:
        question, value = f"{a}+(-{b})", a - b
    else:
        a = rng.randint(2, 9)
        question, value = f"{b}*(-{a})", -a * b
    return question, value, {"shape": shape, "negative": True}


def make(level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One problem of `level`: (question, canonical answer, params)."""
    check_level(NAME, LEVELS, level)
    if level == 1:
        question, value, params = _two_operand(rng, 1, 1, "+")
    elif level <= 5:
        digits = {2: (2, 1), 3: (2, 2), 4: (3, 2), 5: (3, 3)}[level]
        question, value, params = _two_operand(rng, *digits, "+-")
    elif level == 6:
        question, value, params = _product(rng)
    elif level == 7:
        question, value, params = _three_operands(rng)
    elif level == 8:
        question, value, params = _precedence(rng)
    elif level == 9:
        question, value, params = _parentheses(rng)
    else:
        question, value, params = _negative(rng)
    return question, str(value), params
