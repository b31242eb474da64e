"""A process's place in a `torchrun` job (`Dist`) and how the job splits a step
(`DistributedConfig`, from `SIEVE_ROLLOUTS` / `SIEVE_PARALLEL`).

Its own module so that `grpo_core.distributed` (the data-parallel step) and `grpo_core.fsdp` (the
sharded one, which `distributed` calls) both read it without importing each other in a circle.
`grpo_core.distributed` re-exports both names.

Test: `.venv/bin/pytest tests/grpo_core/test_ddp.py tests/grpo_core/test_validate.py -q`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from grpo_core.types import TrainerError
from grpo_core.validate import Positive, check_fields

RolloutMode = Literal["broadcast", "shard"]
ParallelName = Literal["ddp", "fsdp"]


@dataclass(frozen=True)
class DistributedConfig:
    """How a torchrun job splits a step; read from `SIEVE_ROLLOUTS` / `SIEVE_PARALLEL`."""

    # broadcast: exact single-process step, rank 0 samples; shard: every rank samples 1/N
    rollouts: RolloutMode = "broadcast"
    parallel: ParallelName = "ddp"  # fsdp: sharded parameters (`grpo_core.fsdp`)
    bucket_mb: Positive = 25.0  # gradient all-reduce bucket (DDP's default 25 MB)

    def __post_init__(self) -> None:
        check_fields(self)  # types, finite numbers, ranges (grpo_core.validate)

    @classmethod
    def from_env(cls) -> DistributedConfig:
        rollouts = os.environ.get("SIEVE_ROLLOUTS", "broadcast")
        parallel = os.environ.get("SIEVE_PARALLEL", "ddp")
        if rollouts not in ("broadcast", "shard"):
            raise TrainerError(f"SIEVE_ROLLOUTS={rollouts!r}; use broadcast or shard")
        if parallel not in ("ddp", "fsdp"):
            raise TrainerError(f"SIEVE_PARALLEL={parallel!r}; use ddp or fsdp")
        return cls(rollouts, parallel)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Dist:
    """This process's place in the job; `Dist()` is one process (every collective a no-op)."""

    rank: int = 0
    world: int = 1
    cfg: DistributedConfig = DistributedConfig()

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0
