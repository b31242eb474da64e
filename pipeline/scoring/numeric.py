"""The exact/numeric fast path: decide `candidate == gold` for plain numbers without math-verify.

Understands integers, decimals, `a/b`, `\\frac{a}{b}` (also `\\dfrac`, `\\tfrac`, `\\frac12`), signs
(ASCII `-`, unicode minus U+2212, a leading en-dash), thousands separators with valid grouping
(`1,000,000`, LaTeX `1{,}000`), `$...$` / `\\(...\\)` wrappers, `\\text{}` and trailing unit words
(`42 apples`, `17/3 hours`, `5\\text{ cm}`), degrees and percent, small e-exponents (`1e3`),
repeating decimals (`0.\\overline{3}`) and the number words zero..twenty, thirty..ninety.
Values are compared exactly with `fractions.Fraction`, so `1/2 == 0.5 == \\frac{1}{2}` but
`0.333 != 1/3` (a rounded decimal is a different number; math-verify would also accept `0.333333`,
the fast path never does). A percent matches its face value, or that value / 100 when the gold
is not a whole number (`50%` equals both `50` and `0.5`, as in math-verify; `100%` is not `1`).

The fast path says "correct" on an exact match and "wrong" only for two clean numbers that differ.
Readings that are guesses are marked `certain=False` and, when unequal, defer to math-verify
(None): a decimal comma (`1,22`, `0,111`, `1000,99`), digit groups split by spaces (`1 000`), and
decimals with 10+ digits after the point that may be the gold rounded (a float print-out such as
`0.0833333333333333` for 1/12).
An ellipsis (`0.08333...`) is not a clean number at all.

When the candidate is not itself a number but ends in one after `=`, `:` or a word ("so x = 5",
"3 + 4 = 7", "the total is 12 dollars"), that last number is the answer. Anything else (`2^{10}`,
`\\sqrt{2}`, `5+2`) is left undecided (None) for math-verify. `is_unevaluated` spots arithmetic over
numbers in the final value (`40+9*69`), which the verifier rejects for numeric golds in marker
mode. Every regex here is linear-time.

Test: `.venv/bin/pytest tests/scoring/test_numeric.py -q`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from pipeline.scoring.commit import fold
from pipeline.scoring.units import NUMBER_WORDS

_NUM = r"(?:[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)"
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
# Numerals whose reading is a guess: a decimal comma (`1,22`, `0,111`, `1000,99`: a comma not
# followed by exactly three digits, or after a leading zero or four digits) or spaces between
# digit groups (`1 000`). Equal under that reading counts; unequal defers to math-verify.
_DECIMAL_COMMA = re.compile(r"(?P<sign>[-+])?(?P<whole>\d+),(?P<frac>\d+)")
_SPACED = re.compile(r"(?P<sign>[-+])?(?P<whole>[1-9]\d{0,2}(?: \d{3})+)(?P<frac>\.\d+)?")
_LONG_DECIMAL = re.compile(r"\.(\d{10,})")  # a float print-out (0.0833333333333333): maybe rounded
_ANYWHERE = re.compile(rf"(?<![\w.]){_NUMBER}")
_UNIT_TAIL = re.compile(r"(?:[A-Za-z\s.%°]|(?<=[A-Za-z])\^\{?[23]\}?)*")  # cm^2, not 10^3
_NUMBER_WORDS = {w: Fraction(v) for w, v in NUMBER_WORDS.items()}
_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textrm|textit|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}"
)
# `^\circ`, `^{\circ}`, `\circ`, `\degree`. Each run of spaces is possessive (`\s*+`): with a
# plain `\s*\{?\s*`, a long run of spaces after `^` was split every possible way (quadratic).
_DEGREE = re.compile(r"\^\s*+\{?\s*+\\circ\s*+\}?|\\circ|\\degree")
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
# What Python's float() reads as NaN or an infinity. No such answer is ever correct (ingest refuses
# such golds); LaTeX `\infty` is a symbol, not a float spelling, and stays for math-verify.
_NON_FINITE = re.compile(r"[-+]?(?:nan|inf|infinity)", re.IGNORECASE)
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MAX_DIGITS = 4000  # Python refuses int() on longer strings; such answers go to math-verify


@dataclass(frozen=True, slots=True)
class Number:
    """A parsed numeric answer: its exact value and whether it carried a percent sign."""

    value: Fraction
    percent: bool = False
    certain: bool = True  # False: a guessed reading (decimal comma, spaced groups); see fast_path
    digits: int = 0  # digits after the point when 10 or more (maybe a rounded float), else 0


def normalise(text: str) -> str:
    """Strip wrappers and layout-only LaTeX so that equal answers compare equal as strings."""
    s = fold(text.strip())
    if s.startswith("–"):
        s = "-" + s[1:]
    if "\\" in s or "$" in s or "{" in s or "~" in s:
        s = _DEGREE.sub("°", s)
        s = _TEXT_CMD.sub(r" \1", s)
        for old, new in _SIMPLE_SUBS:
            if old in s:
                s = s.replace(old, new)
        s = s.strip()
    if s.endswith((".", ",", ";")) and not s.endswith(".."):  # sentence mark, not an ellipsis
        s = s[:-1].rstrip()
    return s


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
    """Signed value of a `_NUMBER` match; None when a numeral is out of range."""
    if m.group("rr") is not None:
        if len(m.group("ri")) + len(m.group("rf")) > _MAX_DIGITS:
            return None
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
    if ".." in tail:  # an ellipsis: more digits follow
        return False
    if tail[0].isalpha():
        word_len = len(tail) - len(tail.lstrip(_LETTERS))
        if word_len < 2:  # `5x`, `3n`: a variable, not a unit
            return False
    return _UNIT_TAIL.fullmatch(tail) is not None


def _long_digits(numeral: str) -> int:
    """Digits after the decimal point of `numeral` when there are 10 or more, else 0."""
    m = _LONG_DECIMAL.search(numeral)
    return 0 if m is None else len(m.group(1))


def _guessed(s: str) -> Number | None:
    """A decimal-comma or space-grouped numeral (the whole of `s`), read as a guess."""
    m = _DECIMAL_COMMA.fullmatch(s)
    if m is not None:
        whole, frac = m.group("whole"), m.group("frac")
        if len(frac) == 3 and len(whole) <= 3 and whole[0] != "0":
            return None  # `1,234`: a thousands separator, the ordinary reading
        value = _fraction(f"{whole}.{frac}")
    else:
        m = _SPACED.fullmatch(s)
        if m is None:
            return None
        value = _fraction(m.group("whole").replace(" ", "") + (m.group("frac") or ""))
    if value is None:
        return None
    return Number(-value if m.group("sign") == "-" else value, certain=False)


def parse_number(text: str) -> Number | None:
    """The number `text` denotes when it is a number plus optional units; otherwise None."""
    s = normalise(text)
    if "," in s or " " in s:
        guessed = _guessed(s)
        if guessed is not None:
            return guessed
    m = _HEAD.match(s)
    if m is None:
        word = _NUMBER_WORDS.get(s.lower()) if len(s) < 10 else None
        return None if word is None else Number(word)
    tail = s[m.end() :]
    if not _tail_ok(tail):
        return None
    value = _match_value(m)
    if value is None:
        return None
    return Number(value, "%" in tail, digits=_long_digits(m.group(0)))


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
    if value is None:
        return None
    return Number(value, "%" in tail, digits=_long_digits(last.group(0)))


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


def same_number(cand: Number, gold: Number) -> bool:
    """Exact equality, where a percent may also stand for its value / 100.

    A candidate's percent is read as a fraction only against a gold that is not a whole number
    (`25%` for 0.25): against a whole gold it pays nonsense (SmolLM2 answered `217 mod 4`, gold
    1, with "the final answer is 100%", and sieve-math/6 paid it). A percent gold (`10%`) still
    admits its fraction (`0.1`)."""
    if cand.value == gold.value:
        return True
    if cand.percent and gold.value.denominator != 1 and cand.value / 100 == gold.value:
        return True
    return gold.percent and gold.value / 100 == cand.value


def is_non_finite(text: str) -> bool:
    """True when `text` is a float spelling of NaN or an infinity (`nan`, `-inf`, `Infinity`)."""
    return len(text) < 64 and _NON_FINITE.fullmatch(normalise(text)) is not None


def _squash(text: str) -> str:
    return "".join(normalise(text).split())


_HAS_DIGIT = re.compile(r"[0-9]")


# An arithmetic operator between two numeric operands: `40+9*69`, `75 + 74 - 77`, `2^{10}`, `3!`,
# `679 mod 65`. A single `a/b` is a fraction (a number), not an operation. Linear: one `\s*`
# per gap, the optional sign takes its own spaces, so no two quantifiers compete for a run.
_OPERATION = re.compile(
    r"(?:\d|[)}\]])\s*(?:[-+*×·÷^]|\\cdot|\\times|\\div|\\ast|\\[bp]?mod|mod\b)"
    r"\s*(?:[-+]\s*)?(?:\d|[({\[.]|\\[dt]?frac|\\sqrt)"
    r"|\d\s*!"
)


def is_unevaluated(text: str) -> bool:
    """True when the final value of `text` (after its last `=`) is arithmetic over numbers.

    `40+9*69` and `75 + 74 - 77 =` are unevaluated; `3 + 4 = 7`, `-5`, `17/3`, `\\frac{1}{2}`,
    `\\sqrt{2}` and `1,000` are not. Used for numeric golds in marker mode: a copied question is
    not an answer.
    """
    s = normalise(text).rstrip().rstrip("=").rstrip()
    final = s[s.rfind("=") + 1 :]
    return _OPERATION.search(final) is not None


def fast_path(candidate_text: str, answer: str) -> bool | None:
    """Decide an extracted candidate against the gold answer; None means "ask math-verify".

    "Correct" needs an exact match under some reading; "wrong" needs two clean numbers that
    differ (or a digit-free candidate). A guessed reading (`1,22`, `1 000`, a 10+ digit decimal
    such as `0.0833333333333333`), a list, a set or anything unparsed defers.
    """
    return decide(candidate_text, answer)[0]


def decide(candidate_text: str, answer: str) -> tuple[bool | None, bool]:
    """`(fast_path's decision, whether it rests on a guess)`: a guessed reading judged equal
    (`1,5` for 1.5, `1 000` for 1000). Unequal guesses defer to math-verify instead."""
    if len(candidate_text) <= 256 and _squash(candidate_text) == _squash(answer) != "":
        return True, False
    gold = gold_number(answer)
    if gold is None:
        return None, False
    cand = candidate_number(candidate_text)
    if cand is None:
        cand = last_number(candidate_text)
    if cand is None:
        # Neither a number nor a digit (a tiny model's "===", "no idea"): judged unequal to a
        # numeric gold without math-verify. Digit-free symbolic forms equal to a number
        # (\frac{\pi}{\pi}) are the price; the fast path stays fast on garbage.
        return (None, False) if _HAS_DIGIT.search(candidate_text) else (False, False)
    if same_number(cand, gold):
        return True, not (cand.certain and gold.certain)
    if not (cand.certain and gold.certain):
        return None, False
    if _maybe_rounded(cand, gold) or _maybe_rounded(gold, cand):
        return None, False
    return False, False


def _maybe_rounded(a: Number, b: Number) -> bool:
    """True when `a` is a long decimal that may be `b` rounded: `b` needs more digits than `a`
    shows and lies within ten units of its last digit (0.0833333333333333 for 1/12)."""
    if a.digits == 0:
        return False
    scale = 10**a.digits
    return (b.value * scale).denominator != 1 and abs(a.value - b.value) * scale <= 10
