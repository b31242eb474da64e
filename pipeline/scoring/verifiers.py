"""The verifier registry and the `verify` / `verify_batch` entry points.

A verifier is a function `(completion, answer, timeout_s) -> Check`; register new ones with
`register_verifier("name")` (the "code" verifier plugs in this way; one registered with
`reads_markers=True` also takes the keyword `marker_required`, one with `takes_context=True` the
keyword `context`, the problem's `StepContext`, as the "rg" verifier does). Built in:

* "math" (default): extract the answer (pipeline/scoring/extract.py), try the exact/numeric fast
  path (numeric.py), and only when that is undecided ask math-verify in the killable worker
  (worker.py) under a deadline.
* "exact": string equality after stripping whitespace, of either the whole completion or the
  extracted answer.

`marker_required=True` is for chat models, which are told to end with `\\boxed{}`: the answer
must come from an answer marker (`\\boxed{}`, `Final Answer:` / `The final answer is`, `####`,
`Answer:` / `answer is`); a completion without one is not answered (reason "no_answer") and
math-verify never reads free prose. For a numeric gold the answer must then be a number or a
closed form: an unevaluated expression over numbers (`40+9*69`, `75 + 74 - 77 =`, `2^{10}`) is
wrong, so echoing the question earns nothing. The default (False) keeps the bare-answer reading
the tiny raw-prompt model needs (`17/3`, and `5+2` still counts for 7 there). Verifiers that do not
read answer markers (e.g. "code") ignore the flag.

Bounded time: every text step in this process (extraction, the fast path, the prose and
punctuation checks here) is linear in the completion's length, and a completion longer than
`MAX_COMPLETION_CHARS` is not read at all ("no_answer"), so the parent's share of a verdict stays
far below the math-verify deadline; math-verify itself runs in the killable worker. A NaN or
infinity spelled as a float (`nan`, `inf`, `-Infinity`) is never correct, as gold or as answer.

Steps: a verifier registered with `checks_steps=True` ("math", "exact") also gets the
completion's checkable fragments (`Verdict.steps`, pipeline/scoring/steps.py) and, when it has an
equation step, the component `step_accuracy` (weight 0 by default: the reward is unchanged).
`context` / `contexts` (a `StepContext`: question, family, params JSON) lets linear steps in `x`
be checked; without it only arithmetic and the answer's prefixes are. The step checker never
decides the outcome: should it fail, `steps` is None (not computed) and the verdict stands.

Cut at the budget: a completion the sampler cut at its token budget (`truncated=True`, from
`finish_reason == "length"`) is not paid for an answer that runs to the cut, under every verifier
that reads answer markers ("math", "exact", "rg"): the cut may have shortened it. SmolLM2 wrote
"The final answer is 981" over and over until the budget cut the last one to "The final answer is
9" (gold 9), and that was paid. The answer counts as finished before the cut only when the text
after its span has a line break or a mark followed by a space (`9.` + cut may be 9.5; `9 ` + cut
may be `9 000`; `\\boxed{9}` + cut may be `\\boxed{9}0`). Such a verdict is "wrong" with the detail
`CUT_DETAIL`. Callers pass what their sampler reported; the default (False) reads every text as
finished (a hand-written completion, a TRL reward call, which does not say).

`verify` never raises for a bad completion: an exception inside a verifier, a math-verify timeout
or a crashed worker all give `Verdict(reward=None, correct=None, reason="verifier_error")`. It does
raise `ValueError` for caller mistakes (unknown verifier name, non-positive timeout).

Test: `.venv/bin/pytest tests/scoring -q`
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from importlib import metadata

from pipeline.scoring.commit import (
    HEDGED,
    RETRACTED,
    drop_negated,
    fold,
    hedge,
    last_clause,
    offered_under,
    question_words,
    retraction,
    withdrawn_after,
)
from pipeline.scoring.depth import TOO_DEEP, peel, too_deep
from pipeline.scoring.extract import Extracted, extract
from pipeline.scoring.numeric import (
    candidate_number,
    decide,
    gold_number,
    is_bare_number,
    is_non_finite,
    is_unevaluated,
)
from pipeline.scoring.steps import Step, StepContext, check_steps, step_accuracy
from pipeline.scoring.units import apply_scale
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
# A sentence mark just inside closing math delimiters (`$2^{10}.$`): math-verify 0.9 then falls
# back to reading the leading `2`, so it is dropped before asking (not the dots of an ellipsis).
_MATH_END_PUNCT = re.compile(r"(?<!\.)[.,;][ \t]*(?=\$|\\\]|\\\))")
# 3: NaN/infinity never correct; completions over MAX_COMPLETION_CHARS are not read.
# 4: one committed final answer (hedges, retractions, joined digits, touching marks; commit.py);
#    marker mode is the default.
# 5: an answer that runs to the token budget's cut is not paid (module doc, "Cut at the budget").
# 6: a later "N is the answer" with another N withdraws the answer (commit.py, _RESTATED).
# 7: exact and rg keep an answer restated with the same number (`committed_value`); a percent
#    stands for value / 100 only against a gold that is not a whole number (numeric.same_number).
# 8: a trailing "not ..." that denies the kept number is not dropped ("1 is not equal to 1").
# 9: restatements read after `is:`, a filler word ("the answer is therefore 41"), math delimiters
#    and boxes, "the final calculation results in 5", "N, which is the final answer"; a restated
#    equation (`6 + 3 = 9`, `15 mod 6 = 3`) counts by its last side,
#    and so does an equation answer's committed value; a marked answer that opens with one number
#    and ends with another ("2 in the binary representation of 1") is several values (commit.py).
# 10: negation is a class in the committed answer (`n't` contractions, `cannot`, `none`,
#    `neither`, `without`, `false`, `impossible`, `negative 42`, ...; typographic apostrophes
#    folded), and after it ("that's wrong", "can't be right", "isn't the answer"); boxes of a
#    several-part answer joined across a part's label ("\( y_1 = \boxed{..} \) and \( y_2 =
#    \boxed{..} \)", extract.py).
# 11: one committed answer whatever the language: any word inside a box that the gold does not
#    hold (bar units, number words, variables, the question's nouns), the multilingual lexicon's
#    negations, alternatives, conditions and hedges in the sentence offering the answer and after
#    it; scale words and scientific notation are part of the value, a unit must match the
#    gold's; wrapping brackets peeled and nesting bounded before math-verify (`too_deep`).
VERIFIER_VERSION = f"sieve-math/11+math-verify/{metadata.version('math-verify')}"
# With the `gym` extra installed, the "rg" verifier's version (pipeline/scoring/rg.py) joins it:
# reasoning-gym's own `score_answer` decides those verdicts. The last number counts changes of
# Sieve's reading around score_answer (3: a restated answer is kept; 4: score_answer gets the
# committed value, `rg_reading`, and a trailing negated alternative is dropped; 5: sieve-math/10's
# negation class, in the answer and after it, commit.py; 6: sieve-math/11's committed-answer
# rule, words inside a box and the multilingual lexicon around it).
try:
    RG_VERIFIER_VERSION: str | None = f"rg/{metadata.version('reasoning-gym')}/6"
    VERIFIER_VERSION += f"+{RG_VERIFIER_VERSION}"
except metadata.PackageNotFoundError:
    RG_VERIFIER_VERSION = None
# Longest completion a verifier reads. Default sampling budgets are 16 (raw) and 512 (chat) tokens;
# 200 000 characters is 20 000 tokens at 10 characters a token, beyond any budget in use, so a
# longer text is a runaway sampler or a hostile input, not an answer. Linear scans of this much
# text take well under 0.5 s, which keeps a verdict inside the default 3 s deadline.
MAX_COMPLETION_CHARS = 200_000
CUT_DETAIL = "cut: the answer runs to the token budget's cut"
# After an answer's span, what shows the answer was finished before the cut: a line break, or a
# non-space followed by whitespace (a sentence mark and a space, a word and a space).
_FINISHED = re.compile(r"\n|\S\s")


@dataclass(frozen=True)
class Check:
    """A verifier's raw finding, before the reward spec turns it into a `Verdict`."""

    answered: bool
    correct: bool
    components: dict[str, float]
    detail: str = ""


