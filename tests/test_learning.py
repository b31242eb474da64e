"""The learning test: GRPO on a Sieve-curated curriculum from the default bootstrapped tiny policy.

The recipe is `benchmarks/grpo_headroom.py`'s `curated_target_lean_p64` arm: the levels whose
sampled held-out pass@1 is in [0.15, 0.7] are the target; Sieve curates 2,000 candidates of those
levels with the tiny policy's curation recipe (`TINY_CURATE`: stage 2 off, stage-1 band
[0.02, 1], replay share 0.5) and GRPO trains 150 steps of 64 prompts × G = 8. Held-out pass@1 is
the mean of 8 samples at T = 1 on 30 problems per level.

Slow: `make test-learning`, or `make test-all`. The test starts from the default bootstrapped
policy, which its fixture takes from pytest's cache (trained there on a machine's first run, ~75 s,
shown as setup time by `--durations`); the curation, training and both evaluations are the test
itself, whose time it prints.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow


def _benchmark() -> ModuleType:
    path = Path(__file__).parents[1] / "benchmarks" / "grpo_headroom.py"
    spec = importlib.util.spec_from_file_location("grpo_headroom", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bootstrapped(pytestconfig: pytest.Config) -> Path:
    """The default bootstrapped policy (what `sieve bootstrap` trains), from pytest's cache.

    The first run on a machine trains it (~75 s, reported as this fixture's setup time); later
    runs reuse it while the recipe and the code that shapes the weights are unchanged
    (`bootstrap_cached` keys on both). `pytest --cache-clear` trains it afresh.
    """
    from pipeline.jobs.train.bootstrap import BootstrapConfig, bootstrap_cached

    assert pytestconfig.cache is not None
    return bootstrap_cached(BootstrapConfig(), pytestconfig.cache.mkdir("tiny-bootstrap"))


@pytest.mark.timeout(900)
def test_grpo_on_a_curated_curriculum_raises_the_target_levels(bootstrapped: Path) -> None:
    import time

    from pipeline.policy.model import load_policy

    bench = _benchmark()
    started = time.perf_counter()
    model, tok = load_policy(bootstrapped)
    before = bench.heldout(model, tok)
    result = bench.run_arm("curated_target_lean_p64", bootstrapped, before, "arith")
    seconds = time.perf_counter() - started
    print(
        f"learning: {seconds:.0f} s after the bootstrap "
        f"(training {result['train_seconds']:.0f} s); "
        f"target {result['target_levels']} sampled gain {100 * result['target_sampled_gain']:+.1f} "
        f"points, worst other level {100 * result['other_worst_sampled_gain']:+.1f}"
    )
    assert result["target_levels"], f"no level in the learnable zone:\n{before}"
    assert result["target_sampled_gain"] >= 0.10, result["by_level"]
    assert result["other_worst_sampled_gain"] >= -0.05, result["by_level"]
