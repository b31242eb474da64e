"""One committed final answer: the checks that stop a policy from being paid for hedging.

GRPO learns whatever the verifier pays for (seed 000 §4.3: a lax verifier "pushes the model the
wrong way"). A completion earns credit only for one value it commits to. This module holds the
three readings that decide that, each linear in the text and run before any equality test:

* `fold` maps Unicode digits to ASCII (`４２` is 42, `٤٢` too), fullwidth and typographic minus
  signs to `-`, and superscript digits to exponents (`4²` is `4^{2}`, not 4 followed by a unit);
  the unit reading `cm²` survives as `cm^{2}`.
* `hedge(candidate, gold)` names what makes an extracted answer something other than one value:
  alternatives (`5 or 7`, `3 \\text{ or } 4`, `either`, `\\pm`), relations and negations (`\\neq`,
  `\\le`, `< 42`, `\\approx`, `\\sim`, `not 42`, `42 is wrong`, and the negating words as a
  class: `cannot 42`, `isn't 42`, `none`, `negative 42`, ...), qualifiers (`about`, `maybe`,
  `at least`), ranges (`between 10 and 20`, `10 to 20`), several values where the gold has one
  (`5, 7`, `3 and 4`), and digits joined by spacing that is not thousands grouping in threes
  (`4 2`, `4\\,2`, `4~2`; `1\\,000` and `1 000 000` are numbers). Whatever the gold itself uses is
  allowed (a set gold admits a list; an inequality gold admits `\\le`). Such an answer is wrong,
  detail "hedged".
* `retraction(tail, value)` reads the text after the answer: a correction ("wait", "actually",
  "no,", "I made a mistake", "is wrong", ...) or a later statement of a different number as the
  answer ("... so the answer is 41") withdraws it: wrong, detail "retracted". Closing pleasantries
  ("I hope it is correct.") and restating the same value are fine.

Test: `.venv/bin/pytest tests/scoring/test_commit.py tests/scoring/test_adversarial.py -q`
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from pipeline.scoring import lexicon
from pipeline.scoring.units import NUMBER_WORDS, SCALE_WORDS, is_unit, unit_mismatch

HEDGED = "hedged"
RETRACTED = "retracted"

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPER_RUN = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
# Typographic minus signs read as `-`, and typographic apostrophes as `'` ("isn’t" is "isn't").
_MINUS_SIGNS = str.maketrans(
    {"−": "-", "－": "-", "‐": "-", "‑": "-", "﹣": "-", "＋": "+", "’": "'", "‘": "'", "ʼ": "'"}
)


def _superscript(m: re.Match[str]) -> str:
    return "^{" + m.group(0).translate(_SUPERSCRIPTS) + "}"


def fold(text: str) -> str:
    """ASCII digits and signs for their Unicode look-alikes; superscript digits as exponents."""
    if text.isascii():
        return text
    s = text.translate(_MINUS_SIGNS)
    if _SUPER_RUN.search(s) is not None:
        s = _SUPER_RUN.sub(_superscript, s)
    if not s.isascii():
        s = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in s)
    return s


# LaTeX wrappers that only style their content: `\text{ or }` reads as " or ".
_WRAPPER = re.compile(
    r"\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mbox|operatorname)\s*\{"
    r"([^{}]*)\}"
)
_RELATIONS = re.compile(
    r"\\(?:neq|ne|not|nleq|ngeq|leq|le|geq|ge|leqslant|geqslant|lt|gt|ll|gg|approx|sim|simeq|"
    r"cong|equiv|propto|pm|mp|lor|vee|neg|lnot|notin)(?![A-Za-z])"
    r"|[<>≤≥≠≈∼≃≅≡±∓∝¬∨∉]|!=|=/="
)
# Words that qualify, negate or offer alternatives: an answer carrying one is not committed.
# Negation is a class, not a word: any `n't` contraction (`isn't`, `can't`, `doesn't`, also
# written without the apostrophe), `cannot`, the negative pronouns and adverbs (`none`, `nothing`,
# `neither`, `never`, `nowhere`, `nope`, ...), `without` / `except` / `excluding` / `but`, the
# denials (`false`, `untrue`, `invalid`, `impossible`, `denied`, `rejected`, `refuted`, ...),
# `hardly` / `scarcely`, and a sign written as a word (`negative 42`, `minus 42`: read as 42 they
# were paid for 42). sieve-math/10; before it, `\text{isn't } 42` was not refused and was paid.
_NEGATIONS = (
    r"[a-z]+n't|(?:is|are|was|were|do|does|did|has|have|had|ca|could|would|should|wo|ai|must|"
    r"need|might|sha)nt|cannot|not|no|nor|never|none|nothing|nobody|nowhere|neither|nope|nay|"
    r"without|except|excluding|exclude[ds]?|but|wrong|incorrect|false|untrue|invalid|impossible|"
    r"deny|denies|denied|refuted?|refutes|reject|rejects|rejected|hardly|scarcely|non|negative|"
    r"minus"
)
_WORDS = re.compile(
    rf"(?<![A-Za-z\\])(?:{_NEGATIONS}|or|either|maybe|"
    r"perhaps|probably|possibly|likely|unlikely|approximately|approx|about|around|roughly|"
    r"nearly|almost|circa|somewhere|guess|unsure|uncertain|between|least|most|"
    r"more|less|fewer|greater|smaller|larger|than|over|under|above|below|up|unless|"
    r"if|otherwise|instead|alternatively)(?![A-Za-z'])",
    re.IGNORECASE,
)
_WORD_SET_CACHE: dict[str, frozenset[str]] = {}
# A list separator: `,` or `;` not flanked by digits on both sides (`1,000` and `1,5` are
# numerals, read by the numeric path), the word `and`, `&`, `\quad`.
_SEPARATOR = re.compile(
    r"(?<!\d),|,(?!\d)|;|\\q?quad(?![A-Za-z])|(?<![A-Za-z])and(?![A-Za-z])", re.IGNORECASE
)
# A range between two numbers: `10 to 20`, `10–20`, `10—20`, `10..20`, `10 ~ 20` is spacing.
_RANGE = re.compile(r"\d\s*+(?:(?<![A-Za-z])to(?![A-Za-z])|[–—]|\.\.\.?|…)\s*+[-+]?\s*+\d")
# Digits separated by spacing: `4 2`, `4\,2`, `4\!2`, `4~2`, `1 000 000`. Each run is checked
# for thousands grouping in threes with one kind of separator.
_SPACING = r"(?>[ \t]++|\\[,!;: ]|~|\\thinspace(?![A-Za-z])|\\q?quad(?![A-Za-z]))"
_SPACED_RUN = re.compile(rf"(?<!\d)\d++(?:{_SPACING}++\d++)++")
_SEP_SPLIT = re.compile(rf"{_SPACING}++")
_SINGLE_VALUE = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def _plain(text: str) -> str:
    """`text` with style wrappers opened, for the word and separator scans."""
    s = text
    for _ in range(3):  # nested wrappers, a bounded number of passes (each linear)
        if "\\" not in s or "{" not in s:
            break
        opened = _WRAPPER.sub(r" \1 ", s)
        if opened == s:
            break
        s = opened
    return s


def _words(text: str) -> frozenset[str]:
    cached = _WORD_SET_CACHE.get(text)
    if cached is None:
        cached = frozenset(m.group(0).lower() for m in _WORDS.finditer(_plain(text)))
        if len(_WORD_SET_CACHE) > 4096:
            _WORD_SET_CACHE.clear()
        _WORD_SET_CACHE[text] = cached
    return cached


def _relations(text: str) -> frozenset[str]:
    return frozenset(m.group(0) for m in _RELATIONS.finditer(text))


def _is_grouping(run: str) -> bool:
    """True when a digit run with spacing is thousands grouping: `1 000`, `12\\,345\\,678`."""
    groups = _SEP_SPLIT.split(run)
    seps = set(_SEP_SPLIT.findall(run))
    if len(seps) != 1 or not 1 <= len(groups[0]) <= 3 or groups[0].startswith("0"):
        return False
    return all(len(g) == 3 for g in groups[1:])


def _has_list(text: str) -> bool:
    """True when some list separator in `text` has a value on both sides."""
    plain = _plain(text).replace("{,}", ",").replace(",\\!", ",").replace("\\,", " ")
    first = len(plain) - len(plain.lstrip(" $()[]{}\\"))  # first character with content
    last = len(plain.rstrip(" $()[]{}.\\"))  # just after the last one
    return any(first < m.start() and m.end() < last for m in _SEPARATOR.finditer(plain))


_COLLECTION_MARKS = ("\\{", "\\cup", "\\cap", "(", "[", "\\pm", "\\mp", "±", "\\infty", ";")
_SINGLE_NUMBER = re.compile(r"\$*\s*-?\s*\d{1,3}(?:,\d{3})+(?:\.\d+)?\s*\$*")


def _gold_is_collection(gold: str) -> bool:
    """True when the gold itself holds several values: a list, set, tuple, interval, `\\pm`, an
    inequality, or several boxes (a gold `1,000` is one number)."""
    if "," in gold and _SINGLE_NUMBER.fullmatch(gold.strip()) is None:
        return True
    if gold.count("\\boxed") > 1 or _relations(gold):
        return True
    return _SEPARATOR.search(_plain(gold)) is not None or any(m in gold for m in _COLLECTION_MARKS)


# An equation whose left side is an expression in a variable (`7x = 7`, `x - 2 = 2`): the number
# after `=` is the value of that expression, not of the unknown the gold gives.
_VARIABLE_TERM = re.compile(
    r"\d\s*+[a-z](?![A-Za-z])|(?<![A-Za-z\\])[a-z]\s*+[-+*/^]|[-+*/]\s*+[a-z](?![A-Za-z])"
)


def _expression_equation(candidate: str) -> bool:
    """True when the last `=` of `candidate` has an expression in a variable on its left."""
    last = candidate.rfind("=")
    if last < 0:
        return False
    left = candidate[candidate.rfind("=", 0, last) + 1 : last]
    return _VARIABLE_TERM.search(_plain(left)) is not None


# A trailing negated alternative: "5 apples, not 6", "6 (not 5)", "42 rather than 41". The value
# before it is the one committed to; the clause is dropped before the hedge scan.
_NOT_WINDOW = 80
_NOT_CLAUSE = re.compile(
    r"(?:,|\(|\s)\s*(?:and\s+|but\s+)?(?:not|rather than|instead of)\s+[^,;()]{1,40}\)?\s*$",
    re.IGNORECASE,
)
# Where the last clause of an unmarked answer starts: a sentence mark, or "so" / "thus" / ... .
_CLAUSE = re.compile(r"[.;:\n](?=\s)|\b(?:so|thus|hence|therefore|then)\b", re.IGNORECASE)


_DIGITS = re.compile(r"\d+(?:\.\d+)?")


def drop_negated(text: str) -> str:
    """`text` without a trailing negated alternative ("5 apples, not 6" gives "5 apples"); the
    text itself when nothing would be left ("not 42") or when the negated clause denies the
    kept number ("1 is not equal to 1", SmolLM2's: a contradiction, left for the hedge scan)."""
    head = max(0, len(text) - _NOT_WINDOW)  # the clause ends the text: a bounded search
    m = _NOT_CLAUSE.search(text, head)
    if m is None or not text[: m.start()].strip(" $"):
        return text
    kept = _DIGITS.findall(text[: m.start()])
    if kept and kept[-1] in _DIGITS.findall(m.group(0)):
        return text
    return text[: m.start()]


def last_clause(text: str) -> str:
    """The final clause of an unmarked answer ("we have 2 and 3 more, so the total is 5" gives
    "the total is 5"): the part whose last number is the answer, and the part hedges are read in."""
    content_end = len(text.rstrip())
    start = 0
    for m in _CLAUSE.finditer(text):
        if m.end() < content_end:
            start = m.end()
    return text[start:]


@dataclass(frozen=True, slots=True)
class _Gold:
    """What the hedge scan needs to know of a gold answer (computed once per gold)."""

    words: frozenset[str]
    relations: bool
    has_range: bool
    single_value: bool
    collection: bool


@lru_cache(maxsize=1 << 14)
def _gold(gold: str) -> _Gold:
    g = fold(gold)
    return _Gold(
        words=_words(g),
        relations=bool(_relations(g)),
        has_range=_RANGE.search(g) is not None,
        single_value=_SINGLE_VALUE.fullmatch(g.strip(" $")) is not None,
        collection=_gold_is_collection(g),
    )


# A candidate that is one plain numeral (`42`, `-3`, `17/3`, `0.5`, `\\frac{1}{2}`) cannot hedge:
# the scans below are skipped for it (most answers of a batch).
_PLAIN_NUMERAL = re.compile(
    r"\s*\$?\s*[-+]?(?:\d+(?:\.\d+)?(?:/\d+)?|\\[dt]?frac\{\d+\}\{\d+\})\s*\$?\s*\.?\s*"
)
_HAS_LETTER = re.compile(r"[A-Za-z]")
_RELATION_CHARS = re.compile(r"[\\<>≤≥≠≈∼≃≅≡±∓∝¬∨∉!]")


# A marked answer that opens with one number and ends with another, with words and no `=` between
# ("the answer is 2 in the binary representation of 1", gold 1; SmolLM2 in Sieve seed 2's
# evaluation): the number it commits to is the first, while the last-number reading pays the
# second. Exponents (`cm^{2}`) and digits inside words are not numbers here.
_OPENING_NUMBER = re.compile(
    r"\s*+(?:\$|\\\(|\*\*)?\s*+(?P<num>-?\d++(?:\.\d++)?(?:/\d++)?)(?=\s++[A-Za-z]{2})"
)
_LATER_NUMBER = re.compile(r"(?<![\w.^_{/\\])\d++(?:\.\d++)?(?:/\d++)?(?![\w])")


def _opens_with_another_number(text: str) -> bool:
    """True when `text` opens with a number followed by words and states a different number last,
    with no `=` that would make the last one a result."""
    opening = _OPENING_NUMBER.match(text)
    if opening is None or "=" in text:
        return False
    last = None
    for last in _LATER_NUMBER.finditer(text, opening.end()):  # noqa: B007 - the final one
        pass
    if last is None:
        return False
    try:
        return Fraction(opening.group("num")) != Fraction(last.group(0))
    except (ValueError, ZeroDivisionError):
        return True


def hedge(
    candidate: str,
    gold: str,
    *,
    relations: bool = True,
    allowed: frozenset[str] = frozenset(),
    boxed: bool = False,
) -> str | None:
    """What keeps `candidate` (an extracted answer) from committing to one value, or None.

    The returned text names the construct (`or`, `\\neq`, `several values`, `joined digits`, a
    word the gold does not hold, `unit km`). `relations=False` (the lenient raw reading, as
    math-verify's own tables expect) leaves relation symbols (`x \\geq 5`, `x \\approx 11`) to
    math-verify; a gold that is itself a relation admits them in any case.

    `boxed=True` (the answer is a box's contents): any word the gold does not hold is refused
    (`foreign_word`; `allowed`, further words it may hold, e.g. `question_words`). An answer
    that runs to the end of a sentence after a phrase ("The answer is 5 apples because ...") is
    prose: there the lexicon's negating, hedging and conditional words of every language are
    refused (`lexicon_word`).
    """
    if len(candidate) < 64 and _PLAIN_NUMERAL.fullmatch(candidate) is not None:
        return None
    c = fold(candidate)
    known = _gold(gold)
    word = _word_hedge(c, gold, known, allowed, boxed)
    if word is not None:
        return word
    if relations and not known.relations and _RELATION_CHARS.search(c) is not None:
        found = _relations(c)
        if found:
            return sorted(found)[0]
    if not known.has_range and _RANGE.search(c) is not None:
        return "range"
    if relations and known.single_value and "=" in c and _expression_equation(c):
        return "equation"
    for run in _SPACED_RUN.finditer(c):
        if not _is_grouping(run.group(0)):
            return "joined digits"
    if not known.collection and _has_list(c):
        return "several values"
    if relations and known.single_value and _opens_with_another_number(c):
        return "several values"
    return None


def _word_hedge(
    c: str, gold: str, known: _Gold, allowed: frozenset[str], boxed: bool
) -> str | None:
    """The word that keeps the folded answer `c` from being one value (see `hedge`), or None."""
    if _HAS_LETTER.search(c) is not None:
        words = _words(c) - known.words
        if words:
            return sorted(words)[0]
    word = foreign_word(c, gold, allowed) if boxed else lexicon_word(c, gold)
    if word is not None:
        return word
    if _HAS_LETTER.search(c) is None:
        return None
    unit = unit_mismatch(c, fold(gold))
    return None if unit is None else f"unit {unit}"


# Text after an answer that withdraws it. Word-bounded, case-insensitive, linear.
_RETRACT = re.compile(
    r"(?<![A-Za-z])(?:wait|actually|oops|nope|correction|scratch that|on second thought|"
    r"mistake|mistaken|i was wrong|i am wrong|i'm wrong|"
    r"(?:is|was|are|[a-z]*'s) (?:wrong|incorrect|false|untrue|invalid)|not correct|not right|"
    r"[a-z]*n't (?:right|correct)|(?:not|[a-z]*n't) the (?:final |correct |right )?answer|"
    r"(?:cannot|can't|couldn't) be (?:right|correct|the answer)|never ?mind|"
    r"hmm+|or maybe|or perhaps|i think it's|should have been)"
    r"(?![A-Za-z])"
    r"|(?<![A-Za-z])no ?[,!]",
    re.IGNORECASE,
)
# A later statement of the answer: "the answer is 41", "answer: 41", "the answer is: 41", "result
# = 41", "the final calculation results in 41", and the reversed "41 is the answer" (SmolLM2 after
# DAPO training: "The final answer is 0. ... 64 is the answer we are looking for"). The number may
# sit in `$...$`, `\\(...\\)`, `\\boxed{}` or bold, after a filler word ("the answer is therefore
# 41"), and "N, which is the final answer"; a restated equation counts by its last side ("the
# answer is 5 - 5 = 0", `_CHAIN`).
_NUMBER = r"[-+]?\d++(?:,\d++)*+(?:\.\d++)?(?:\s*+/\s*+\d++)?"  # not a trailing comma
_STATING = (
    r"(?:is|was|would be|should be|will be|=|:|equals|results in|comes to|comes out to)"
    r"(?:\s*+:)?"
)
_FILLER = r"(?:\s++(?:therefore|thus|then|indeed|still|now|simply|just|clearly)\b,?)?"
_FINAL_NOUN = r"(?:calculation|result|count|value|number|total|sum|amount|figure|output)"
_WRAP = r"(?:\s*+(?:\*++|\$|\\\(|\\\[|\\(?:boxed|fbox)\s*+\{))*+"
_SUBJECT = rf"(?:answer|result|total|solution|final\s++{_FINAL_NOUN})"
_RESTATED = re.compile(
    rf"(?:{_SUBJECT}\s*+{_STATING}{_FILLER}|(?:it|this|that)\s++(?:should|must|would)\s++be)"
    rf"{_WRAP}\s*+(?P<num>{_NUMBER})"
    rf"|(?<![\w.,])(?P<before>{_NUMBER})\s*+\$?\s*+\**+\s*+(?:,\s*+which\s++)?"
    r"(?:is|was|would be|should be)\s++"
    r"(?:the|our|my)\s++(?:final\s++|correct\s++|right\s++|true\s++)?(?:answer|solution)",
    re.IGNORECASE,
)
# An arithmetic chain after a restated number, ending in its value: " - 5 = 0", " \\times 3 = 6",
# " mod 6 = 3".
_CHAIN = re.compile(
    r"(?:\s*+(?:[-+*/×·%]|\\times|\\cdot|\\div|\\[bp]?mod\b|mod\b)\s*+"
    rf"{_NUMBER})++\s*+=\s*+\$?\s*+(?P<res>{_NUMBER})"
)


def retraction(tail: str, value: Fraction | None) -> str | None:
    """What in `tail` (the text after the answer) withdraws the answer, or None.

    `value` is the answer's number when it has one; a restatement of the same number is fine.
    """
    t = fold(tail)
    if "\\" in t or "{" in t:
        t = t.replace("{,}", ",").replace("\\!", "").replace("\\,", "")
    m = _RETRACT.search(t)
    if m is not None:
        return m.group(0).strip(" .,!?:\n").lower() or "no"
    for restated in _RESTATED.finditer(t):
        try:
            said = restated.group("num") or restated.group("before")
            if restated.group("num") is not None:
                chain = _CHAIN.match(t, restated.end())
                if chain is not None:
                    said = chain.group("res")
            number = Fraction(said.replace(",", "").replace(" ", ""))
        except (ValueError, ZeroDivisionError):
            continue
        if value is None or number != value:
            return "restated"
    return None


# --- One committed answer, whatever the language -------------------------------------------------
#
# Inside the answer: any word, in any script, that the gold does not hold makes it something other
# than one value, except a recognised unit (pipeline/scoring/units.py; it must match the gold's
# when the gold states one), a number word, a variable (one Latin or Greek letter used as one:
# `x = 5`, `2n`) and a word of the question that the lexicon does not list (`18 cookies` for "How
# many cookies ..."). Around it: the sentence that offers the answer and the text after it are
# read against the multilingual lexicon (pipeline/scoring/lexicon.py).

_ENVIRONMENT = re.compile(r"\\(?:begin|end)\s*+\{[A-Za-z*]{1,20}\}")  # `\\begin{aligned}`
_LETTERS_RUN = re.compile(r"(?<![\\])(?<![^\W\d_])[^\W\d_]+")
_ANY_LETTER = re.compile(r"[^\W\d_]")
_VARIABLE = re.compile(r"[A-Za-zα-ωΑ-Ω]")
_MATH_NEXT = re.compile(r"\s*+(?:[=+\-*/^_(),<>\]}|]|\\(?:cdot|times|le|ge|neq)\b)")
_MATH_PREV = "0123456789({[+-*/^_=|"
_NUMBER_WORDS = frozenset(NUMBER_WORDS) | {"hundred"}


@lru_cache(maxsize=1)
def _lexicon_words() -> frozenset[str]:
    every = lexicon.words(lexicon.LANGUAGES, lexicon.CATEGORIES)
    return every | SCALE_WORDS | _words_of(" ".join(_NEGATION_LIST))


_AND = frozenset({"and"})
_NEGATION_LIST = ("but", "except", "without", "nothing", "nobody", "nowhere", "nope", "untrue")


def _words_of(text: str) -> frozenset[str]:
    return frozenset(m.group(0).lower() for m in _LETTERS_RUN.finditer(text))


@lru_cache(maxsize=1 << 12)
def question_words(question: str) -> frozenset[str]:
    """The words of `question` an answer may repeat (count nouns such as `cookies`): every word
    of two or more letters that the lexicon does not list as negating, hedging or scaling."""
    return frozenset(w for w in _words_of(_plain(question)) if len(w) > 1) - _lexicon_words()


def _is_variable(text: str, m: re.Match[str]) -> bool:
    """True when the one-letter word `m` is used as a variable: followed by `=` or an operator,
    or written against a digit or an opening mark (`2n`, `(x`)."""
    if _VARIABLE.fullmatch(m.group(0)) is None:
        return False
    if m.start() > 0 and text[m.start() - 1] in _MATH_PREV:
        return True
    if text.strip(" ${}().") == m.group(0):
        return True
    return _MATH_NEXT.match(text, m.end()) is not None


def foreign_word(candidate: str, gold: str, allowed: frozenset[str] = frozenset()) -> str | None:
    """The first word of `candidate` that is not part of one value, or None (see above).

    `allowed` are further words the answer may hold (`question_words` of its question)."""
    if _ANY_LETTER.search(candidate) is None:
        return None
    text = _plain(_ENVIRONMENT.sub(" ", candidate))
    gold_words = _words_of(_plain(fold(gold)))
    if _gold(gold).collection:  # `(5, 8) \\text{ and } (8, 5)` lists the gold's values
        gold_words |= _AND
    for m in _LETTERS_RUN.finditer(text):
        word = m.group(0).lower()
        if word in gold_words or word in _NUMBER_WORDS or is_unit(word):
            continue
        if len(word) == 1 and word not in _lexicon_words() and _is_variable(text, m):
            continue
        if len(word) > 1 and word in allowed:
            continue
        return m.group(0)
    return None


def lexicon_word(candidate: str, gold: str) -> str | None:
    """The first negating, alternative, conditional, hedging or denying word of any language in
    `candidate` that the gold does not hold, or None."""
    if _ANY_LETTER.search(candidate) is None:
        return None
    gold_words = _words_of(_plain(fold(gold)))
    for m in _lexicon_pattern(False, _PROSE_REFUSED).finditer(_plain(candidate)):
        if m.group(0).lower() not in gold_words:
            return m.group(0)
    return None


_PROSE_REFUSED: tuple[lexicon.Category, ...] = (
    "negation",
    "alternative",
    "condition",
    "hedge",
    "denial",
)


def _lexicon_pattern(
    foreign_only: bool, categories: tuple[lexicon.Category, ...]
) -> re.Pattern[str]:
    if foreign_only:
        return lexicon.english_free_pattern(lexicon.FOREIGN, categories)
    return lexicon.pattern(lexicon.LANGUAGES, categories)


# The sentence that offers an answer starts after the last sentence mark or line break before it;
# its clause after the last comma or colon.
_SENTENCE_MARK = re.compile(r"[.!?](?=\s)|[\n;。！？；]")
_CLAUSE_MARK = re.compile(r"[,:，、：]")
_OFFER_WINDOW = 240
_UNCERTAIN: tuple[lexicon.Category, ...] = ("hedge",)
_GOVERNING: tuple[lexicon.Category, ...] = ("negation", "alternative", "condition", "hedge")


def offered_under(completion: str, start: int) -> str | None:
    """What in the sentence offering the answer at `start` keeps it from being committed, or None:
    a negation, alternative, condition or hedge in the clause right before it ("the answer is not
    \\boxed{5}", "otherwise \\boxed{5}", "es ist nicht \\boxed{5}"), or a hedge anywhere in its
    sentence ("I'm not sure, but perhaps ... \\boxed{5}")."""
    if start <= 0:
        return None
    head = completion[max(0, start - _OFFER_WINDOW) : start]
    sentence = head
    for sentence_mark in _SENTENCE_MARK.finditer(head):
        sentence = head[sentence_mark.end() :]
    clause = sentence
    for clause_mark in _CLAUSE_MARK.finditer(sentence):
        clause = sentence[clause_mark.end() :]
    clause = fold(_plain(clause))
    found = _lexicon_pattern(False, _GOVERNING).search(clause)
    if found is None:
        found = _lexicon_pattern(False, _UNCERTAIN).search(fold(_plain(sentence)))
    return None if found is None else found.group(0).lower()


_AFTER_WINDOW = 400
_SAME_SENTENCE = re.compile(r"[.!?](?:\s|$)|[\n。！？]")
_WITHDRAWING: tuple[lexicon.Category, ...] = lexicon.CATEGORIES


def withdrawn_after(tail: str) -> str | None:
    """What right after an answer conditions or withdraws it, or None: a condition, alternative,
    negation or hedge in the rest of its own sentence ("\\boxed{5} if n is odd", "\\boxed{5} oder
    6"), or any negating, denying or correcting word of a language other than English in the text
    that follows ("\\boxed{5}. Nein, das ist falsch."; English corrections are `retraction`'s)."""
    window = fold(tail[:_AFTER_WINDOW])
    end = _SAME_SENTENCE.search(window)
    same = _plain(window if end is None else window[: end.start()])
    found = _lexicon_pattern(False, _GOVERNING).search(same)
    if found is None:
        found = _lexicon_pattern(True, _WITHDRAWING).search(_plain(window))
    return None if found is None else found.group(0).lower()