_DEFAULT_SPEC = RewardSpec()
VerifierFn = Callable[..., Check]  # (completion, answer, timeout[, *, marker_required]) -> Check
VERIFIERS: dict[str, VerifierFn] = {}
_MARKER_AWARE: set[VerifierFn] = set()  # verifiers that take the `marker_required` keyword
_STEP_CHECKED: set[VerifierFn] = set()  # verifiers whose completions get step verdicts
_CONTEXT_AWARE: set[VerifierFn] = set()  # verifiers that take the `context` keyword


def register_verifier(
    name: str,
    components: Sequence[str] = (),
    *,
    reads_markers: bool = False,
    checks_steps: bool = False,
    takes_context: bool = False,
) -> Callable[[VerifierFn], VerifierFn]:
    """Decorator: add a verifier under `name`, plus any extra reward components it reports.

    `reads_markers=True`: the verifier accepts `marker_required: bool` as a keyword argument.
    `checks_steps=True`: its completions are prose/math whose steps `check_steps` can judge.
    `takes_context=True`: the verifier accepts `context: StepContext | None` as a keyword.
    """

    def decorate(fn: VerifierFn) -> VerifierFn:
        VERIFIERS[name] = fn
        if reads_markers:
            _MARKER_AWARE.add(fn)
        if checks_steps:
            _STEP_CHECKED.add(fn)
        if takes_context:
            _CONTEXT_AWARE.add(fn)
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


