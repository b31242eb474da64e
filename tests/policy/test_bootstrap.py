"""`pipeline.jobs.train.bootstrap`: a fixed step count repeats exactly; a time budget stops; the
recipe cache trains once per recipe and code version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pipeline.jobs.train.bootstrap as bootstrap
from pipeline.jobs.train.bootstrap import BootstrapConfig, bootstrap_cached, recipe_key, train_tiny
from pipeline.policy.model import load_policy, model_revision
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


def test_the_recipe_cache_trains_once_and_keys_on_the_recipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = BootstrapConfig(max_steps=3, **SMALL)
    folder = bootstrap_cached(cfg, tmp_path)
    meta = json.loads((folder / "sieve.json").read_text())
    assert meta["steps"] == 3 and meta["recipe"]["max_steps"] == 3
    assert meta["recipe"]["mix"] == {"families": {"arith": "1-2"}}
    model, _ = load_policy(folder)
    assert model_revision(model) == model_revision(train_tiny(cfg).model) == meta["model_revision"]

    def no_training(_: BootstrapConfig) -> None:
        raise AssertionError("trained again although the recipe is cached")

    monkeypatch.setattr(bootstrap, "train_tiny", no_training)
    assert bootstrap_cached(cfg, tmp_path) == folder  # reused, not retrained
    changed = BootstrapConfig(max_steps=3, lr=1e-3, **SMALL)
    assert recipe_key(changed) != recipe_key(cfg)
    with pytest.raises(AssertionError, match="trained again"):
        bootstrap_cached(changed, tmp_path)
    with pytest.raises(ValueError, match="max_minutes"):
        bootstrap_cached(BootstrapConfig(max_minutes=1.0, **SMALL), tmp_path)


def test_the_recipe_key_follows_the_weight_shaping_source(tmp_path: Path) -> None:
    import shutil

    import pipeline

    package = tmp_path / "pipeline"
    for sub in ("policy", "problems"):
        shutil.copytree(Path(pipeline.__file__).parent / sub, package / sub)
    (package / "jobs" / "train").mkdir(parents=True)
    shutil.copy(
        Path(pipeline.__file__).parent / "jobs" / "train" / "bootstrap.py",
        package / "jobs" / "train",
    )
    cfg = BootstrapConfig(max_steps=3, **SMALL)
    assert recipe_key(cfg, package) == recipe_key(cfg)  # same source, same key
    generator = sorted((package / "problems").glob("*.py"))[0]
    generator.write_text(generator.read_text() + "\n# changed\n")
    assert recipe_key(cfg, package) != recipe_key(cfg)
