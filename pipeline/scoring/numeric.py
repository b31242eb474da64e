"""The exact/numeric fast path: decide `candidate == gold` for plain numbers without math-verify.

Understands integers, decimals, `a/b`, `\\frac{a}{b}` (also `\\dfrac`, `\\tfrac`, `\\frac12`), signs
(ASCII `-`, unicode minus U+2212, a leading en-dash), thousands separators with valid grouping
(`1,000,000`, LaTeX `1{,}000`), `$...$` / `\\(...\\)` wrappers, `\\text{}` and trailing unit words
(`42 apples`, `17/3 hours`, `5\\text{ cm}`), degrees and percent, small e-exponents (`1e3`),
repeating decimals (`0.\\overline{3}`) and the number words zero..twenty, thirty..ninety.
Values are compared exactly with `fractions.Fraction`, so `1/2 == 0.5 == \\frac{1}{2}` but
`0.333 != 1/3` (a rounded decimal is a different number; math-verify would also accept `0.333333`,
the fast path never does). A percent matches either its face value or that value / 100 (`50%`
equals both `50` and `0.5`), as math-verify does.

When the candidate is not itself a number but ends in one after `=`, `:` or a word ("so x = 5",
"3 + 4 = 7", "the total is 12 dollars"), that last number is the answer. Anything else (`2^{10}`,
`\\sqrt{2}`, `5+2`) is left undecided (None) for math-verify. Every regex here is linear-time.

Test: `.venv/bin/pytest tests/scoring/test_numeric.py -q`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)"
_SNUM = rf"-?{_NUM}"
_ENUM = rf"{_NUM}(?:[eE][-+]?\d{{1,3}})?"  # plain numerals may carry a small e-exponent
_NUMBER = (
    rf"(?P<sign>[-+]\s*)?(?:"
    rf"\\frac\s*\{{\s*(?P<fn>{_SNUM})\s*\}}\s*\{{\s*(?P<fd>{_SNUM})\s*\}}"
    rf"|\\frac\s*(?P<sn>\d)(?P<sd>\d)"
    rf"|(?P<ri>\d*)\.(?P<rf>\d*)\\overline\s*\{{(?P<rr>\d{{1,50}})\}}"
    rf"|(?P<n>{_ENUM})(?:\s*/\s*(?P<d>{_ENUM}))?)"
)
_HEAD = re.compile(_NUMBER)
_ANYWHERE = re.compile(rf"(?<![\w.]){_NUMBER}")
_UNIT_TAIL = re.compile(r"(?:[A-Za-z\s.%°²³]|(?<=[A-Za-z])\^\{?[23]\}?)*")  # cm^2, not 10^3
_WORDS = [
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
_NUMBER_WORDS = {w: Fraction(i) for i, w in enumerate(_WORDS)} | {
    w: Fraction(10 * i)
    for i, w in enumerate(["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 3)
}
_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textrm|textit|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}"
)
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree")
_SIMPLE_SUBS = (
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("\\left", ""),
    ("\\right", ""),
    ("{,}", ","),
    ("\\%", "%"),
    ("\\$", ""),
    ("$", ""),
    ("\\(", ""),
    ("\\)", ""),
    ("\\[", ""),
    ("\\]", ""),
    ("\\,", ""),
    ("\\!", ""),
    ("\\;", " "),
    ("\\:", " "),
    ("\\ ", " "),
    ("~", " "),
)
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MAX_DIGITS = 4000  # Python refuses int() on longer strings; such answers go to math-verify


@dataclass(frozen=True, slots=True)
class Number:
    """A parsed numeric answer: its exact value and whether it carried a percent sign."""

    value: Fraction
    percent: bool = False


def normalise(text: str) -> str:
    """Strip wrappers and layout-only LaTeX so that equal answers compare equal as strings."""
    s = text.strip()
    if "−" in s:
        s = s.replace("−", "-")
    if s.startswith("–"):
        s = "-" + s[1:]
    if "\\" in s or "$" in s or "{" in s or "~" in s:
        s = _DEGREE.sub("°", s)
        s = _TEXT_CMD.sub(r" \1", s)
        for old, new in _SIMPLE_SUBS:
            if old in s:
                s = s.replace(old, new)
        s = s.strip()
    return s.rstrip(".").strip()


def _fraction(text: str) -> Fraction | None:
    """Exact value of one numeral such as `1,000.5`, `-3` or `.5`; None when out of range."""
    digits = text.replace(",", "") if "," in text else text
    if len(digits) > _MAX_DIGITS:
        return None
    if digits.isdigit():
        return Fraction(int(digits))
    try:
        return Fraction(digits)
    except (ValueError, ZeroDivisionError):
        return None


def _ratio(num: str, den: str | None) -> Fraction | None:
    """`num / den` exactly (den None means 1); None on a zero denominator or bad numeral."""
    top = _fraction(num)
    if den is None or top is None:
        return top
    bottom = _fraction(den)
    if bottom is None or bottom == 0:
        return None
    return top / bottom


def _repeating(whole: str, fixed: str, period: str) -> Fraction:
    """Value of `whole.fixed(period repeating)`, e.g. 0.1(6) = 1/6."""
    head = Fraction(int(whole or "0")) + Fraction(int(fixed or "0"), 10 ** len(fixed))
    return head + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))


def _match_value(m: re.Match[str]) -> Fraction | None:
    """Signed value of a `_NUMBER` match."""
    if m.group("rr") is not None:
        value: Fraction | None = _repeating(m.group("ri"), m.group("rf"), m.group("rr"))
    elif m.group("fn") is not None:
        value = _ratio(m.group("fn"), m.group("fd"))
    elif m.group("sn") is not None:
        value = _ratio(m.group("sn"), m.group("sd"))
    else:
        value = _ratio(m.group("n"), m.group("d"))
    sign = m.group("sign")
    if value is not None and sign is not None and sign.startswith("-"):
        value = -value
    return value


def _tail_ok(tail: str) -> bool:
    """True when `tail` (what follows a number) is only units / words / `%` / degrees."""
    if not tail:
        return True
    if tail[0].isalpha():
        word_len = len(tail) - len(tail.lstrip(_LETTERS))
        if word_len < 2:  # `5x`, `3n`: a variable, not a unit
            return False
    return _UNIT_TAIL.fullmatch(tail) is not None


def parse_number(text: str) -> Number | None:
    """The number `text` denotes when it is a number plus optional units; otherwise None."""
    s = normalise(text)
    m = _HEAD.match(s)
    if m is None:
        word = _NUMBER_WORDS.get(s.lower()) if len(s) < 10 else None
        return None if word is None else Number(word)
    tail = s[m.end() :]
    if not _tail_ok(tail):
        return None
    value = _match_value(m)
    return None if value is None else Number(value, "%" in tail)


def is_bare_number(text: str) -> bool:
    """True when the stripped text is exactly one clean numeral (`42`, `-3`, `17/3`, `0.5`)."""
    s = normalise(text)
    m = _HEAD.match(s)
    return m is not None and m.end() == len(s)


def _leads_in(prefix: str) -> bool:
    """True when `prefix` ends with `=`, `:` or a plain word, so the next number is the answer."""
    p = prefix.rstrip()
    if not p:
        return False
    if p[-1] in "=:":
        return True
    if not p[-1].isalpha():
        return False
    word_start = len(p.rstrip(_LETTERS + "'"))
    return word_start == 0 or p[word_start - 1] != "\\"


def last_number(text: str) -> Number | None:
    """The final number of a sentence-like answer ("so x = 5", "3 + 4 = 7"), else None."""
    s = normalise(text)
    last = None
    for last in _ANYWHERE.finditer(s):  # noqa: B007 - only the final match is wanted
        pass
    if last is None or last.start() == 0:
        return None
    tail = s[last.end() :]
    if not _tail_ok(tail) or not _leads_in(s[: last.start()]):
        return None
    value = _match_value(last)
    return None if value is None else Number(value, "%" in tail)


@lru_cache(maxsize=1 << 14)
def gold_number(answer: str) -> Number | None:
    """`parse_number` for gold answers, cached: one gold is compared with many samples."""
    return parse_number(answer)


@lru_cache(maxsize=1 << 16)
def _short_candidate_number(text: str) -> Number | None:
    return parse_number(text)


def candidate_number(text: str) -> Number | None:
    """`parse_number` for candidates; short ones are cached (samples often repeat)."""
    return _short_candidate_number(text) if len(text) <= 64 else parse_number(text)


def same_number(a: Number, b: Number) -> bool:
    """Exact equality, where a percent may also stand for its value / 100."""
    if a.value == b.value:
        return True
    if a.percent and a.value / 100 == b.value:
        return True
    return b.percent and b.value / 100 == a.value


def _squash(text: str) -> str:
    return "".join(normalise(text).split())


_HAS_DIGIT = re.compile(r"[0-9]")


def fast_path(candidate_text: str, answer: str) -> bool | None:
    """Decide an extracted candidate against the gold answer; None means "ask math-verify"."""
    if len(candidate_text) <= 256 and _squash(candidate_text) == _squash(answer) != "":
        return True
    gold = gold_number(answer)
    if gold is None:
        return None
    cand = candidate_number(candidate_text)
    if cand is None:
        cand = last_number(candidate_text)
    if cand is None and not _HAS_DIGIT.search(candidate_text):
        # Neither a number nor a digit (a tiny model's "===", "no idea"): judged unequal to a
        # numeric gold without math-verify. Digit-free symbolic forms equal to a number
        # (\frac{\pi}{\pi}) are the price; the fast path stays fast on garbage.
        return False
    return None if cand is None else same_number(cand, gold)
