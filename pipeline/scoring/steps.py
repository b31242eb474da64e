"""Step verification: the checkable fragments of a completion, each judged right or wrong.

A fragment-level ("process") reward needs to know *where* a completion goes wrong, not only
whether its final answer is right (seeds/003: trajectories compared "fragment by fragment —
aligned prefixes or logical steps"). `check_steps` returns those fragments as `Step(start, end,
correct, kind)`, char spans of the completion in text order:

* `equation` steps. `split_steps` cuts the completion into lines, and lines into sentences
  (at `.`, `!`, `?` or `;` followed by a space), and keeps those holding an `=`. In a step, every
  run of arithmetic characters holding an `=` is an equation `e0 = e1 = ...`; each side is
  parsed with `ast` restricted to numbers, `x`, `+ - * /`, parentheses and unary signs (never
  `eval`; `**`, `^`, names and calls make it uncheckable), and evaluated exactly with
  `fractions.Fraction`. Literals over `MAX_DIGITS` digits or sides over `MAX_SIDE_CHARS`
  characters are not checked (no huge arithmetic). `x` is known only for linear problems
  (family `linear`, or an unknown family whose question reads `...=..., x`): it is the gold
  answer (or a `solution` / `x` number in the params JSON), so `7x = 21`, `x = 3` and
  `7*3 = 21` are all checked by substitution. A link `a = b` of a chain holds when both sides
  are equal or, in the running-total style models write (`3*4 = 12 + 1 = 13`), when `b` starts
  from the value of `a`; a side written as a bare decimal with >= 2 decimals also holds when the
  other side rounds to it (`2/3 = 0.67`). A step is correct when all its checkable equations
  hold, and not checkable (left out) when none is: prose arithmetic (`3 times 4 = 12`,
  `(36*27) mod 42 = 6`), an equation glued to a letter or symbol (`f(3) = 9`, `50% = 1/2`), a
  division by zero.
* `prefix` fragments, when no step is checkable — the tiny built-in policy answers
  `question=` with a bare number, so it never writes an equation. Fragment k is the k-th
  character of the extracted answer; it is correct iff the answer's first k characters equal the
  gold answer's (so gold `25`: `27` gives [True, False], `250` gives [True, True, False], a
  character beyond the gold's length is wrong). An answer the verifier judged correct in
  another spelling (`0.5` for `1/2`) has every fragment correct.

At most `MAX_STEPS` fragments per completion; the scan is linear in the completion's length.
`step_accuracy(steps)` is the share of correct `equation` steps (None without one): the
verifiers report it as the reward component `step_accuracy`, weight 0 unless a `RewardSpec`
gives it one. The fragments themselves go to `grpo_core.types.Scores.steps` and the ledger's
`rollout_steps` table.

Test: `.venv/bin/pytest tests/scoring/test_steps.py -q`
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, NamedTuple

from pipeline.scoring.extract import extract

Kind = Literal["equation", "prefix"]
MAX_STEPS = 256  # fragments per completion; later ones are not reported
MAX_DIGITS = 30  # digits of one literal; longer ones make the equation uncheckable
MAX_SIDE_CHARS = 200  # characters of one side of an equation
ROUND_MIN_DECIMALS = 2  # a bare decimal with this many decimals may be a rounded value


class Step(NamedTuple):
    """One checkable fragment: completion[start:end], judged correct or not."""

    start: int
    end: int
    correct: bool
    kind: Kind


@dataclass(frozen=True)
class StepContext:
    """What the step checker knows about the problem besides the gold answer."""

    question: str = ""
    family: str = ""  # "" when unknown (the trainer only has the rendered prompt)
    params_json: str | None = None


class _Unchecked(Exception):
    """This side or equation cannot be checked."""


_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_LATEX = (
    (re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}"), r"((\1)/(\2))"),
    (re.compile(r"\\(?:times|cdot|ast)(?![A-Za-z])"), "*"),
    (re.compile(r"\\div(?![A-Za-z])"), "/"),
    (re.compile(r"\\(?:left|right)(?![A-Za-z])|\\[,;! ]|\$"), " "),
)
_UNICODE = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_RUN = re.compile(r"[0-9.x+\-*/()=^\s]+")
_IMPLICIT = (re.compile(r"(?<=[\dx)])\s*(?=[x(])"), re.compile(r"(?<=[x)])\s*(?=\d)"))
_BARE_DECIMAL = re.compile(r"^-?\d+\.(\d+)$")
# words that make a number next to an equation part of the arithmetic ("3 times 4 = 12",
# "= 3 squared"); before an equation a few more ("half of 8 = 4"), after it "of" is plain prose
# ("7/24 of the tank")
_WORDS_AFTER = frozenset(
    {"times", "plus", "minus", "divided", "multiplied", "over", "squared", "cubed", "percent",
     "mod", "modulo", "power", "root", "factorial"}
)  # fmt: skip
_WORDS_BEFORE = _WORDS_AFTER | {"of", "by", "than", "per", "half", "twice", "double", "triple"}
_ASKS_FOR_X = re.compile(r",\s*x\b")


def split_steps(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line or sentence of `text` that holds an `=`, whitespace trimmed."""
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", text):
        if "=" not in line.group():
            continue
        cut = line.start()
        ends = [m.start() + line.start() for m in _SENTENCE_END.finditer(line.group())]
        for end in [*ends, line.end()]:
            segment = text[cut:end]
            if "=" in segment and segment.strip():
                lead = len(segment) - len(segment.lstrip())
                spans.append((cut + lead, cut + len(segment.rstrip())))
            cut = end
            while cut < line.end() and text[cut].isspace():
                cut += 1
    return spans