def _for_math_verify(text: str) -> str:
    """`text` as math-verify reads it best: without a sentence mark inside its closing math
    delimiters (see _MATH_END_PUNCT), and with `\\mathrm{e}` as `e` (math-verify 0.9 stops at
    `\\frac{1}{\\mathrm{e}}` and reads `1 - \\frac{1}{\\mathrm{e}}` as 1)."""
    if "$" not in text and "\\" not in text:
        return text
    if "\\mathrm{e}" in text:
        text = text.replace("\\mathrm{e}", "e")
    return _MATH_END_PUNCT.sub("", text)


def math_verify_gold(answer: str) -> str:
    """The text `math_verifier` hands math-verify for the gold `answer` (for checks at ingest
    that math-verify reads a gold in time; scoring does not call it)."""
    return _for_math_verify(fold(answer))


def _uncommitted(
    completion: str,
    found: Extracted,
    candidate: str,
    answer: str,
    allowed: frozenset[str] = frozenset(),
) -> str | None:
    """ "hedged: ..." / "retracted: ..." when the answer is not one committed value, else None:
    a word inside it the gold does not hold, a negating, conditional or hedging sentence that
    offers it, or a condition or correction after it (pipeline/scoring/commit.py).

    An answer without a marker (the lenient raw reading) is read as math-verify reads it: free
    prose is not scanned for hedges, and relation symbols (`x \\approx 11`) are left to it."""
    if found.marker is None:
        clause = last_clause(candidate)
        if _PROSE.search(clause) is not None:
            return None
        hedged = hedge(clause, answer, relations=False, allowed=allowed)
    else:
        hedged = hedge(candidate, answer, allowed=allowed, boxed=found.marker == "boxed")
        if hedged is None:
            hedged = offered_under(completion, found.start)
    if hedged is not None:
        return f"{HEDGED}: {hedged}"
    if found.marker is None or found.end < 0:
        return None
    tail = completion[found.end :]
    withdrawn = retraction(tail, committed_value(candidate)) or withdrawn_after(tail)
    return None if withdrawn is None else f"{RETRACTED}: {withdrawn}"


def _allowed(context: StepContext | None) -> frozenset[str]:
    """Words of the question an answer may repeat (`question_words`); none without one."""
    return question_words(context.question) if context is not None and context.question else _NONE


_NONE: frozenset[str] = frozenset()


