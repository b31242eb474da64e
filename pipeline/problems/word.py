"""Templated word problems with exact answers: rates (pipes, drains, workers), travel, mixing.

Each template draws its numbers, rejects ill-posed draws (a tank that never fills, nothing left
to do) and computes the answer as a `Fraction`, written canonically ("17/3", "5"). Questions are
one or two ASCII sentences; the prompt is `question + "="`.
Test: `.venv/bin/pytest tests/problems -q -k word`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pipeline.problems.base import canonical_number, check_level

NAME = "word"

LEVELS: dict[int, str] = {
    1: "travel time: distance / speed (one step)",
    2: "two pipes or two workers together (2-12 hours/days)",
    3: "a pipe against a drain, or two cars driving toward each other",
    4: "mixing two solutions: percent of the mixture",
    5: "two pipes open for a while, then one closed: time left (2-12 hours)",
    6: "one worker alone for a while, then both: time left (2-12 days)",
    7: "two pipes and a drain all open (2-15 hours)",
    8: "levels 5-7 templates with larger numbers (10-30)",
}

Built = tuple[str, Fraction, dict[str, Any]]


def _speed(rng: random.Random, hi: int) -> Built:
    d, s = rng.randint(2, 5 * hi), rng.randint(2, hi)
    question = f"A car travels {d} km at {s} km per hour. How many hours does the trip take?"
    return question, Fraction(d, s), {"template": "speed", "distance": d, "speed": s}


def _together(rng: random.Random, hi: int) -> Built:
    a, b = rng.randint(2, hi), rng.randint(2, hi)
    answer = 1 / (Fraction(1, a) + Fraction(1, b))
    if rng.random() < 0.5:
        question = (
            f"Pipe A fills a tank in {a} hours, pipe B in {b} hours. "
            "How many hours do both together need to fill it?"
        )
        wording = "pipes"
    else:
        question = (
            f"Ann can paint a fence in {a} days, Bob in {b} days. "
            "Working together, how many days do they need?"
        )
        wording = "workers"
    return question, answer, {"template": "together", "wording": wording, "a": a, "b": b}


def _drain(rng: random.Random, hi: int) -> Built:
    a = rng.randint(2, hi - 1)
    d = rng.randint(a + 1, hi)  # the drain is slower than the pipe, so the tank fills
    question = (
        f"A pipe fills a tank in {a} hours and a drain empties it in {d} hours. "
        "With both open, how many hours does the empty tank take to fill?"
    )
    return question, 1 / (Fraction(1, a) - Fraction(1, d)), {"template": "drain", "a": a, "d": d}


def _meet(rng: random.Random, hi: int) -> Built:
    dist, u, v = rng.randint(10, 20 * hi), rng.randint(2, 5 * hi), rng.randint(2, 5 * hi)
    question = (
        f"Two towns are {dist} km apart. Two cars leave them at the same time, driving toward "
        f"each other at {u} and {v} km per hour. After how many hours do they meet?"
    )
    params = {"template": "meet", "distance": dist, "u": u, "v": v}
    return question, Fraction(dist, u + v), params


def _mix(rng: random.Random, hi: int) -> Built:
    x, y = rng.randint(1, hi), rng.randint(1, hi)
    p, q = (5 * k for k in rng.sample(range(1, 20), 2))
    question = (
        f"{x} liters of a {p}% salt solution are mixed with {y} liters of a {q}% salt "
        "solution. What percent of the mixture is salt?"
    )
    params = {"template": "mix", "x": x, "p": p, "y": y, "q": q}
    return question, Fraction(x * p + y * q, x + y), params


def _close(rng: random.Random, lo: int, hi: int) -> Built:
    while True:
        a, b, t = rng.randint(lo, hi), rng.randint(lo, hi), rng.randint(1, hi // 2)
        left = 1 - Fraction(t, a) - Fraction(t, b)
        if left > 0:
            break
    question = (
        f"Pipe A fills a tank in {a} hours, pipe B in {b} hours. Both are open for {t} "
        f"{'hour' if t == 1 else 'hours'}, then A is closed. How many more hours does B need?"
    )
    return question, left * b, {"template": "close", "a": a, "b": b, "t": t}


def _joins(rng: random.Random, lo: int, hi: int) -> Built:
    a, b = rng.randint(lo, hi), rng.randint(lo, hi)
    t = rng.randint(1, a - 1)  # Ann leaves some work for Bob to help with
    answer = (1 - Fraction(t, a)) / (Fraction(1, a) + Fraction(1, b))
    question = (
        f"Ann can do a job in {a} days and Bob in {b} days. Ann works alone for {t} "
        f"{'day' if t == 1 else 'days'}, then Bob joins her. How many more days do they need?"
    )
    return question, answer, {"template": "joins", "a": a, "b": b, "t": t}


def _three(rng: random.Random, lo: int, hi: int) -> Built:
    while True:
        a, b, c = rng.randint(lo, hi), rng.randint(lo, hi), rng.randint(lo, hi)
        rate = Fraction(1, a) + Fraction(1, b) - Fraction(1, c)
        if rate > 0:  # filling beats draining
            break
    question = (
        f"Pipes A and B fill a tank in {a} and {b} hours; a drain empties it in {c} hours. "
        "With all three open, how many hours does the empty tank take to fill?"
    )
    return question, 1 / rate, {"template": "three", "a": a, "b": b, "c": c}


def _level8(rng: random.Random) -> Built:
    builder: Callable[[random.Random, int, int], Built] = rng.choice((_close, _joins, _three))
    return builder(rng, 10, 30)


_BUILDERS: dict[int, Callable[[random.Random], Built]] = {
    1: lambda rng: _speed(rng, 12),
    2: lambda rng: _together(rng, 12),
    3: lambda rng: _drain(rng, 15) if rng.random() < 0.5 else _meet(rng, 12),
    4: lambda rng: _mix(rng, 10),
    5: lambda rng: _close(rng, 2, 12),
    6: lambda rng: _joins(rng, 2, 12),
    7: lambda rng: _three(rng, 2, 15),
    8: _level8,
}


def make(level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One problem of `level`: (question, canonical answer, params)."""
    check_level(NAME, LEVELS, level)
    question, answer, params = _BUILDERS[level](rng)
    return question, canonical_number(answer), params
