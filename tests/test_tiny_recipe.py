"""The tiny policy's recipe exists once: the config files equal the constants the demo uses."""

from __future__ import annotations

from pathlib import Path

from flows.loop import DEMO_CURATE, DEMO_TRAIN
from pipeline.recipes import TINY_RECIPE_GRPO, TINY_RECIPE_ROLLOUTS_PER_STEP, load_settings
from pipeline.selection import TINY_CURATE, CurateConfig, load_curate_config

CONFIGS = Path(__file__).parents[1] / "data" / "configs"


def test_curate_file_is_the_recipe_and_the_demo_uses_it() -> None:
    from_file = load_curate_config(CONFIGS / "tiny_curate.toml")
    recipe = CurateConfig(n_candidates=from_file.n_candidates, **TINY_CURATE)  # type: ignore[arg-type]
    assert from_file == recipe
    assert DEMO_CURATE.model_copy(update={"n_candidates": from_file.n_candidates}) == recipe


def test_train_file_is_the_recipe_and_the_demo_uses_it() -> None:
    settings = load_settings(CONFIGS / "tiny_train.toml")
    assert settings.rollouts_per_step == TINY_RECIPE_ROLLOUTS_PER_STEP
    assert {k: settings.grpo[k] for k in TINY_RECIPE_GRPO} == TINY_RECIPE_GRPO
    assert settings.grpo_config() == DEMO_TRAIN.grpo_config()
    assert DEMO_TRAIN.rollouts_per_step == TINY_RECIPE_ROLLOUTS_PER_STEP