@register_verifier("math", reads_markers=True, checks_steps=True, takes_context=True)
def math_verifier(
    completion: str,
    answer: str,
    timeout: float,
    *,
    marker_required: bool = True,
    context: StepContext | None = None,
) -> Check:
    """Fast path first, math-verify (time-bounded, in the worker) when it is undecided.

    Before either: wrapping brackets peeled and scale words and scientific notation applied
    (`peel`, `apply_scale`); an answer or gold nested deeper than math-verify can read in time
    is decided by the fast path or is wrong with the detail `too_deep`."""
    found = extract(completion)
    if marker_required and found.marker is None:
        return Check(False, False, _components(False, False), "no answer marker")
    explicit = found.marker is not None
    if found.text is None:
        return Check(False, False, _components(False, False), "no answer found")
    candidate = apply_scale(peel(drop_negated(fold(found.text))))
    answer = apply_scale(peel(fold(answer)))
    formatted = explicit or is_bare_number(completion)
    if is_non_finite(candidate) or is_non_finite(answer):
        return Check(True, False, _components(False, formatted), "non-finite number")
    uncommitted = _uncommitted(completion, found, candidate, answer, _allowed(context))
    if uncommitted is not None:
        return Check(True, False, _components(False, formatted), uncommitted)
    if marker_required and gold_number(answer) is not None and is_unevaluated(candidate):
        return Check(True, False, _components(False, formatted), "unevaluated expression")
    decided, guessed = decide(candidate, answer)
    if decided is not None:
        detail = "fast_path_guess" if guessed else "fast_path"
        return Check(True, decided, _components(decided, formatted), detail)
    if too_deep(candidate) or too_deep(answer):
        return Check(True, False, _components(False, formatted), TOO_DEEP)
    prose = not explicit and _PROSE.search(candidate) is not None
    gold = _for_math_verify(answer)
    correct = math_verify_equivalent(gold, _for_math_verify(candidate), timeout, raw=prose)
    return Check(True, correct, _components(correct, formatted), "math_verify")


@register_verifier("exact", reads_markers=True, checks_steps=True)
def exact_verifier(
    completion: str, answer: str, timeout: float, *, marker_required: bool = True
) -> Check:
    """String equality after whitespace strip (whole completion, or the extracted answer)."""
    found = extract(completion)
    candidate, explicit = found.text, found.marker is not None
    if marker_required and not explicit:
        return Check(False, False, _components(False, False), "no answer marker")
    if candidate is None:
        return Check(False, False, _components(False, False), "no answer found")
    gold = answer.strip()
    if is_non_finite(candidate) or is_non_finite(gold):
        return Check(True, False, _components(False, explicit), "non-finite number")
    if explicit:
        withdrawn = retraction(completion[found.end :], committed_value(candidate))
        if withdrawn is not None and candidate.strip() == gold:
            return Check(True, False, _components(False, True), f"{RETRACTED}: {withdrawn}")
    whole = not marker_required and completion.strip() == gold
    correct = whole or candidate.strip() == gold
    return Check(True, correct, _components(correct, explicit or whole), "exact")


def committed_value(candidate: str) -> Fraction | None:
    """The number an extracted answer states, for `retraction` (a later "the answer is N" with
    the same N keeps it), or None when it is not one number. Every verifier that reads markers
    passes it: before sieve-math/7 the exact and rg verifiers passed None, so restating the
    answer withdrew it ("The final answer is 18.\n\n18 is the final answer." for `3 * 6`)."""
    number = candidate_number(candidate)
    if number is None and "=" in candidate:  # an equation states its last side: `5 + 6 = 11`
        number = candidate_number(candidate[candidate.rfind("=") + 1 :])
    return None if number is None else number.value


# `Verdict.detail` values of verdicts the fast path decided on a guessed reading (a decimal comma
# such as `1,5`, space-grouped digits such as `1 000`, judged equal to the gold) rather than on a
# clean parse. Curation's verifier audit re-checks every one of these
# (pipeline/jobs/curate/audit.py).
GUESSED_DETAILS = frozenset({"fast_path_guess"})


def is_guess(verdict: Verdict) -> bool:
    """True when the verdict rests on a guessed reading of the answer (see GUESSED_DETAILS)."""
    return verdict.detail in GUESSED_DETAILS


def _describe(exc: Exception) -> str:
    if isinstance(exc, WorkerError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:300]


def _too_long(completion: str) -> str:
    return f"completion of {len(completion):,} characters, over the {MAX_COMPLETION_CHARS:,} cap"


def _steps(
    fn: VerifierFn, completion: str, answer: str, context: StepContext | None, check: Check
) -> tuple[Step, ...] | None:
    """The completion's step verdicts, or None (not a step-checked verifier, or it failed)."""
    if fn not in _STEP_CHECKED:
        return None
    ctx = context or StepContext()
    correct = check.answered and check.correct
    try:
        found = check_steps(
            ctx.question, completion, ctx.family, ctx.params_json, answer, correct=correct
        )
    except Exception:  # the outcome reward stands; the fragments are merely not computed
        return None
    return tuple(found)


