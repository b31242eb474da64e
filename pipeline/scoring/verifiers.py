"""The verifier registry and the `verify` / `verify_batch` entry points.

A verifier is a function `(completion, answer, timeout_s) -> Check`; register new ones with
`register_verifier("name")` (the "code" verifier will plug in this way). Built in:

* "math" (default): extract the answer (pipeline/scoring/extract.py), try the exact/numeric fast
  path (numeric.py), and only when that is undecided ask math-verify in the killable worker
  (worker.py) under a deadline.
* "exact": string equality after stripping whitespace, of either the whole completion or the
  extracted answer.

`verify` never raises for a bad completion: an exception inside a verifier, a math-verify timeout
or a crashed worker all give `Verdict(reward=None, correct=None, reason="verifier_error")`. It does
raise `ValueError` for caller mistakes (unknown verifier name, non-positive timeout).

Test: `.venv/bin/pytest tests/scoring -q`
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata

from pipeline.scoring.extract import extract_answer
from pipeline.scoring.numeric import fast_path, is_bare_number
from pipeline.scoring.verdict import (
    RewardSpec,
    Verdict,
    judged,
    no_answer,
    register_component,
    verifier_error,
)
from pipeline.scoring.worker import WorkerError, math_verify_equivalent, resolve_timeout

# Two plain words in a row ("we get"), not LaTeX commands: math-verify should extract from it
# rather than read the whole text as one expression.
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}[ \t]+[A-Za-z]{2,}")
VERIFIER_VERSION = f"sieve-math/1+math-verify/{metadata.version('math-verify')}"


@dataclass(frozen=True)
class Check:
    """A verifier's raw finding, before the reward spec turns it into a `Verdict`."""

    answered: bool
    correct: bool
    components: dict[str, float]
    detail: str = ""


_DEFAULT_SPEC = RewardSpec()
VerifierFn = Callable[[str, str, float], Check]
VERIFIERS: dict[str, VerifierFn] = {}


def register_verifier(
    name: str, components: Sequence[str] = ()
) -> Callable[[VerifierFn], VerifierFn]:
    """Decorator: add a verifier under `name`, plus any extra reward components it reports."""

    def decorate(fn: VerifierFn) -> VerifierFn:
        VERIFIERS[name] = fn
        for component in components:
            register_component(component)
        return fn

    return decorate


def get_verifier(name: str) -> VerifierFn:
    """The registered verifier `name`; ValueError naming the valid ones otherwise."""
    try:
        return VERIFIERS[name]
    except (KeyError, TypeError):
        valid = ", ".join(sorted(VERIFIERS))
        raise ValueError(f"unknown verifier {name!r}; valid verifiers: {valid}") from None


def _components(correct: bool, formatted: bool) -> dict[str, float]:
    return {"correctness": 1.0 if correct else 0.0, "format": 1.0 if formatted else 0.0}


@register_verifier("math")
def math_verifier(completion: str, answer: str, timeout: float) -> Check:
    """Fast path first, math-verify (time-bounded, in the worker) when it is undecided."""
    candidate, explicit = extract_answer(completion)
    if candidate is None:
        return Check(False, False, _components(False, False), "no answer found")
    formatted = explicit or is_bare_number(completion)
    decided = fast_path(candidate, answer)
    if decided is not None:
        return Check(True, decided, _components(decided, formatted), "fast_path")
    prose = not explicit and _PROSE.search(candidate) is not None
    correct = math_verify_equivalent(answer, candidate, timeout, raw=prose)
    return Check(True, correct, _components(correct, formatted), "math_verify")


@register_verifier("exact")
def exact_verifier(completion: str, answer: str, timeout: float) -> Check:
    """String equality after whitespace strip (whole completion, or the extracted answer)."""
    candidate, explicit = extract_answer(completion)
    if candidate is None:
        return Check(False, False, _components(False, False), "no answer found")
    gold = answer.strip()
    whole = completion.strip() == gold
    correct = whole or candidate.strip() == gold
    return Check(True, correct, _components(correct, explicit or whole), "exact")


def _describe(exc: Exception) -> str:
    if isinstance(exc, WorkerError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:300]


def _run(fn: VerifierFn, completion: str, answer: str, spec: RewardSpec, timeout: float) -> Verdict:
    try:
        check = fn(completion, answer, timeout)
    except Exception as exc:
        return verifier_error(_describe(exc))
    if not check.answered:
        return no_answer(check.components, spec, check.detail)
    return judged(check.correct, check.components, spec, check.detail)


def verify(
    completion: str,
    answer: str,
    verifier: str = "math",
    *,
    spec: RewardSpec | None = None,
    timeout: float | None = None,
) -> Verdict:
    """Judge one completion against its gold answer."""
    fn = get_verifier(verifier)
    return _run(fn, completion, answer, spec or _DEFAULT_SPEC, resolve_timeout(timeout))


def verify_batch(
    completions: Sequence[str],
    answers: Sequence[str],
    verifiers: Sequence[str] | str = "math",
    *,
    spec: RewardSpec | None = None,
    timeout: float | None = None,
) -> list[Verdict]:
    """Judge many completions in order; a timeout on one item does not affect the next."""
    names = [verifiers] * len(completions) if isinstance(verifiers, str) else list(verifiers)
    if not len(completions) == len(answers) == len(names):
        raise ValueError(
            f"length mismatch: {len(completions)} completions, {len(answers)} answers, "
            f"{len(names)} verifiers"
        )
    fns = [get_verifier(name) for name in names]
    spec = spec or _DEFAULT_SPEC
    deadline = resolve_timeout(timeout)
    return [
        _run(fn, c, a, spec, deadline) for fn, c, a in zip(fns, completions, answers, strict=True)
    ]
