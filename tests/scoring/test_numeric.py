"""The exact/numeric fast path: renderings, signs, separators, undecided cases, linear regexes,
and a hypothesis property (equivalent renderings are equal, a perturbed value is not).

Test: `.venv/bin/pytest tests/scoring/test_numeric.py -q`
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.scoring import fast_path
from pipeline.scoring.numeric import is_bare_number, is_unevaluated, last_number, parse_number
from tests.scoring.work import assert_linear


@pytest.mark.parametrize(
    ("candidate", "gold", "expected"),
    [
        ("1/2", "0.5", True),
        ("\\frac{1}{2}", "0.5", True),
        ("\\dfrac{1}{2}", "1/2", True),
        ("\\tfrac12", "0.5", True),
        ("−3", "-3", True),
        ("–3", "-3", True),
        ("1,000", "1000", True),
        ("1,000,000", "1000000", True),
        ("1{,}000", "1000", True),
        ("10,00", "1000", None),
        ("$\\frac{3}{4}$", "0.75", True),
        ("42 apples", "42", True),
        ("17/3 hours", "17/3", True),
        ("5\\text{ cm}", "5", True),
        ("0.333", "1/3", False),
        ("50%", "0.5", True),
        ("50%", "50", True),
        ("5%", "0.5", False),
        ("so x = 5", "5", True),
        ("3 + 4 = 7", "8", False),
        ("2^{10}", "1024", None),
        ("\\sqrt{2}", "1.4142", None),
        ("5+2", "7", None),
        ("5x", "5", None),
        ("\\sqrt{2}", "\\sqrt{2}", True),
        ("\\sqrt{3}", "\\sqrt{2}", None),
        ("0.\\overline{3}", "1/3", True),
        ("1e3", "1000", True),
        ("twelve", "12", True),
        ("5/0", "5", None),
        ("", "5", False),
        ("===", "5", False),
        ("\\pi", "3.14", False),
        # guessed readings: equal counts, unequal defers to math-verify
        ("1.22", "1,22", True),
        ("1000,99", "1000.99", True),
        ("0.111", "0,111", True),
        ("1,23", "1.22", None),
        ("1 000", "1000", True),
        ("1 000", "1001", None),
        ("0.0833333333333333", "1/12", None),
        ("0.0833333333333333", "0.0833333333333333", True),
        ("0.3333333", "1/3", False),  # 7 digits: a rounded decimal, a different number
        ("0.08333...", "1/12", None),
        ("0.08333…", "1/12", None),
        ("-2, 1", "1", None),
        ("\\frac{1}{3},", "1/3", True),
        ("12,000,023", "12000023", True),
    ],
)
def test_fast_path(candidate: str, gold: str, expected: bool | None) -> None:
    assert fast_path(candidate, gold) is expected


def test_parse_number_details() -> None:
    assert parse_number("-\\frac{1}{2}") is not None
    guessed = parse_number("1,00")  # a decimal comma, or a badly grouped thousand: a guess
    assert guessed is not None and guessed.value == 1 and not guessed.certain
    assert parse_number("1" * 5000) is None  # over Python's int() digit limit: undecided, no error
    assert last_number("2^{10}") is None
    assert last_number("x = \\frac{1}{2}").value == Fraction(1, 2)  # type: ignore[union-attr]
    assert is_bare_number(" 17/3 ") and is_bare_number("-3") and not is_bare_number("42 apples")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("40+9*69", True),
        ("75 + 74 - 77 =", True),
        ("Solve 75 + 74 - 77 =", True),
        ("2^{10}", True),
        ("10^3", True),
        ("3!", True),
        ("679 mod 65", True),
        ("(619+60) \\bmod 65", True),
        ("2 \\times 3", True),
        ("1+\\frac{1}{2}", True),
        ("7 = 3 + 4", True),
        ("[-87] + 29", True),  # SmolLM2, real_model audit: brackets around a copied operand
        ("29 + [-87]", True),
        ("[1, 2]", False),
        ("3 + 4 = 7", False),
        ("x = -5", False),
        ("-5", False),
        ("17/3", False),
        ("\\frac{17}{3}", False),
        ("\\sqrt{2}", False),
        ("2\\sqrt{3}", False),
        ("1,000", False),
        ("1e-3", False),
        ("(2, -3)", False),
        ("42 apples", False),
        ("50%", False),
    ],
)
def test_is_unevaluated(text: str, expected: bool) -> None:
    assert is_unevaluated(text) is expected


# Worst cases for the fast path's scanners: head + unit * n + tail, n as they were once timed.
ADVERSARIAL: list[tuple[str, str, int, str]] = [
    ("", "1", 100_000, ""),
    ("", " ", 100_000, "x"),
    ("", "1 ", 50_000, ""),
    ("", "1,", 50_000, ""),
    ("", "1,000", 20_000, "x"),
    ("", "- ", 50_000, ""),
    ("", "1/", 50_000, ""),
    ("", "1 / ", 25_000, ""),
    ("", "\\frac{", 15_000, ""),
    ("", "0.\\overline{", 8_000, ""),
    ("", "= 1 ", 25_000, ""),
    ("", "a^2", 30_000, ""),
    ("", "ab ", 30_000, ""),
    ("", "{,}", 30_000, ""),
    ("1", " ", 100_000, "x"),
    ("1 +", " ", 100_000, "x"),
    ("", "1,", 50_000, "1"),
    ("", "1 000", 20_000, ""),
    ("0.", "3", 50_000, "..."),
    ("$^", " ", 100_000, "x"),  # two space runs around `{?` in the degree regex: was quadratic
    ("$^", "\n", 100_000, "1"),
    ("^{", " ", 100_000, "\\"),
    ("0.", "1", 100_000, "\\overline{3}"),  # a repeating decimal too long to evaluate
]


def fast_path_steps(text: str) -> None:
    fast_path(text, "5")
    fast_path(text, "\\sqrt{2}")
    is_unevaluated(text)


@pytest.mark.parametrize(("head", "unit", "n", "tail"), ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_fast_path_is_linear(head: str, unit: str, n: int, tail: str) -> None:
    """Work counted, not timed (tests/scoring/work.py): twice the input, at most twice the
    Python steps and the characters scanned. (A regex that backtracks within one call is not
    counted: benchmarks/text_worst_case.py times these inputs.)"""
    assert_linear(fast_path_steps, lambda k: head + unit * k + tail, n)


def _decimal(value: Fraction) -> str | None:
    """Terminating decimal rendering of `value`, or None when it does not terminate."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return None
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
    sign = "-" if value < 0 else ""
    scaled = abs(value.numerator * 10**digits // value.denominator)
    whole, frac = divmod(scaled, 10**digits)
    return f"{sign}{whole}.{frac:0{digits}d}" if digits else f"{sign}{whole}"


def renderings(value: Fraction) -> list[str]:
    sign = "-" if value < 0 else ""
    num, den = abs(value.numerator), value.denominator
    forms = [
        f"{sign}{num}/{den}",
        f"{sign}\\frac{{{num}}}{{{den}}}",
        f"{sign}\\dfrac{{{num}}}{{{den}}}",
    ]
    forms.append(f"{'−' if value < 0 else ''}{num}/{den}")
    if den == 1:
        forms += [f"{sign}{num:,}", f"${sign}{num}$", f"{sign}{num} apples"]
    decimal = _decimal(value)
    if decimal is not None:
        forms.append(decimal)
    return forms


fractions_st = st.builds(
    Fraction, st.integers(-(10**7), 10**7), st.integers(1, 10**4)
) | st.integers(-(10**9), 10**9).map(Fraction)


@settings(max_examples=300, deadline=None)
@given(value=fractions_st, delta=st.fractions(min_value=-5, max_value=5).filter(bool))
def test_equivalent_renderings_agree(value: Fraction, delta: Fraction) -> None:
    forms = renderings(value)
    gold = forms[0]
    for form in forms:
        assert fast_path(form, gold) is True, (form, gold)
        assert fast_path(gold, form) is True, (gold, form)
    for form in renderings(value + delta):
        assert fast_path(form, gold) is False, (form, gold)