def _normalise(segment: str) -> str:
    for pattern, repl in _LATEX:
        segment = pattern.sub(repl, segment)
    return _THOUSANDS.sub("", segment.translate(_UNICODE))


def _word_before(text: str, i: int) -> str | None:
    """The word ending just before position i (spaces skipped); "" at the start; None when the
    nearest character is neither a letter nor plain punctuation (a symbol such as `%`, `\\`)."""
    j = i
    while j > 0 and text[j - 1].isspace():
        j -= 1
    if j == 0 or text[j - 1] in ":,;":
        return ""
    k = j
    while k > 0 and text[k - 1].isalpha():
        k -= 1
    if k == j or (k > 0 and not text[k - 1].isspace()):
        return None  # a symbol, or a word glued to one (`\\sqrt`)
    return text[k:j].lower()


def _word_after(text: str, i: int) -> str | None:
    j = i
    while j < len(text) and text[j].isspace():
        j += 1
    if j == len(text) or text[j] in ",;:.!?":
        return ""
    k = j
    while k < len(text) and text[k].isalpha():
        k += 1
    return text[j:k].lower() if k > j else None


def _bounded(text: str, start: int, end: int) -> bool:
    """True when the equation text[start:end] is not part of surrounding notation or prose."""
    if (start > 0 and not text[start - 1].isspace() and text[start - 1] not in ":,;") or (
        end < len(text) and not text[end].isspace() and text[end] not in ",;:.!?"
    ):
        return False
    before, after = _word_before(text, start), _word_after(text, end)
    if before is None or after is None:
        return False
    return before not in _WORDS_BEFORE and after not in _WORDS_AFTER


def _literal(node: ast.Constant, side: str) -> Fraction:
    if type(node.value) not in (int, float):
        raise _Unchecked
    source = ast.get_source_segment(side, node) or ""
    if sum(ch.isdigit() for ch in source) > MAX_DIGITS:
        raise _Unchecked
    return Fraction(source)


def _evaluate(node: ast.AST, side: str, x: Fraction | None) -> Fraction:
    if isinstance(node, ast.Constant):
        return _literal(node, side)
    if isinstance(node, ast.Name) and node.id == "x" and x is not None:
        return x
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand, side, x)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        left, right = _evaluate(node.left, side, x), _evaluate(node.right, side, x)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise _Unchecked
        return left / right
    raise _Unchecked  # `**`, `^`, names, calls, comparisons...


def _parse(side: str) -> tuple[ast.expr, str]:
    """(expression, the source it was parsed from: `7x` is read as `7*x`)."""
    side = side.strip()
    if not side or len(side) > MAX_SIDE_CHARS or "**" in side:
        raise _Unchecked
    for pattern in _IMPLICIT:
        side = pattern.sub("*", side)
    try:
        return ast.parse(side, mode="eval").body, side
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _Unchecked from None


def _leading_literal(node: ast.expr, side: str) -> Fraction | None:
    """The number a side starts from (`12` of `12 + 1`), for running-total chains."""
    while isinstance(node, ast.BinOp):
        node = node.left
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _leading_literal(node.operand, side)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _literal(node, side)
    return None


def _rounds_to(value: Fraction, side: str) -> bool:
    match = _BARE_DECIMAL.match(side.strip())
    if match is None or len(match.group(1)) < ROUND_MIN_DECIMALS:
        return False
    return abs(value - Fraction(side.strip())) <= Fraction(5, 10 ** (len(match.group(1)) + 1))


