"""Function-writing problems with hidden tests, judged by running the code in a sandbox.

A question reads "Write a Python function `sum_multiples(xs)` that returns the sum of the numbers
in the list xs that are divisible by 3." Its answer is a test spec (`pipeline.scoring.code`):
eight argument lists and the values the template's reference solution returns for them, computed
here in the trusted parent at generation time, and its verifier is "code". Levels: arithmetic on
ints, list reductions, strings, list transformations, small algorithms (gcd/lcm, run-length,
primes, bases, brackets, Fibonacci).

Each template draws a few question parameters; the tests come from a random stream seeded by the
question text, so one question always has the same tests (and id), and duplicates are caught as
duplicates. The reference solution of a problem is `reference_solution(params)`: the parameters
as UPPER-case constants followed by the template's function. The family is opt-in (see
pipeline/problems/__init__.py): the tiny character model cannot write code.
Test: `.venv/bin/pytest tests/problems/test_code_family.py -q`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import string
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.problems.base import check_level
from pipeline.scoring.code import encode_spec

NAME = "code"
VERIFIER = "code"
N_TESTS = 8

LEVELS: dict[int, str] = {
    1: "arithmetic on one or two ints (linear combination, clamp, round up, range check)",
    2: "list reductions over ints (filtered sums, counts, max, products)",
    3: "string manipulation (count, replace, case, words, strip)",
    4: "list transformations (running sums mod m, rotation, chunks, k-th largest, pairs)",
    5: "small algorithms (lcm, run-length, primes, digital root, base digits, brackets, fib)",
}

Params = dict[str, Any]
Args = list[Any]


@dataclass(frozen=True)
class Template:
    """One kind of problem: its signature, wording, reference body and argument generators."""

    function: str  # the function's name, also the template's id
    signature: str  # parameter list, e.g. "xs" or "a, b"
    text: str  # what the function returns, with {param} placeholders
    body: str  # reference body; the params are visible as UPPER-case constants
    params: Callable[[random.Random], Params]
    case: Callable[[random.Random, Params], Args]  # one random argument list
    edges: tuple[Args, ...] = ()  # argument lists every problem of the template tests


def _ints(rng: random.Random, lo: int = -20, hi: int = 30, most: int = 8) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, most))]


def _text(rng: random.Random, alphabet: str, most: int = 12) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, most)))


def _sentence(rng: random.Random) -> str:
    words = [_text(rng, string.ascii_lowercase[:8], 9) or "a" for _ in range(rng.randint(0, 6))]
    return " ".join(words)


def _brackets(rng: random.Random, kinds: str) -> str:
    """Half the time balanced by construction, else random characters."""
    if rng.random() < 0.5:
        return _text(rng, kinds, 10)
    out: list[str] = []
    stack: list[str] = []
    for _ in range(rng.randint(0, 6)):
        if stack and rng.random() < 0.5:
            out.append(stack.pop())
        else:
            pair = rng.randrange(0, len(kinds), 2)
            out.append(kinds[pair])
            stack.append(kinds[pair + 1])
    return "".join(out + stack[::-1])


# fmt: off
def _t(
    function: str,
    signature: str,
    text: str,
    body: str,
    params: Callable[[random.Random], Params],
    case: Callable[[random.Random, Params], Args],
    *edges: Args,
) -> Template:
    """A template; `body` may be an indented triple-quoted block."""
    return Template(function, signature, text, textwrap.dedent(body).strip(), params, case, edges)


def _between(r: random.Random, lo: int, hi: int, width: int) -> Params:
    low = r.randint(lo, hi)
    return {"lo": low, "hi": low + r.randint(0, width)}


_LEVEL1 = (
    _t("combine", "a, b", "{p}*a + {q}*b for integers a and b", "return P * a + Q * b",
       lambda r: {"p": r.randint(2, 9), "q": r.randint(-9, 9)},
       lambda r, p: [r.randint(-99, 99), r.randint(-99, 99)], [0, 0]),
    _t("clamp", "x", "the integer x limited to the range {lo} to {hi} inclusive",
       "return max(LO, min(HI, x))",
       lambda r: _between(r, -10, 10, 30), lambda r, p: [r.randint(p["lo"] - 20, p["hi"] + 20)]),
    _t("round_up", "n", "the smallest multiple of {k} that is at least the integer n",
       "return -(-n // K) * K",
       lambda r: {"k": r.randint(2, 30)}, lambda r, p: [r.randint(-100, 100)], [0]),
    _t("in_range", "x", "True if the integer x is between {lo} and {hi} inclusive, else False",
       "return LO <= x <= HI",
       lambda r: _between(r, -20, 20, 20), lambda r, p: [r.randint(p["lo"] - 5, p["hi"] + 5)]),
)

_LEVEL2 = (
    _t("sum_multiples", "xs", "the sum of the numbers in the list xs that are divisible by {k}",
       "return sum(x for x in xs if x % K == 0)",
       lambda r: {"k": r.randint(2, 9)}, lambda r, p: [_ints(r)], [[]]),
    _t("count_above", "xs", "how many numbers in the list xs are greater than {t}",
       "return sum(1 for x in xs if x > T)",
       lambda r: {"t": r.randint(-10, 25)}, lambda r, p: [_ints(r)], [[]]),
    _t("max_below", "xs", "the largest number in the list xs that is less than {t}, or None if "
       "there is none", "return max((x for x in xs if x < T), default=None)",
       lambda r: {"t": r.randint(-10, 25)}, lambda r, p: [_ints(r)], [[]]),
    _t("product_above", "xs", "the product of the numbers in the list xs that are greater than "
       "{t} (1 if there are none)", """
       out = 1
       for x in xs:
           if x > T:
               out *= x
       return out
       """, lambda r: {"t": r.randint(-6, 6)}, lambda r, p: [_ints(r, -9, 9)], [[]]),
    _t("sum_squares_between", "xs", "the sum of the squares of the numbers in the list xs that "
       "lie between {lo} and {hi} inclusive", "return sum(x * x for x in xs if LO <= x <= HI)",
       lambda r: _between(r, -15, 10, 20), lambda r, p: [_ints(r)], [[]]),
)

_LEVEL3 = (
    _t("count_char", "s", "how many times the letter '{c}' occurs in the string s, ignoring case",
       "return s.lower().count(C)", lambda r: {"c": r.choice(string.ascii_lowercase)},
       lambda r, p: [_text(r, p["c"] + p["c"].upper() + "abXY ")], [""]),
    _t("replace_char", "s", "the string s with every '{c}' replaced by '{d}'",
       "return s.replace(C, D)",
       lambda r: dict(zip("cd", r.sample(string.ascii_lowercase, 2), strict=True)),
       lambda r, p: [_text(r, p["c"] * 3 + p["d"] + "xyz")], [""]),
    _t("shout", "s", "the string s with its first {k} characters in upper case and the rest in "
       "lower case", "return s[:K].upper() + s[K:].lower()",
       lambda r: {"k": r.randint(1, 6)}, lambda r, p: [_text(r, "abcXYZ 1")], [""]),
    _t("long_words", "s", "how many words of the string s (words are separated by single "
       "spaces) are longer than {k} characters", "return sum(len(w) > K for w in s.split(' '))",
       lambda r: {"k": r.randint(1, 7)}, lambda r, p: [_sentence(r)], ["abc"]),
    _t("strip_char", "s", "the string s without its leading and trailing '{c}' characters",
       "return s.strip(C)", lambda r: {"c": r.choice(string.ascii_lowercase + "*#-")},
       lambda r, p: [_text(r, p["c"] * 4 + "ab ")], [""]),
)

_LEVEL4 = (
    _t("running_mod", "xs", "the list whose i-th item is (xs[0] + ... + xs[i]) modulo {m}, for "
       "the list of integers xs", """
       out, total = [], 0
       for x in xs:
           total += x
           out.append(total % M)
       return out
       """, lambda r: {"m": r.randint(2, 99)}, lambda r, p: [_ints(r)], [[]]),
    _t("rotate", "xs", "a new list: xs rotated {way} by {k} positions, wrapping around (any "
       "length, the empty list included)", """
       if not xs:
           return []
       k = (K if WAY == "left" else -K) % len(xs)
       return xs[k:] + xs[:k]
       """, lambda r: {"k": r.randint(1, 9), "way": r.choice(("left", "right"))},
       lambda r, p: [_ints(r, 0, 9)], [[]]),
    _t("chunk_sums", "xs", "the sums of consecutive chunks of {k} numbers of the list xs, in "
       "order (the last chunk may be shorter)", """
       return [sum(xs[i : i + K]) for i in range(0, len(xs), K)]
       """, lambda r: {"k": r.randint(2, 6)}, lambda r, p: [_ints(r, most=14)], [[]]),
    _t("kth_largest", "xs", "the {k}-th largest distinct value in the list xs (the 1st is the "
       "maximum), or None if xs has fewer than {k} distinct values", """
       values = sorted(set(xs), reverse=True)
       return values[K - 1] if len(values) >= K else None
       """, lambda r: {"k": r.randint(1, 4)}, lambda r, p: [_ints(r, 0, 9, 10)], [[]]),
    _t("pairs_summing", "xs", "the number of index pairs i < j with xs[i] + xs[j] == {t}", """
       n = len(xs)
       return sum(xs[i] + xs[j] == T for i in range(n) for j in range(i + 1, n))
       """, lambda r: {"t": r.randint(-30, 60)}, lambda r, p: [_ints(r, -10, 40, 10)], [[]]),
)

_BRACKET_KINDS = ("()", "[]", "{}", "<>")
_LEVEL5 = (
    _t("lcm3", "a, b", "the least common multiple of the positive integers a, b and {k}", """
       from math import gcd
       m = a * b // gcd(a, b)
       return m * K // gcd(m, K)
       """, lambda r: {"k": r.randint(2, 40)},
       lambda r, p: [r.randint(1, 60), r.randint(1, 60)], [1, 1]),
    _t("run_length", "s", "the run-length encoding of s: each maximal run of n equal characters "
       "c becomes c followed by n, runs joined by '{sep}' (e.g. 'aab' -> 'a2{sep}b1')", """
       runs = []
       for ch in s:
           if runs and runs[-1][0] == ch:
               runs[-1][1] += 1
           else:
               runs.append([ch, 1])
       return SEP.join(f"{c}{n}" for c, n in runs)
       """, lambda r: {"sep": r.choice(",;:|/-")}, lambda r, p: [_text(r, "aab", 14)], [""]),
    _t("prime_sum", "n", "the sum of the primes p < n with p % {m} == {k}", """
       total = 0
       for p in range(2, n):
           if all(p % d for d in range(2, int(p**0.5) + 1)) and p % M == K:
               total += p
       return total
       """, lambda r: {"m": (m := r.randint(3, 10)), "k": r.randint(0, m - 1)},
       lambda r, p: [r.randint(0, 200)], [0], [2], [3]),
    _t("digital_root", "n", "the single base-{b} digit left after repeatedly replacing the "
       "non-negative integer n by the sum of its base-{b} digits (n itself if n < {b})", """
       while n >= B:
           total = 0
           while n:
               total += n % B
               n //= B
           n = total
       return n
       """, lambda r: {"b": r.randint(2, 16)}, lambda r, p: [r.randint(0, 10**6)], [0]),
    _t("base_digits", "n", "the list of digits of the non-negative integer n in base {b}, most "
       "significant first ([0] for n == 0)", """
       digits = []
       while n:
           digits.append(n % B)
           n //= B
       return digits[::-1] or [0]
       """, lambda r: {"b": r.randint(2, 16)}, lambda r, p: [r.randint(0, 10**5)], [0]),
    _t("balanced", "s", "True if the string s, made only of the characters {kinds}, is a "
       "correctly nested bracket sequence, else False", """
       closers = {KINDS[i + 1]: KINDS[i] for i in range(0, len(KINDS), 2)}
       stack = []
       for ch in s:
           if ch not in closers:
               stack.append(ch)
           elif not stack or stack.pop() != closers[ch]:
               return False
       return not stack
       """, lambda r: {"kinds": "".join(r.sample(_BRACKET_KINDS, r.randint(1, 4)))},
       lambda r, p: [_brackets(r, p["kinds"])], [""]),
    _t("fib_mod", "n", "the n-th Fibonacci number modulo {m}, where fib(0) = 0 and fib(1) = 1", """
       a, b = 0, 1
       for _ in range(n):
           a, b = b, (a + b) % M
       return a % M
       """, lambda r: {"m": r.randint(2, 1000)}, lambda r, p: [r.randint(0, 500)], [0], [1]),
)
# fmt: on

_GROUPS = (_LEVEL1, _LEVEL2, _LEVEL3, _LEVEL4, _LEVEL5)
TEMPLATES: dict[int, tuple[Template, ...]] = dict(enumerate(_GROUPS, start=1))
_BY_NAME = {t.function: t for group in TEMPLATES.values() for t in group}


def reference_solution(params: Params) -> str:
    """Source of the reference solution for a problem's params (`template` plus constants)."""
    template = _BY_NAME[params["template"]]
    consts = "".join(f"{k.upper()} = {v!r}\n" for k, v in sorted(params.items()) if k != "template")
    body = textwrap.indent(template.body, "    ")
    return f"{consts}\n\ndef {template.function}({template.signature}):\n{body}\n"


