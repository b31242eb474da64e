"""`pipeline.policy.bootstrap`: a fixed step count repeats exactly; a time budget stops."""

from __future__ import annotations

import pytest

from pipeline.policy.bootstrap import BootstrapConfig, train_tiny
from pipeline.policy.model import model_revision
from pipeline.problems.mix import MixConfig

SMALL = {"pool_size": 2000, "mix": MixConfig(families={"arith": "1-2"})}


def test_same_seed_and_steps_give_the_same_weights() -> None:
    first = train_tiny(BootstrapConfig(max_steps=4, **SMALL))
    again = train_tiny(BootstrapConfig(max_steps=4, **SMALL))
    other = train_tiny(BootstrapConfig(max_steps=4, seed=1, **SMALL))
    assert first.steps == again.steps == 4
    assert model_revision(first.model) == model_revision(again.model)
    assert model_revision(first.model) != model_revision(other.model)


def test_a_time_budget_overrides_the_step_count() -> None:
    result = train_tiny(BootstrapConfig(max_steps=10_000, max_minutes=0.002, **SMALL))
    assert 1 <= result.steps < 10_000


def test_a_config_without_steps_or_minutes_is_refused() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        BootstrapConfig(max_steps=None, max_minutes=None)
