"""Child process for crash tests: the shipped curation flow (`flows.curate.curate_flow`, run by
Prefect) on a simulated policy, into the ledger at argv[1].

Not a test module (no test_ prefix); `tests/test_curate_crash.py` runs it with SIEVE_CRASH_AT
and PREFECT_API_URL (one Prefect test server for the module) set.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pipeline.curate import Policy
from pipeline.problems import generate_mix
from pipeline.sampling.simulated import SimulatedSampler
from pipeline.selection import CurateConfig

CFG = CurateConfig(n_candidates=240, mix={"arith": "1-6"}, seed=5, chunk_size=30)
RATES = {1: 1.0, 2: 0.9, 3: 0.6, 4: 0.3, 5: 0.08, 6: 0.0}


def simulated_policy(cfg: CurateConfig) -> Policy:
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    prompts = [f"{q}=" for q in problems["question"]]
    answers = dict(zip(prompts, problems["answer"], strict=True))
    rates = {p: RATES.get(lv, 0.0) for p, lv in zip(prompts, problems["level"], strict=True)}
    return Policy(SimulatedSampler(answers, rates), "rev-sim", lambda qs: [f"{q}=" for q in qs])


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows.curate import CurateParams, curate_flow
    from flows.runtime import Runtime
    from pipeline.store import Ledger

    with Ledger.open(path=Path(sys.argv[1]), transient=True) as ledger:  # as the flow opens it
        params = CurateParams(model="simulated", config=CFG)
        curate_flow(params, Runtime(ledger=ledger, policy=simulated_policy(CFG)))
    print("done")
