"""Child process for crash tests: the shipped curation flow (`flows.curate.curate_flow`, run by
Prefect) on a simulated policy, into the ledger at argv[1].

Not a test module (no test_ prefix); `tests/test_curate_crash.py` runs it with SIEVE_CRASH_AT
and PREFECT_API_URL (one Prefect test server for the module) set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pipeline.jobs.curate.curation import Policy
from pipeline.problems import generate_mix
from pipeline.selection import CurateConfig

try:  # imported as tests.curate_child, or run as a script with tests/ on the path
    from tests.simulated import RATES
    from tests.simulated import simulated_policy as _policy
except ImportError:
    from simulated import RATES  # type: ignore[no-redef]
    from simulated import simulated_policy as _policy  # type: ignore[no-redef]

CFG = CurateConfig(n_candidates=240, mix={"arith": "1-6"}, seed=5, chunk_size=30)


def simulated_policy(cfg: CurateConfig) -> Policy:
    """The shared simulated policy (`tests/simulated.py`) over this curation's candidates."""
    return _policy(generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed), RATES)


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows.curate import CurateParams, curate_flow
    from flows.runtime import Runtime
    from pipeline.store import Ledger

    with Ledger.open(path=Path(sys.argv[1]), transient=True) as ledger:  # as the flow opens it
        params = CurateParams(model="simulated", config=CFG)
        curate_flow(params, Runtime(ledger=ledger, policy=simulated_policy(CFG)))
    print("done")
