"""The one way Sieve derives a seed from other values: `derive_seed(*parts)`.

A seed is the leading bits of the SHA-256 of the parts' text joined by a separator, so distinct
inputs give unrelated seeds (no arithmetic collisions such as `seed + step + g`, where step 0 at
G = 16 and step 8 at G = 8 draw the same stream), and the value never depends on Python's
salted `hash()`, the process or the platform. Every seed Sieve derives comes from here:
curation chunks, problem streams and the simulated sampler (with the values they had before
the helper existed), and the trainer's (step, round) seeds, the per-group-size seeds under
them, the hf sampler's micro-batches, the curriculum's batch draws and pilot-commit's second
pass.

Test: `pytest tests/grpo_core/test_seeds.py`.
"""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object, bits: int = 32, sep: str = "|") -> int:
    """A `bits`-bit seed (1..256, a multiple of 4) for the parts, in order."""
    if not 0 < bits <= 256 or bits % 4:
        raise ValueError(f"bits must be a multiple of 4 in 4..256, got {bits}")
    digest = hashlib.sha256(sep.join(map(str, parts)).encode()).hexdigest()
    return int(digest[: bits // 4], 16)
