"""Child process for the training crash tests: a short training run into the home at argv[1].

Not a test module (no test_ prefix); `tests/test_train_crash.py` runs it with SIEVE_CRASH_AT.
argv: home, "fresh" | "resume".
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from grpo_core.trainer import Item, Sample, Scores
from pipeline.store import Ledger
from pipeline.train import TrainSettings, train

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
    home = Path(sys.argv[1])
    with Ledger.open(home, transient=True) as ledger:  # as the training flow opens it
        result = train(
            ledger,
            "cur-test",
            home / "models" / "tiny",
            SETTINGS,
            home,
            resume=sys.argv[2] == "resume",
            reward=even_length,
        )
    print(result.final_revision)
