"""Units, scale words and scientific notation: the parts of an answer that belong to its value.

A committed answer is one value, and what is written after its number is part of it:

* a **scale word** changes the value: `5 million` is 5 000 000, `5 dozen` is 60, `4 squared` is
  16 (`apply_scale` rewrites them to the number before any comparison, so `5 million` is never
  paid for a gold of 5 and is paid for 5000000);
* **scientific notation** is a number: `1 \\times 10^{3}`, `2.5 \\cdot 10^{-2}`, `10^3`
  (`apply_scale` evaluates the whole answer when it is written so; `2^{10}` stays an
  unevaluated power);
* a **unit** must be the gold's when the gold states one (`5 km` is not `5 cm`; `5 centimeters`
  is) and may be left out or ignored when the gold states none (`18 dollars` for `18`):
  `unit_mismatch` says which unit differs, `is_unit` tells a unit from any other word.

Test: `.venv/bin/pytest tests/scoring/test_committed_answer.py -q`
"""

from __future__ import annotations

import re
from fractions import Fraction

# canonical unit -> spellings (lower case). Single letters (m, g, s, h, l) count as units only
# right after a number.
_UNIT_SPELLINGS: dict[str, tuple[str, ...]] = {
    "mm": ("mm", "millimeter", "millimeters", "millimetre", "millimetres"),
    "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
    "m": ("m", "meter", "meters", "metre", "metres"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    "in": ("inch", "inches"),
    "ft": ("ft", "foot", "feet"),
    "yd": ("yd", "yds", "yard", "yards"),
    "mi": ("mi", "mile", "miles"),
    "mg": ("mg", "milligram", "milligrams"),
    "g": ("g", "gram", "grams", "gramme", "grammes"),
    "kg": ("kg", "kgs", "kilogram", "kilograms", "kilo", "kilos"),
    "t": ("tonne", "tonnes", "ton", "tons"),
    "lb": ("lb", "lbs", "pound", "pounds"),
    "oz": ("oz", "ounce", "ounces"),
    "ml": ("ml", "milliliter", "milliliters", "millilitre", "millilitres"),
    "l": ("l", "liter", "liters", "litre", "litres"),
    "gal": ("gal", "gallon", "gallons"),
    "cup": ("cup", "cups"),
    "pt": ("pint", "pints"),
    "qt": ("qt", "quart", "quarts"),
    "s": ("s", "sec", "secs", "second", "seconds"),
    "min": ("min", "mins", "minute", "minutes"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "day": ("day", "days"),
    "week": ("wk", "wks", "week", "weeks"),
    "month": ("month", "months"),
    "year": ("yr", "yrs", "year", "years"),
    "mph": ("mph",),
    "kmh": ("kmh", "kph"),
    "usd": ("dollar", "dollars", "usd", "bucks"),
    "cent": ("cent", "cents", "ct"),
    "eur": ("euro", "euros", "eur"),
    "gbp": ("gbp", "quid"),
    "yen": ("yen",),
    "deg": ("degree", "degrees", "deg"),
    "rad": ("radian", "radians", "rad"),
    "pct": ("percent", "percentage", "pct"),
    "sq": ("sq", "square"),
    "cu": ("cubic", "cu"),
    "unit": ("unit", "units"),
}
_UNITS: dict[str, str] = {
    spelling: canon for canon, spellings in _UNIT_SPELLINGS.items() for spelling in spellings
}
# Units that do not change the value's kind when left out or added (`sq cm` is `cm^2`).
_QUALIFIERS = frozenset({"sq", "cu", "unit"})


# Number words read as values: zero..twenty, then the tens (numeric.py reads them, commit.py
# lets them stand in a committed answer).
NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {
    w: 10 * i
    for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)
}


def is_unit(word: str) -> bool:
    """True when `word` (any case) spells a recognised unit."""
    return word.lower() in _UNITS


def _unit_words(text: str) -> set[str]:
    """Canonical units spelt in `text`: words of two or more letters anywhere, single letters
    only right after a digit (`5 m`, `5m`)."""
    found = set()
    for m in _WORD.finditer(text):
        word = m.group(0).lower()
        if word not in _UNITS:
            continue
        if len(word) == 1 and _AFTER_DIGIT.search(text, 0, m.start()) is None:
            continue
        found.add(_UNITS[word])
    return found - _QUALIFIERS


_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]+(?![A-Za-z])")
_AFTER_DIGIT = re.compile(r"\d\s*(?:\\text\{\s*|\\mathrm\{\s*|\\,|\\ |~)?\Z")


