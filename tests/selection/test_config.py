"""`CurateConfig` documents itself, validates across fields, and loads from TOML in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.core.errors import SieveError
from pipeline.problems import FAMILIES
from pipeline.selection.config import CurateConfig, load_curate_config


def test_defaults() -> None:
    cfg = CurateConfig()
    assert (cfg.screen_g, cfg.refine_g, cfg.band_low, cfg.band_high) == (8, 32, 0.1, 0.9)
    assert cfg.mix == {name: "all" for name in FAMILIES}
    assert set(cfg.mix_levels()) == set(FAMILIES)


def test_every_field_says_what_it_trades_and_where_its_default_comes_from() -> None:
    for name, field in CurateConfig.model_fields.items():
        assert field.description and "Default" in field.description, name


def test_frozen_and_extra_forbidden() -> None:
    cfg = CurateConfig()
    with pytest.raises(ValidationError):
        cfg.seed = 3
    with pytest.raises(ValidationError):
        CurateConfig(screen_gg=8)  # type: ignore[call-arg]


def _load(tmp_path: Path, text: str) -> CurateConfig:
    path = tmp_path / "curate.toml"
    path.write_text(text, encoding="utf-8")
    return load_curate_config(path)


def test_load_reads_fields_and_mix(tmp_path: Path) -> None:
    cfg = _load(tmp_path, 'screen_g = 4\nrefine_g = 16\n[mix]\narith = "1-3"\n')
    assert (cfg.screen_g, cfg.refine_g) == (4, 16)
    assert cfg.mix_levels() == {"arith": [1, 2, 3]}


@pytest.mark.parametrize(
    ("text", "key", "fix"),
    [
        ("screen_gg = 8\n", "screen_gg:", "extra inputs are not permitted"),
        ("band_low = 0.5\nband_high = 0.4\n", "band_high:", "lower band_low"),
        ("screen_g = 16\nrefine_g = 8\n", "refine_g:", ">= screen_g"),
        ("replay_share = 1.5\n", "replay_share", "must be a finite number in [0, 1], got 1.5"),
        ("stage1_g = 16\nmax_group_size = 8\n", "max_group_size:", ">= stage1_g"),
        ('[mix]\nnope = "all"\n', "mix:", "unknown family"),
        ("seed = 'x'\n", "seed", "must be an integer in [0, 9223372036854775807], got 'x'"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(
    tmp_path: Path, text: str, key: str, fix: str
) -> None:
    with pytest.raises(SieveError) as err:
        _load(tmp_path, text)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "curate.toml"))
    assert f" {key} " in message and fix in message, message


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="no such file"):
        load_curate_config(tmp_path / "absent.toml")
    with pytest.raises(SieveError, match="invalid TOML"):
        _load(tmp_path, "screen_g = = 8\n")