@cache
def _compiled(params_text: str) -> Callable[..., Any]:
    """The reference function itself (our own trusted code, run in this process)."""
    params = json.loads(params_text)
    namespace: dict[str, Any] = {}
    exec(compile(reference_solution(params), f"<{params['template']}>", "exec"), namespace)
    function: Callable[..., Any] = namespace[params["template"]]
    return function


def _tests(template: Template, params: Params, question: str) -> list[Args]:
    """N_TESTS distinct argument lists: the template's edge cases, then draws seeded by question."""
    rng = random.Random(int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big"))
    tests = [list(edge) for edge in template.edges]
    for _ in range(50 * N_TESTS):
        if len(tests) >= N_TESTS:
            break
        args = template.case(rng, params)
        if args not in tests:
            tests.append(args)
    return tests


def make(level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One problem of `level`: (question, test spec as JSON, params)."""
    check_level(NAME, LEVELS, level)
    template = rng.choice(TEMPLATES[level])
    params: Params = {"template": template.function, **template.params(rng)}
    wording = template.text.format(**params)
    question = f"Write a Python function `{template.function}({template.signature})` that "
    question += f"returns {wording}."
    tests = _tests(template, params, question)
    function = _compiled(json.dumps(params, sort_keys=True))
    expected = [json.loads(json.dumps(function(*copy.deepcopy(args)))) for args in tests]
    return question, encode_spec(template.function, tests, expected), params
