"""Modular arithmetic: `a mod m`, then sums, products and small powers reduced mod m.

Questions read `123 mod 7`, `(12*34) mod 9`, `7^3 mod 10`; the prompt is `question + "="` and the
answer is the least non-negative residue.
Test: `.venv/bin/pytest tests/problems -q -k modular`.
"""

from __future__ import annotations

import random
from typing import Any

from pipeline.problems.base import check_level

NAME = "modular"

LEVELS: dict[int, str] = {
    1: "a mod m: 2-digit a, 1-digit m",
    2: "a mod m: 3-digit a, 1-digit m",
    3: "a mod m: 3-digit a, 2-digit m",
    4: "a mod m: 4-5 digit a, 2-digit m",
    5: "(a+b) mod m: 2-3 digit a and b, 1-2 digit m",
    6: "(a*b) mod m: 2-digit a and b, 2-digit m",
    7: "a^k mod m: 1-digit a, k in 2-4, 2-digit m",
    8: "a^k mod m: 2-digit a, k in 3-6, 2-3 digit m",
}

# level -> (a's digit range, m's range)
_PLAIN: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {
    1: ((2, 2), (2, 9)),
    2: ((3, 3), (2, 9)),
    3: ((3, 3), (10, 99)),
    4: ((4, 5), (10, 99)),
}


def _number(rng: random.Random, min_digits: int, max_digits: int) -> int:
    digits = rng.randint(min_digits, max_digits)
    return rng.randint(10 ** (digits - 1), 10**digits - 1)


def _plain(rng: random.Random, level: int) -> tuple[str, int, dict[str, Any]]:
    (lo, hi), (m_lo, m_hi) = _PLAIN[level]
    a, m = _number(rng, lo, hi), rng.randint(m_lo, m_hi)
    return f"{a} mod {m}", a % m, {"a": a, "m": m, "op": "mod"}


def _sum(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    a, b, m = _number(rng, 2, 3), _number(rng, 2, 3), rng.randint(2, 99)
    return f"({a}+{b}) mod {m}", (a + b) % m, {"a": a, "b": b, "m": m, "op": "+"}


def _product(rng: random.Random) -> tuple[str, int, dict[str, Any]]:
    a, b, m = _number(rng, 2, 2), _number(rng, 2, 2), rng.randint(10, 99)
    return f"({a}*{b}) mod {m}", (a * b) % m, {"a": a, "b": b, "m": m, "op": "*"}


def _power(rng: random.Random, level: int) -> tuple[str, int, dict[str, Any]]:
    while True:
        if level == 7:
            a, k, m = rng.randint(2, 9), rng.randint(2, 4), rng.randint(10, 99)
        else:
            a, k, m = rng.randint(10, 99), rng.randint(3, 6), rng.randint(10, 999)
        if a**k >= m:  # otherwise the "mod" does nothing
            break
    return f"{a}^{k} mod {m}", pow(a, k, m), {"a": a, "k": k, "m": m, "op": "^"}


def make(level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One problem of `level`: (question, canonical answer, params)."""
    check_level(NAME, LEVELS, level)
    if level in _PLAIN:
        question, value, params = _plain(rng, level)
    elif level == 5:
        question, value, params = _sum(rng)
    elif level == 6:
        question, value, params = _product(rng)
    else:
        question, value, params = _power(rng, level)
    return question, str(value), params
