"""The "rg" verifier: reasoning-gym's own `score_answer`, behind Sieve's committed-answer rule.

A problem of an `rg:<dataset>` family (pipeline/problems/rg.py) keeps its reasoning-gym source in
`params`; the verifier gets it through the `context` keyword (`StepContext.params_json`, which
curation and rescoring pass for every completion), rebuilds the entry from it and asks the
dataset to score the answer. Steps:

1. the answer is read as for math: `extract` (pipeline/scoring/extract.py); in chat mode
   (`marker_required=True`) an answer marker is required, else "no answer marker"; a trailing
   negated alternative is dropped (`6, not 5`; `drop_negated`);
2. an answer that hedges (`4 or 5`, words the gold does not have) or is withdrawn afterwards
   (`... wait, no`) is wrong (pipeline/scoring/commit.py), before reasoning-gym sees it;
3. what reasoning-gym sees is the committed value (`rg_reading`): leading filler words go ("the
   answer is simply 16") and an equation gives its last side ("the final answer is 8 + 6 =
   14"), as the math verifier reads them, for a gold that is a number. Before rg/4 score_answer got
   the words too and paid a partial score, unpaid: SmolLM2 lost 12 right answers that way in
   Sieve seed 1's ledger;
4. `score_answer(answer, entry)` runs in the killable worker (pipeline/scoring/worker.py) under the
   same deadline as math-verify (the child runs `score_here` of pipeline/scoring/rg_source.py, which
   rebuilds the entry from the stored source): `correct` is score == 1, and so is the reward (the
   `correctness` component). A partial score is not paid: the base class's `score_answer`, which
   many datasets keep, gives len(gold) / len(answer) to any answer that contains the gold, so gold
   15 answered 150 would earn 0.67 and gold 2 answered 12 0.5; GRPO learns to pad answers with
   digits from that (SmolLM2's count_bits groups were "informative" on it alone, with no correct
   answer). The detail keeps the unpaid score ("rg: partial score 0.5 not paid"). An answer that
   makes score_answer raise scores 0 (detail "rg: score_answer raised ...").

A problem without params, made by another reasoning-gym version, or whose stored source no longer
rebuilds the stored gold answer raises, which `verify` turns into "verifier_error" (no reward,
never a silent 0). The worker imports reasoning-gym once, with the start-up allowance rather than
a verdict's deadline. Version: `RG_VERIFIER_VERSION` (`rg/<package version>/1`, defined in
verifiers.py), part of `VERIFIER_VERSION` when the `gym` extra is installed.

Test: `.venv/bin/pytest tests/problems/test_rg.py -q`.
"""

from __future__ import annotations

import json
import re
import threading

from pipeline.scoring.commit import (
    HEDGED,
    RETRACTED,
    drop_negated,
    fold,
    hedge,
    offered_under,
    question_words,
    retraction,
    withdrawn_after,
)
from pipeline.scoring.extract import extract
from pipeline.scoring.numeric import gold_number
from pipeline.scoring.steps import StepContext
from pipeline.scoring.verifiers import (
    RG_VERIFIER_VERSION,
    Check,
    committed_value,
    register_verifier,
)
from pipeline.scoring.worker import STARTUP_TIMEOUT, default_worker

_loaded = threading.Lock()
_loaded_pid: list[int | None] = [None]  # the worker child that has imported reasoning-gym


def _source(context: StepContext | None) -> str:
    """The problem's params JSON, checked against the installed reasoning-gym version."""
    text = context.params_json if context is not None else None
    if not text:
        raise ValueError("the rg verifier needs the problem's params (its reasoning-gym source)")
    made_with = json.loads(text).get("rg_version")
    installed = RG_VERIFIER_VERSION.split("/")[1] if RG_VERIFIER_VERSION else None
    if installed is None:
        raise ValueError("the rg verifier needs reasoning-gym: pip install 'grpo-sieve[gym]'")
    if made_with != installed:
        raise ValueError(f"problem made with reasoning-gym {made_with}, installed {installed}")
    return text


def _score_in_worker(
    params_json: str, candidate: str, gold: str, timeout: float
) -> tuple[float, str]:
    worker = default_worker()
    with _loaded:
        if worker.pid is None or worker.pid != _loaded_pid[0]:
            worker.call("rg_load", (), STARTUP_TIMEOUT)
            _loaded_pid[0] = worker.pid
    score, detail = worker.call("rg_score", (params_json, candidate, gold), timeout)
    return float(score), str(detail)


def _components(score: float, formatted: bool) -> dict[str, float]:
    return {"correctness": score, "format": 1.0 if formatted else 0.0}


# Words that qualify nothing before a committed answer ("the answer is simply 16").
_FILLER = re.compile(
    r"^(?:(?:simply|just|only|exactly|precisely|indeed|therefore|thus|so|still|clearly|"
    r"definitely|now|then|equal\s+to|equals)\b[\s,:]*)+",
    re.IGNORECASE,
)


def rg_reading(candidate: str, gold: str) -> str:
    """The value a committed answer states, for score_answer (module doc, step 3); a gold that
    is not a number leaves the candidate as it is."""
    if gold_number(gold) is None:
        return candidate
    text = candidate[candidate.rfind("=") + 1 :]
    return _FILLER.sub("", text.strip()).strip() or candidate


@register_verifier("rg", reads_markers=True, takes_context=True)
def rg_verifier(
    completion: str,
    answer: str,
    timeout: float,
    *,
    marker_required: bool = True,
    context: StepContext | None = None,
) -> Check:
    """See the module docstring."""
    params_json = _source(context)
    found = extract(completion)
    explicit = found.marker is not None
    if marker_required and not explicit:
        return Check(False, False, _components(0.0, False), "no answer marker")
    if found.text is None:
        return Check(False, False, _components(0.0, False), "no answer found")
    candidate = drop_negated(fold(found.text)).strip()
    allowed = question_words(context.question) if context and context.question else frozenset()
    boxed = found.marker == "boxed"
    hedged = hedge(candidate, answer, relations=explicit, allowed=allowed, boxed=boxed)
    if hedged is None and explicit:
        hedged = offered_under(completion, found.start)
    if hedged is not None:
        return Check(True, False, _components(0.0, explicit), f"{HEDGED}: {hedged}")
    if explicit and found.end >= 0:
        tail = completion[found.end :]
        withdrawn = retraction(tail, committed_value(candidate)) or withdrawn_after(tail)
        if withdrawn is not None:
            return Check(True, False, _components(0.0, True), f"{RETRACTED}: {withdrawn}")
    score, detail = _score_in_worker(params_json, rg_reading(candidate, answer), answer, timeout)
    if score == 1.0:
        return Check(True, True, _components(1.0, explicit), detail)
    if score > 0.0:  # reasoning-gym's partial credit: a wrong answer is not paid (docstring)
        detail = f"rg: partial score {score:.3g} not paid"
    return Check(True, False, _components(0.0, explicit), detail)