def unit_mismatch(candidate: str, gold: str) -> str | None:
    """The candidate's unit when the gold states a unit and the candidate states another one
    (`km` for a gold in `cm`), else None. A candidate without a unit is not a mismatch."""
    gold_units = _unit_words(gold)
    if not gold_units:
        return None
    cand_units = _unit_words(candidate)
    extra = cand_units - gold_units
    return sorted(extra)[0] if extra else None


# A number and the scale word after it: `5 million`, `5\text{ thousand}`, `2.5 dozen`,
# `4 squared`. Possessive runs keep it linear.
_SCALES: dict[str, int] = {
    "hundred": 100,
    "hundreds": 100,
    "thousand": 1000,
    "thousands": 1000,
    "million": 10**6,
    "millions": 10**6,
    "billion": 10**9,
    "billions": 10**9,
    "trillion": 10**12,
    "trillions": 10**12,
    "dozen": 12,
    "dozens": 12,
}
_POWERS = {"squared": 2, "cubed": 3}
SCALE_WORDS = frozenset(_SCALES) | frozenset(_POWERS)
_NUM = r"[-+]?\d{1,3}(?:,\d{3})++(?:\.\d++)?|[-+]?\d++(?:\.\d++)?"
_SCALED = re.compile(
    rf"(?<![\w.])(?P<num>{_NUM})\s*+(?:\\(?:text|mathrm|textrm)\s*+\{{\s*+)?"
    rf"(?P<word>{'|'.join(sorted(SCALE_WORDS, key=len, reverse=True))})(?![A-Za-z])"
    r"(?P<close>\s*+\})?",
    re.IGNORECASE,
)
# Scientific notation written whole: `1 \times 10^{3}`, `2.5\cdot10^{-2}`, `3 × 10^4`, `10^3`.
_SCIENTIFIC = re.compile(
    r"\s*+\$?\s*+(?:(?P<mant>[-+]?\d++(?:\.\d++)?)\s*+(?:\\times|\\cdot|×|·|\*|x)\s*+)?"
    r"10\s*+\^\s*+(?:\{\s*+(?P<exp1>[-+]?\d{1,3})\s*+\}|(?P<exp2>[-+]?\d))\s*+\$?\s*+\.?\s*+"
)


def _decimal(value: Fraction) -> str:
    """`value` as a plain numeral (an integer, else an exact decimal, else `a/b`)."""
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value) * 10**places
    digits = str(scaled.numerator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def _scaled(m: re.Match[str]) -> str:
    num = Fraction(m.group("num").replace(",", ""))
    word = m.group("word").lower()
    value = num ** _POWERS[word] if word in _POWERS else num * _SCALES[word]
    text = _decimal(value)
    # a `\text{ million}` opened before the word is closed again by its own brace
    opened = m.group(0)[m.end("num") - m.start() : m.start("word") - m.start()]
    if "{" in opened and m.group("close") is None:
        return text + " \\text{"
    return text


def apply_scale(text: str) -> str:
    """`text` with scale words applied to the number before them and whole scientific notation
    evaluated (module doc); unchanged when it has neither."""
    m = _SCIENTIFIC.fullmatch(text)
    if m is not None:
        exp = int(m.group("exp1") or m.group("exp2"))
        mant = Fraction(m.group("mant")) if m.group("mant") else Fraction(1)
        return _decimal(mant * Fraction(10) ** exp)
    if not any(c.isalpha() for c in text):
        return text
    return _SCALED.sub(_scaled, text)
