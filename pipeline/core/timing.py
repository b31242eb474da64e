"""Process-wide wall-time accounting by named phase, for benchmarks' overhead breakdowns.

`with timed("scoring"): ...` adds the block's wall time to `TIMES["scoring"]`; `reset()` clears.
Cheap enough to stay on in production code (one perf_counter pair per block).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

TIMES: defaultdict[str, float] = defaultdict(float)


@contextmanager
def timed(phase: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMES[phase] += time.perf_counter() - start


def reset() -> None:
    TIMES.clear()
