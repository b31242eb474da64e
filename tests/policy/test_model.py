"""The tiny policy folder is a standard HF model folder; broken folders give one clear line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from pipeline.core.errors import SieveError
from pipeline.policy.model import create_tiny_model, load_policy, model_revision, read_meta


def test_folder_loads_with_auto_classes(tiny_model_dir: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "sieve.json"):
        assert (tiny_model_dir / name).exists()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "llama"
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 2e6
    assert tokenizer("12+3=")["input_ids"][0] == tokenizer.bos_token_id
    assert read_meta(tiny_model_dir)["model_revision"] == model_revision(model)


def test_revision_follows_the_weights(tmp_path: Path) -> None:
    a = create_tiny_model(tmp_path / "a", seed=0)
    assert create_tiny_model(tmp_path / "b", seed=0) == a
    assert create_tiny_model(tmp_path / "c", seed=1) != a
    model, _ = load_policy(tmp_path / "a")
    with torch.no_grad():
        next(model.parameters())[0, 0] += 1e-3
    assert model_revision(model) != a


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="does not exist"):
        load_policy(tmp_path / "nope")


def test_folder_without_config(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SieveError, match=r"config\.json is missing"):
        load_policy(tmp_path / "empty")


def test_corrupt_weights_give_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(SieveError, match="cannot load model") as info:
        load_policy(broken)
    assert "\n" not in str(info.value)