def _link_holds(a: Fraction, b: Fraction, b_node: ast.expr, a_side: str, b_side: str) -> bool:
    """`a_side = b_side` holds: equal, rounded, or a running total starting from a."""
    if a == b or _rounds_to(a, b_side) or _rounds_to(b, a_side):
        return True
    return isinstance(b_node, ast.BinOp) and _leading_literal(b_node, b_side) == a


def check_equation(equation: str, x: Fraction | None = None) -> bool | None:
    """Whether `e0 = e1 = ...` holds (see the module doc); None when it cannot be checked."""
    sides = equation.split("=")
    if len(sides) < 2:
        return None
    try:
        parsed = [_parse(side) for side in sides]
        values = [_evaluate(node, source, x) for node, source in parsed]
        links = [
            (a, b, node, a_src, b_src)
            for a, b, (_, a_src), (node, b_src) in zip(
                values, values[1:], parsed, parsed[1:], strict=False
            )
        ]
        return all(_link_holds(*link) for link in links)
    except (_Unchecked, ValueError, ZeroDivisionError, RecursionError, OverflowError):
        return None


def _check_segment(segment: str, x: Fraction | None) -> bool | None:
    """All checkable equations of one step hold (None: none checkable)."""
    text = _normalise(segment)
    verdicts = []
    for run in _RUN.finditer(text):
        body = run.group()
        if "=" not in body:
            continue
        stripped = body.strip().rstrip(".")
        start = run.start() + (len(body) - len(body.lstrip()))
        if not stripped or not _bounded(text, start, start + len(stripped)):
            continue
        verdict = check_equation(stripped, x)
        if verdict is not None:
            verdicts.append(verdict)
    return all(verdicts) if verdicts else None


def _number(value: object) -> Fraction | None:
    try:
        return Fraction(str(value).strip().replace("−", "-"))
    except (ValueError, ZeroDivisionError):
        return None


def solution_of_x(
    question: str, family: str, params_json: str | None, answer: str
) -> Fraction | None:
    """The value of `x` for a linear problem (see the module doc), else None."""
    if family != "linear" and not (family == "" and _asks_for_linear(question)):
        return None
    try:
        params = json.loads(params_json) if params_json else {}
    except ValueError:
        params = {}
    if isinstance(params, dict):
        for key in ("solution", "x"):
            if key in params and (found := _number(params[key])) is not None:
                return found
    return _number(answer)


def _asks_for_linear(question: str) -> bool:
    """`...x...=..., x`: an equation in x whose solution is asked for."""
    for match in _ASKS_FOR_X.finditer(question):
        line = question[question.rfind("\n", 0, match.start()) + 1 : match.start()]
        if "=" in line and "x" in line:
            return True
    return False


def equation_steps(completion: str, x: Fraction | None = None) -> list[Step]:
    """The checkable equation steps of `completion`, in text order."""
    steps = []
    for start, end in split_steps(completion)[:MAX_STEPS]:
        verdict = _check_segment(completion[start:end], x)
        if verdict is not None:
            steps.append(Step(start, end, verdict, "equation"))
    return steps


def prefix_steps(completion: str, answer: str, correct: bool | None = None) -> list[Step]:
    """One fragment per character of the extracted answer, right iff its prefix matches gold."""
    found = extract(completion).text
    if not found:
        return []
    at = completion.rfind(found)
    if at < 0:
        return []
    gold = answer.strip()
    steps, matching = [], True
    for k, ch in enumerate(found[:MAX_STEPS]):
        matching = matching and k < len(gold) and gold[k] == ch
        steps.append(Step(at + k, at + k + 1, bool(correct) or matching, "prefix"))
    return steps


def check_steps(
    question: str,
    completion: str,
    family: str = "",
    params_json: str | None = None,
    answer: str = "",
    *,
    correct: bool | None = None,
) -> list[Step]:
    """The completion's equation steps, or its answer's prefix fragments when it has none.

    `correct`: the verifier's outcome, if known (a correct answer's prefixes are all correct).
    """
    x = solution_of_x(question, family, params_json, answer)
    return equation_steps(completion, x) or prefix_steps(completion, answer, correct)


def step_accuracy(steps: list[Step] | tuple[Step, ...]) -> float | None:
    """Share of correct `equation` steps; None when there is none."""
    checked = [s.correct for s in steps if s.kind == "equation"]
    return sum(checked) / len(checked) if checked else None
