"""Decoding budgets: the unset budget follows the model's prompt format, an explicit one wins,
and the curate TOML's `[sampling]` table and the CLI options reach the sampled runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from grpo_core.config import GRPOConfig
from pipeline.core.errors import SieveError
from pipeline.sampling.budget import DEFAULT_MAX_NEW_TOKENS, SamplingConfig, training_mismatch
from pipeline.selection import CurateConfig, load_curate_config

ROOT = Path(__file__).resolve().parents[2]


def test_unset_budget_follows_the_prompt_format() -> None:
    cfg = SamplingConfig()
    assert cfg.budget("raw") == DEFAULT_MAX_NEW_TOKENS["raw"] == 16
    assert cfg.budget("chat") == DEFAULT_MAX_NEW_TOKENS["chat"] >= 256
    assert SamplingConfig(max_new_tokens=300).budget("raw") == 300


def test_unset_temperature_is_the_trainers() -> None:
    """One default temperature in the project (issue 49): a [sampling] block that sets none
    samples, and is compared with training, at GRPOConfig's, which training samples at."""
    trainer = GRPOConfig().temperature
    cfg = SamplingConfig()
    assert cfg.temperature is None
    assert cfg.sampling_temperature == trainer
    assert cfg.params("raw", seed=3).temperature == trainer
    assert cfg.params("raw", greedy=True).temperature == 0.0
    assert training_mismatch(cfg, "raw", trainer, cfg.budget("raw")) == []
    assert training_mismatch(cfg, "raw", 0.6, cfg.budget("raw")) == [
        f"temperature {trainer:g} (curated) vs 0.6 (trained)"
    ]
    assert SamplingConfig(temperature=0.0).sampling_temperature == 0.0  # set, even when falsy
    # what a curriculum records and a curation key hashes: the value, so unset and the trainer's
    # own decide alike (and keys from before the field could be unset stay the same)
    assert cfg.resolved().temperature == trainer
    assert SamplingConfig(temperature=0.7).resolved().temperature == 0.7


def test_one_place_gives_a_temperature_a_value() -> None:
    """settings_sprawl.py's count (issue 49's target of 1 place per setting): the trainer's
    field is the only default in the code; recipes that choose one are counted apart."""
    spec = importlib.util.spec_from_file_location("sprawl", ROOT / "benchmarks/settings_sprawl.py")
    assert spec is not None and spec.loader is not None
    sprawl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sprawl)
    assert sprawl.temperature_places(ROOT) == ["grpo_core/config.py:GRPOConfig.temperature"]
    assert "data/configs/real_train.toml" in str(sprawl.temperature_recipe_values(ROOT))


def test_params_carry_every_setting() -> None:
    cfg = SamplingConfig(max_new_tokens=64, temperature=0.7, top_p=0.9, stop=("\n\n",))
    p = cfg.params("chat", seed=5)
    got = (p.max_new_tokens, p.temperature, p.top_p, p.stop, p.seed)
    assert got == (64, 0.7, 0.9, ("\n\n",), 5)
    assert cfg.params("chat", greedy=True).greedy


def test_sampling_table_in_a_curate_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('n_candidates = 10\n[sampling]\nmax_new_tokens = 256\nstop = ["</s>"]\n')
    cfg = load_curate_config(path)
    assert cfg.sampling.max_new_tokens == 256 and cfg.sampling.stop == ("</s>",)
    assert CurateConfig().sampling == SamplingConfig()


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("[sampling]\nmax_new_tokens = 0\n", "sampling.max_new_tokens"),
        ("[sampling]\ntop_p = 1.5\n", "sampling.top_p"),
        ("[sampling]\nbudget = 3\n", "sampling.budget"),
    ],
)
def test_bad_sampling_values_are_one_line(tmp_path: Path, body: str, where: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(body)
    with pytest.raises(SieveError) as info:
        load_curate_config(path)
    assert where in str(info.value) and "\n" not in str(info.value)
