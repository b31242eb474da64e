"""The tiny policy's recipe exists once, as two files: the demo and the benchmarks read them, and
the headline benchmark's committed results were measured with exactly these values."""

from __future__ import annotations

import json
from pathlib import Path

from flows.loop import DEMO_CURATE, DEMO_TRAIN
from pipeline.jobs.train.settings import TINY_GRPO, TINY_RECIPE_ROLLOUTS_PER_STEP, load_settings
from pipeline.selection import TINY_CURATE, load_curate_config

CONFIGS = Path(__file__).parents[1] / "data" / "configs"
CURRICULUM = Path(__file__).parents[1] / "benchmarks" / "results" / "curriculum.json"


def test_the_demo_curates_and_trains_with_the_recipe_files() -> None:
    from_file = load_curate_config(CONFIGS / "tiny_curate.toml")
    assert DEMO_CURATE.model_copy(update={"n_candidates": from_file.n_candidates}) == from_file
    settings = load_settings(CONFIGS / "tiny_train.toml")
    assert DEMO_TRAIN.grpo_config() == settings.grpo_config()
    assert DEMO_TRAIN.rollouts_per_step == settings.rollouts_per_step


def test_the_headline_was_measured_with_the_recipe_files() -> None:
    """benchmarks/results/curriculum.json records the recipe it ran: changing a tiny recipe file
    without re-running the benchmark leaves the README's headline about another recipe."""
    setup = json.loads(CURRICULUM.read_text())["setup"]
    assert setup["curate"] == TINY_CURATE
    assert setup["rollouts_per_step"] == TINY_RECIPE_ROLLOUTS_PER_STEP
    assert setup["grpo"] == TINY_GRPO