def runs_to_cut(completion: str) -> bool:
    """True when the answer read from `completion` runs to its end (module doc, "Cut at the
    budget"): for a completion cut at its token budget, that answer may itself be cut."""
    found = extract(completion)
    end = len(completion) if found.end < 0 else found.end
    return _FINISHED.search(completion, end) is None


def _run(
    fn: VerifierFn,
    completion: str,
    answer: str,
    spec: RewardSpec,
    timeout: float,
    marker_required: bool = False,
    context: StepContext | None = None,
    truncated: bool = False,
) -> Verdict:
    try:
        if len(completion) > MAX_COMPLETION_CHARS:
            return no_answer(_components(False, False), spec, _too_long(completion))
        keywords: dict[str, object] = {}
        if fn in _MARKER_AWARE:
            keywords["marker_required"] = marker_required
        if fn in _CONTEXT_AWARE:
            keywords["context"] = context
        check = fn(completion, answer, timeout, **keywords)
    except Exception as exc:
        return verifier_error(_describe(exc))
    if truncated and check.correct and fn in _MARKER_AWARE and runs_to_cut(completion):
        check = Check(True, False, {**check.components, "correctness": 0.0}, CUT_DETAIL)
    steps = _steps(fn, completion, answer, context, check)
    components = check.components
    accuracy = step_accuracy(steps) if steps else None
    if accuracy is not None:
        components = {**components, "step_accuracy": accuracy}
    if not check.answered:
        return no_answer(components, spec, check.detail, steps)
    return judged(check.correct, components, spec, check.detail, steps)


def verify(
    completion: str,
    answer: str,
    verifier: str = "math",
    *,
    spec: RewardSpec | None = None,
    timeout: float | None = None,
    marker_required: bool = True,
    context: StepContext | None = None,
    truncated: bool = False,
) -> Verdict:
    """Judge one completion against its gold answer (see the module doc for `marker_required`,
    `context` and `truncated`)."""
    fn = get_verifier(verifier)
    deadline = resolve_timeout(timeout)
    spec = spec or _DEFAULT_SPEC
    return _run(
        fn, completion, answer, spec, deadline, bool(marker_required), context, bool(truncated)
    )


def _per_item(flag: bool | Sequence[bool], n: int, name: str = "marker_required") -> list[bool]:
    """A flag for each of n items: one bool for all, or a sequence of n bools."""
    if not isinstance(flag, Iterable) or isinstance(flag, str | bytes):
        return [bool(flag)] * n  # also numpy / torch scalars
    flags = [bool(f) for f in flag]
    if len(flags) != n:
        raise ValueError(f"length mismatch: {n} completions, {len(flags)} {name} flags")
    return flags


def verify_batch(
    completions: Sequence[str],
    answers: Sequence[str],
    verifiers: Sequence[str] | str = "math",
    *,
    spec: RewardSpec | None = None,
    timeout: float | None = None,
    marker_required: bool | Sequence[bool] = True,
    contexts: Sequence[StepContext | None] | None = None,
    truncated: bool | Sequence[bool] = False,
) -> list[Verdict]:
    """Judge many completions in order; a timeout on one item does not affect the next.

    `marker_required` and `truncated` are one bool for every item or a sequence with one bool
    per item; `contexts`, if given, one `StepContext` (or None) per item.
    """
    names = [verifiers] * len(completions) if isinstance(verifiers, str) else list(verifiers)
    if not len(completions) == len(answers) == len(names):
        raise ValueError(
            f"length mismatch: {len(completions)} completions, {len(answers)} answers, "
            f"{len(names)} verifiers"
        )
    flags = _per_item(marker_required, len(completions))
    cuts = _per_item(truncated, len(completions), "truncated")
    ctxs = list(contexts) if contexts is not None else [None] * len(completions)
    if len(ctxs) != len(completions):
        raise ValueError(f"length mismatch: {len(completions)} completions, {len(ctxs)} contexts")
    fns = [get_verifier(name) for name in names]
    spec = spec or _DEFAULT_SPEC
    deadline = resolve_timeout(timeout)
    items = zip(fns, completions, answers, flags, ctxs, cuts, strict=True)
    return [_run(fn, c, a, spec, deadline, m, x, t) for fn, c, a, m, x, t in items]
