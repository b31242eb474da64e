"""Child process for the locking tests: one curation on a simulated policy into the ledger at
argv[1], opened `transient` (as the flows open it) or `held` (one connection for the whole run).

Not a test module (no test_ prefix); `tests/store/test_locking.py` runs it. argv: ledger path,
transient | held, gate file, free chunks. After `free chunks` sampler calls, each further call
waits until the gate file exists, so the test can act while the curation is mid-run. Prints
`opening`, `waiting` the first time an open meets another process's lock (so the test knows the
curation waits, not that it is slow to start), `<stage> <done>` after every committed chunk, then
`done`; a SieveError is one `error: ...` line and exit code 1, as the CLI would print it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate_child import CFG, simulated_policy

from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.store import Ledger, locks

T = TypeVar("T")


class GatedSampler:
    """Samples like `inner`; after `free` calls, each call first waits for the gate file."""

    def __init__(self, inner: object, gate: Path, free: int):
        self.inner, self.gate, self.free, self.calls = inner, gate, free, 0
        self.backend = inner.backend  # type: ignore[attr-defined]
        self.model_name = inner.model_name  # type: ignore[attr-defined]

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        self.calls += 1
        deadline = time.monotonic() + 300
        while self.calls > self.free and not self.gate.exists():
            if time.monotonic() > deadline:
                raise SystemExit("gate never opened")
            time.sleep(0.05)
        return self.inner.sample(prompts, n, params)  # type: ignore[attr-defined]


def say_when_refused() -> None:
    """Print `waiting` once, when an attempt inside `locks.wait_for` first raises `Busy`."""
    real = locks.wait_for
    said = False

    def wait_for(attempt: Callable[[], T], path: Path) -> T:
        def observed() -> T:
            nonlocal said
            try:
                return attempt()
            except locks.Busy:
                if not said:
                    said = True
                    print("waiting", flush=True)
                raise

        return real(observed, path)

    locks.wait_for = wait_for


def main(path: Path, mode: str, gate: Path, free: int) -> None:
    say_when_refused()
    policy = simulated_policy(CFG)
    policy = replace(policy, sampler=GatedSampler(policy.sampler, gate, free))
    print("opening", flush=True)
    with Ledger.open(path=path, transient=mode == "transient") as ledger:
        curate(ledger, policy, CFG, progress=lambda e: print(f"{e.stage} {e.done}", flush=True))
    print("done", flush=True)


if __name__ == "__main__":
    try:
        main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    except SieveError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
