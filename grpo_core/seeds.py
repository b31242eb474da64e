"""The one way Sieve derives a seed from other values: `derive_seed(*parts)`.

A seed is the leading bits of the SHA-256 of the parts' text joined by a separator, so distinct
inputs give unrelated seeds (no arithmetic collisions such as `seed + step + g`, where step 0 at
G = 16 and step 8 at G = 8 draw the same stream), and the value never depends on Python's
salted `hash()`, the process or the platform. Every seed Sieve derives comes from here:
curation chunks, problem streams and the simulated sampler (with the values they had before
the helper existed), and the trainer's (step, round) seeds, the per-group-size seeds under
them, the hf sampler's micro-batches, the curriculum's batch draws and pilot-commit's second
pass.

Process-wide torch settings belong to the program, not the library: `seed_torch(seed,
deterministic)` sets torch's global seed and deterministic algorithms, and the caller (the train
flow, a benchmark, a test) calls it once before building a `grpo_core.trainer.Trainer`; the
trainer itself changes neither. Where library code needs seeded draws (LoRA's initial weights) it
takes them inside `seeded`, which leaves the global generator state as it found it.

Test: `pytest tests/grpo_core/test_seeds.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def derive_seed(*parts: object, bits: int = 32, sep: str = "|") -> int:
    """A `bits`-bit seed (1..256, a multiple of 4) for the parts, in order."""
    if not 0 < bits <= 256 or bits % 4:
        raise ValueError(f"bits must be a multiple of 4 in 4..256, got {bits}")
    digest = hashlib.sha256(sep.join(map(str, parts)).encode()).hexdigest()
    return int(digest[: bits // 4], 16)


def seed_torch(seed: int, deterministic: bool = True) -> None:
    """For the program that owns the process: torch's global seed (CPU and every CUDA device)
    and, with `deterministic`, torch's deterministic algorithms (warn-only; bitwise resume on
    CPU needs them). Pass `GRPOConfig.seed` and `GRPOConfig.deterministic`."""
    import torch

    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Draws inside come from `seed` (CPU, and `device` when it is CUDA); afterwards the global
    generators are as they were."""
    import torch

    cuda = device.type == "cuda"
    index = (
        (device.index if device.index is not None else torch.cuda.current_device()) if cuda else 0
    )
    with torch.random.fork_rng(devices=[index] if cuda else []):
        torch.random.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(index):
                torch.cuda.manual_seed(seed)
        yield
