"""Group advantages for GRPO — for now only the one definition of an uninformative group.

A group is uninformative when max(r) − min(r) ≤ tol (`ZERO_VAR_TOL`). This is the ONE definition
that the selection step (`pipeline.selection`) and the trainer share, and the ledger's SQL macro
`sieve_zero_var_tol()` holds the same number (migration 0001). It is never `advantage == 0` or
`std == 0`: after the mean rounds, a constant group's spread comes out near 1e-9 rather than 0,
so an exact-zero test misclassifies it.

The estimators themselves (grpo, rloo, dr_grpo, batch std) are added here by the trainer work.
Torch-free: works on floats, numpy arrays and Polars expressions/Series alike.

Test: `.venv/bin/pytest tests/grpo_core/test_zero_variance.py -q`.
"""

from __future__ import annotations

from typing import Any

ZERO_VAR_TOL = 1e-6  # same number as the ledger macro sieve_zero_var_tol()


def is_uninformative(reward_max: Any, reward_min: Any, tol: float = ZERO_VAR_TOL) -> Any:
    """True where a group's reward spread max − min is at most `tol` (element-wise).

    Takes floats (→ bool), numpy arrays (→ bool array) or Polars expressions/Series (→ Boolean;
    null where the group has no reward, as in SQL).
    """
    return (reward_max - reward_min) <= tol
