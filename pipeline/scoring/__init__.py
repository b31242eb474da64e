"""Verifiers: turn a completion and a gold answer into a `Verdict` (reward, correctness, reason).

`verify` / `verify_batch` are the entry points; `VERIFIERS` is the registry ("math", "exact",
"code": model-written Python run on hidden tests in a bubblewrap sandbox, see code.py; "rg":
reasoning-gym's own score_answer, see rg.py);
`RewardSpec` weights the reward components. `marker_required=True` (chat models) takes the answer
only from an answer marker and gives no credit for an unevaluated expression such as a copied
question (see verifiers.py). math-verify only ever runs in a killable child process
under a deadline (see worker.py), and every text step in the caller's process is linear, on at
most `MAX_COMPLETION_CHARS` characters, so callers on any thread get an answer or a
"verifier_error" within the deadline, never a hang or an exception. `check_steps` (steps.py)
judges a completion's equation steps (or its answer's prefixes), reported as `Verdict.steps` and
the zero-weight component `step_accuracy`.

Test: `.venv/bin/pytest tests/scoring -q`
"""

from pipeline.scoring import code as _code  # noqa: F401  (registers the "code" verifier)
from pipeline.scoring import rg as _rg  # noqa: F401  (registers "rg"; reasoning-gym loads on use)
from pipeline.scoring.extract import Extracted, extract, extract_answer
from pipeline.scoring.numeric import fast_path
from pipeline.scoring.steps import Step, StepContext, check_steps, split_steps, step_accuracy
from pipeline.scoring.verdict import RewardSpec, Verdict
from pipeline.scoring.verifiers import (
    GUESSED_DETAILS,
    VERIFIER_VERSION,
    VERIFIERS,
    Check,
    is_guess,
    register_verifier,
    verify,
    verify_batch,
)
from pipeline.scoring.worker import math_verify_only

__all__ = [
    "GUESSED_DETAILS",
    "VERIFIERS",
    "VERIFIER_VERSION",
    "Check",
    "Extracted",
    "RewardSpec",
    "Step",
    "StepContext",
    "Verdict",
    "check_steps",
    "extract",
    "extract_answer",
    "fast_path",
    "is_guess",
    "math_verify_only",
    "register_verifier",
    "split_steps",
    "step_accuracy",
    "verify",
    "verify_batch",
]
