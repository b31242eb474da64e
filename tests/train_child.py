"""Child process for the training crash tests: the shipped training flow
(`flows.train.train_flow`, run by Prefect) for a short run into the home at argv[1].

Not a test module (no test_ prefix); `tests/test_train_crash.py` runs it with SIEVE_CRASH_AT
and PREFECT_API_URL set. argv: home, "fresh" | "resume".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from grpo_core.trainer import Item, Sample, Scores
from pipeline.jobs.train.settings import TrainSettings

SETTINGS = TrainSettings(
    grpo={"total_steps": 6, "checkpoint_every": 2, "max_new_tokens": 4, "lr": 1e-3},
    rollouts_per_step=16,
    eval_per_level=1,
    eval_samples=2,
    eval_families=["arith"],
    tensorboard=False,
)


def even_length(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    ok = [len(s.text) % 2 == 0 for s in samples]
    return Scores([float(x) for x in ok], list(ok))


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from flows.runtime import Runtime
    from flows.train import TrainParams, train_flow

    home = Path(sys.argv[1])
    params = TrainParams(
        curriculum="cur-test",
        model=str(home / "models" / "tiny"),
        home=str(home),
        settings=SETTINGS,
        resume=sys.argv[2] == "resume",
    )
    out = train_flow(params, Runtime(reward=even_length))  # the flow opens the ledger transient
    print(out["final_revision"])
