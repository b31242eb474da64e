"""Prefect flows: each job's sequence written once, over `pipeline` functions.

The top-level names `pipeline` and `flows` are taken on PyPI by other distributions (`pipeline`,
command pipelines; `flows`, a workflow generator) and are common names for a user's own folders,
so importing this package first checks that `pipeline` and `grpo_core` resolve to the packages
installed beside it (every install of grpo-sieve puts the three side by side: a wheel, an
editable install, a checkout); otherwise `sieve` would fail later on a missing `pipeline.core`,
or run someone else's code. A `flows` shadowed by another package cannot be checked from here:
`sieve` then stops on "No module named 'flows.cli'" (docs: a venv of its own).

Test: `pytest tests/test_wheel.py`.
"""

import importlib.util
import os
from pathlib import Path

_SIBLINGS = ("pipeline", "grpo_core")


def _check_siblings() -> None:
    """ImportError, one line, when a sibling package resolves anywhere but beside `flows`."""
    beside = Path(__file__).parent.parent
    for name in _SIBLINGS:
        spec = importlib.util.find_spec(name)
        found = list(spec.submodule_search_locations or []) if spec is not None else []
        try:
            ours = bool(found) and os.path.samefile(beside / name, found[0])
        except OSError:  # nothing of that name beside flows
            ours = False
        if not ours:
            where = found[0] if found else (spec.origin if spec is not None else "nowhere")
            raise ImportError(
                f"`{name}` resolves to {where}, not the grpo-sieve package beside {beside}: "
                f"another `{name}` (a distribution of that name or a folder on sys.path) "
                "shadows it; run sieve from a virtual environment that holds grpo-sieve alone"
            )


_check_siblings()
