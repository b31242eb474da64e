"""Decoding budgets: the unset budget follows the model's prompt format, an explicit one wins,
and the curate TOML's `[sampling]` table and the CLI options reach the sampled runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.errors import SieveError
from pipeline.sampling.budget import DEFAULT_MAX_NEW_TOKENS, SamplingConfig
from pipeline.selection import CurateConfig, load_curate_config


def test_unset_budget_follows_the_prompt_format() -> None:
    cfg = SamplingConfig()
    assert cfg.budget("raw") == DEFAULT_MAX_NEW_TOKENS["raw"] == 16
    assert cfg.budget("chat") == DEFAULT_MAX_NEW_TOKENS["chat"] >= 256
    assert SamplingConfig(max_new_tokens=300).budget("raw") == 300


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
