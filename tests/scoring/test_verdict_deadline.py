"""Every verdict comes back within the verifier deadline, whatever the completion holds.

The parent's text steps (extraction, the numeric fast path, the prose checks) must be linear, or
a pathological completion stalls the calling thread where no deadline reaches it: `$^` followed by
100 000 spaces took 24 s in `normalise` (a quadratic degree-sign regex) before math-verify was
ever asked. hypothesis builds long runs of such pieces (spaces, `$^`, `\\boxed{`, braces, digits,
`^{`, unicode) up to ~200 000 characters, and the parent's work on each is counted, not timed
(tests/scoring/work.py): the same completion with its runs twice as long may cost at most twice
the Python steps and the characters scanned. math-verify itself is stubbed here (one call at most
per verdict): the child it runs in is held to the deadline by the worker, whose waits
tests/scoring/test_worker.py checks. What a count cannot see, backtracking inside one regex call,
is timed on these inputs by benchmarks/text_worst_case.py.

Test: `.venv/bin/pytest tests/scoring/test_verdict_deadline.py -q`
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.scoring import Verdict, verify
from pipeline.scoring.numeric import normalise
from pipeline.scoring.verifiers import MAX_COMPLETION_CHARS
from tests.scoring.work import assert_linear, count

DEADLINE = 1.5  # passed to verify; math-verify is stubbed, so nothing waits on it here
MAX_CHARS = MAX_COMPLETION_CHARS  # 200 000: a completion at twice its size is still judged
HALF = MAX_CHARS // 2
REASONS = {"correct", "wrong", "no_answer", "verifier_error"}

PIECES = [
    " ",
    "\t",
    "\n",
    "\u2028",
    "\u3000",
    "$",
    "$^",
    "^",
    "^{",
    "^ {",
    "{",
    "}",
    "\\boxed{",
    "\\fbox{",
    "\\frac{",
    "\\frac",
    "\\text{",
    "\\circ",
    "\\overline{",
    "\\left(",
    "\\",
    "1",
    "1,",
    "1 ",
    "1e",
    "0.",
    ".",
    ". ",
    "+",
    "- ",
    "−",
    "=",
    "/",
    ")",
    "ab ",
    "```",
    "```\n",
    "####",
    "answer: ",
    "Final Answer: ",
    "é",
    "∞",
    "😀",
]
GOLDS = ["42", "\\frac{1}{2}", "x^2 + 1", "1,000", "0.5", "(1, 2)"]

piece = st.sampled_from(PIECES) | st.text(min_size=1, max_size=4)
# Long runs are what expose a quadratic step, so lengths near the cap are drawn often.
length = st.sampled_from([10_000, 50_000, HALF]) | st.integers(1, HALF)
# (head, [(unit, count), ...], tail): the completion at scale m repeats each unit count * m times
Parts = tuple[str, list[tuple[str, int]], str]


@st.composite
def pathological(draw: st.DrawFn) -> Parts:
    """A few short pieces, one long run of one unit, a few short pieces (<= HALF chars)."""
    head = "".join(draw(st.lists(piece, max_size=3)))
    unit = draw(piece)
    tail = "".join(draw(st.lists(piece, max_size=3)))
    times = max(1, min(draw(length), HALF - len(head) - len(tail)) // len(unit))
    return head, [(unit, times)], tail


@st.composite
def mixed(draw: st.DrawFn) -> Parts:
    """Several runs of different pieces back to back, <= HALF chars in all."""
    runs = draw(st.lists(st.tuples(piece, length), min_size=1, max_size=6))
    share = HALF // len(runs)
    return "", [(unit, max(1, min(chars, share) // len(unit))) for unit, chars in runs], ""


def scaled(parts: Parts) -> Callable[[int], str]:
    head, runs, tail = parts
    return lambda m: head + "".join(unit * (times * m) for unit, times in runs) + tail


@contextmanager
def math_verify_stubbed() -> Iterator[list[str]]:
    """math-verify answers "not equal" at once; yields the candidates it was asked about."""
    asked: list[str] = []

    def equivalent(answer: str, candidate: str, timeout: float, *, raw: bool) -> bool:
        asked.append(candidate)
        return False

    with mock.patch.object(
        sys.modules["pipeline.scoring.verifiers"], "math_verify_equivalent", equivalent
    ):
        yield asked


def judged(gold: str, verifier: str, marker: bool) -> Callable[[str], Verdict]:
    def judge(completion: str) -> Verdict:
        verdict = verify(completion, gold, verifier, timeout=DEADLINE, marker_required=marker)
        assert verdict.reason in REASONS
        return verdict

    return judge


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    parts=pathological() | mixed(),
    gold=st.sampled_from(GOLDS),
    mode=st.sampled_from([("math", False), ("math", False), ("math", True), ("exact", False)]),
)
def test_every_verdict_is_linear_work(parts: Parts, gold: str, mode: tuple[str, bool]) -> None:
    with math_verify_stubbed() as asked:
        assert_linear(judged(gold, *mode), scaled(parts), 1)
    assert len(asked) <= 2  # math-verify at most once per verdict


@settings(max_examples=60, deadline=None)
@given(parts=pathological() | mixed())
def test_normalise_is_linear(parts: Parts) -> None:
    """The step that was quadratic, on up to 100 k characters and twice that."""
    assert_linear(normalise, scaled(parts), 1)


@pytest.mark.parametrize("tail", ["", "x", "1", "}", " = 5"])
@pytest.mark.parametrize("wrap", ["{}", "\\boxed{{{}}}", "The answer is {}"])
def test_dollar_caret_then_100k_spaces(tail: str, wrap: str) -> None:
    """The reported case: `$^` and 100 000 spaces (24 s before the fix), in a few settings."""

    def build(n: int) -> str:
        return wrap.format("$^" + " " * n + tail)

    assert_linear(normalise, build, 100_000)
    with math_verify_stubbed():
        for marker in (False, True):
            assert_linear(judged("42", "math", marker), build, 50_000)


def test_one_megabyte_of_spaces_is_refused_quickly() -> None:
    """Over the cap nothing is parsed: a 1 MB completion is "no_answer" at once, with the cap."""
    completion = "$^" + " " * 1_000_000 + "1"
    assert len(completion) > MAX_COMPLETION_CHARS
    work, verdict = count(verify, completion, "42", "math", timeout=DEADLINE, marker_required=False)
    assert work.scanned == 0 and work.steps < 100  # refused before any text step reads it
    assert verdict.reason == "no_answer" and verdict.reward == 0.0
    assert f"{MAX_COMPLETION_CHARS:,}" in verdict.detail


def test_cap_is_inclusive() -> None:
    """A completion of exactly the cap is still judged."""
    completion = " " * (MAX_COMPLETION_CHARS - 2) + "42"
    assert verify(completion, "42", marker_required=False).reason == "correct"
    assert verify(" " + completion, "42", marker_required=False).reason == "no_answer"
