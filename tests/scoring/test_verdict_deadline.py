"""Every verdict comes back within the verifier deadline, whatever the completion holds.

The parent's text steps (extraction, the numeric fast path, the prose checks) must be linear, or
a pathological completion stalls the calling thread where no deadline reaches it: `$^` followed by
100 000 spaces took 24 s in `normalise` (a quadratic degree-sign regex) before math-verify was
ever asked. hypothesis builds long runs of such pieces (spaces, `$^`, `\\boxed{`, braces, digits,
`^{`, unicode) up to ~200 000 characters, and each verdict is timed with `time.monotonic` against
twice the deadline. Worker start-up after a timeout is excluded (`warm_up` first), as the worker
never charges it to a deadline either.

Test: `.venv/bin/pytest tests/scoring/test_verdict_deadline.py -q`
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.scoring import Verdict, verify
from pipeline.scoring.numeric import normalise
from pipeline.scoring.verifiers import MAX_COMPLETION_CHARS
from pipeline.scoring.worker import default_worker

DEADLINE = 1.5  # short, so math-verify timeouts keep the test quick; not the 3 s default
BOUND = 2 * DEADLINE  # generous: a loaded 2-core machine must not make it flaky
MAX_CHARS = 200_000

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
length = st.sampled_from([10_000, 50_000, 100_000, MAX_CHARS]) | st.integers(1, MAX_CHARS)


@st.composite
def pathological(draw: st.DrawFn) -> str:
    """A few short pieces, one long run of one unit, a few short pieces (≤ ~200 k chars)."""
    head = "".join(draw(st.lists(piece, max_size=3)))
    unit = draw(piece)
    tail = "".join(draw(st.lists(piece, max_size=3)))
    count = max(1, min(draw(length), MAX_CHARS - len(head) - len(tail)) // len(unit))
    return head + unit * count + tail


@st.composite
def mixed(draw: st.DrawFn) -> str:
    """Several runs of different pieces back to back, ≤ ~200 k chars in all."""
    runs = draw(st.lists(st.tuples(piece, length), min_size=1, max_size=6))
    share = MAX_CHARS // len(runs)
    return "".join(unit * max(1, min(chars, share) // len(unit)) for unit, chars in runs)


def timed_verdict(completion: str, gold: str, verifier: str, marker: bool) -> Verdict:
    default_worker().warm_up()
    start = time.monotonic()
    verdict = verify(completion, gold, verifier, timeout=DEADLINE, marker_required=marker)
    elapsed = time.monotonic() - start
    assert elapsed < BOUND, f"{verifier} verdict took {elapsed:.2f}s on {len(completion)} chars"
    assert verdict.reason in {"correct", "wrong", "no_answer", "verifier_error"}
    return verdict


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    completion=pathological() | mixed(),
    gold=st.sampled_from(GOLDS),
    mode=st.sampled_from([("math", False), ("math", False), ("math", True), ("exact", False)]),
)
def test_every_verdict_within_deadline(completion: str, gold: str, mode: tuple[str, bool]) -> None:
    timed_verdict(completion, gold, *mode)


@settings(max_examples=60, deadline=None)
@given(completion=pathological() | mixed())
def test_normalise_is_linear(completion: str) -> None:
    """The step that was quadratic: 200 k characters normalise in a small fraction of a second."""
    start = time.monotonic()
    normalise(completion)
    assert time.monotonic() - start < 0.5


@pytest.mark.parametrize("tail", ["", "x", "1", "}", " = 5"])
@pytest.mark.parametrize("wrap", ["{}", "\\boxed{{{}}}", "The answer is {}"])
def test_dollar_caret_then_100k_spaces(tail: str, wrap: str) -> None:
    """The reported case: `$^` and 100 000 spaces (24 s before the fix), in a few settings."""
    completion = wrap.format("$^" + " " * 100_000 + tail)
    start = time.monotonic()
    normalise(completion)
    assert time.monotonic() - start < 0.5
    for marker in (False, True):
        timed_verdict(completion, "42", "math", marker)


def test_one_megabyte_of_spaces_is_refused_quickly() -> None:
    """Over the cap nothing is parsed: a 1 MB completion is "no_answer" at once, with the cap."""
    completion = "$^" + " " * 1_000_000 + "1"
    assert len(completion) > MAX_COMPLETION_CHARS
    verdict = timed_verdict(completion, "42", "math", False)
    assert verdict.reason == "no_answer" and verdict.reward == 0.0
    assert f"{MAX_COMPLETION_CHARS:,}" in verdict.detail


def test_cap_is_inclusive() -> None:
    """A completion of exactly the cap is still judged."""
    completion = " " * (MAX_COMPLETION_CHARS - 2) + "42"
    assert verify(completion, "42", marker_required=False).reason == "correct"
    assert verify(" " + completion, "42", marker_required=False).reason == "no_answer"
