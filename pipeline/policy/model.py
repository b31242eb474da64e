"""The tiny policy's model: a standard `transformers` Llama (which vLLM also serves), random init.

`create_tiny_model(path)` writes a model folder (`config.json`, `model.safetensors`, tokenizer
files); `model_revision` / `folder_revision` hash the weights and config, which is how the ledger
tells models and checkpoints apart; `load_policy` loads any local causal-LM folder with one clear
error line when it can't.

Sizes: a trial here found a ~1 M-parameter Llama-style character model learned an addition ladder
in minutes while a GPT-2-style model of similar size did not, hence Llama.

Test: `pytest tests/policy/test_model.py`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, ValidationError
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from grpo_core.validate import problem
from pipeline.core.errors import SieveError
from pipeline.policy.tiny import TinySize
from pipeline.policy.tokenizer import build_tokenizer

SIEVE_META = "sieve.json"  # written beside config.json: prompt format and how the model was made


def tiny_config(size: TinySize, vocab_size: int, special: dict[str, int]) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=size.hidden_size,
        intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_hidden_layers,
        num_attention_heads=size.num_attention_heads,
        num_key_value_heads=size.num_attention_heads,
        max_position_embeddings=size.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=special["bos"],
        eos_token_id=special["eos"],
        pad_token_id=special["pad"],
    )


def new_tiny_model(
    seed: int = 0, size: TinySize | None = None
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """A random-init tiny Llama and its character tokenizer (not saved)."""
    size = size or TinySize()
    tokenizer = build_tokenizer()
    special = {
        "bos": tokenizer.bos_token_id,
        "eos": tokenizer.eos_token_id,
        "pad": tokenizer.pad_token_id,
    }
    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_config(size, len(tokenizer), special))
    model.generation_config.pad_token_id = special["pad"]
    return model, tokenizer


def save_policy(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, path: Path, meta: dict
) -> str:
    """Save a standard HF model folder plus `sieve.json`; returns the model revision."""
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    revision = model_revision(model)
    (path / SIEVE_META).write_text(json.dumps({**meta, "model_revision": revision}, indent=1))
    return revision


def create_tiny_model(path: Path, seed: int = 0, size: TinySize | None = None) -> str:
    """Write a random-init tiny model folder (tests, benchmarks); returns its revision."""
    model, tokenizer = new_tiny_model(seed, size)
    meta = {"prompt_format": "raw", "source": "random-init", "size": asdict(size or TinySize())}
    return save_policy(model, tokenizer, Path(path), meta)


# Config keys that say how a model was saved or run, not what it computes.
_VOLATILE_CONFIG = frozenset(
    {"transformers_version", "torch_dtype", "dtype", "architectures", "use_cache", "return_dict"}
)


def _config_digest(config: dict) -> str:
    kept = {
        k: v
        for k, v in sorted(config.items())
        if not k.startswith("_") and k not in _VOLATILE_CONFIG and not k.startswith("output_")
    }
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def _tensor_digest(tensor: torch.Tensor) -> str:
    data = tensor.detach().to("cpu").contiguous()
    digest = hashlib.sha256(f"{data.dtype}|{tuple(data.shape)}|".encode())
    digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def _revision(config: dict, tensor_digests: list[str]) -> str:
    digest = hashlib.sha256(_config_digest(config).encode())
    for part in sorted(tensor_digests):
        digest.update(part.encode())
    return digest.hexdigest()[:16]


def model_revision(model: torch.nn.Module) -> str:
    """Content hash of a model's weights and config, first 16 hex digits.

    The weights count as a multiset of tensors (dtype, shape, bytes), each stored tensor once:
    tied weights share one storage in memory and one entry on disk, so the hash of a loaded or
    trained model equals `folder_revision` of the folder it is saved to (names do not enter, so
    `save_pretrained`'s choice of which tied name to keep does not matter). Curation, training
    and evaluation all identify a model by this value; the folder path is only a label.
    """
    seen: set[tuple[int, int]] = set()
    digests = []
    for tensor in model.state_dict().values():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset())
        if tensor.numel() and key in seen:
            continue
        seen.add(key)
        digests.append(_tensor_digest(tensor))
    config = getattr(model, "config", None)
    return _revision(config.to_dict() if config is not None else {}, digests)


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    return files or sorted(folder.glob("pytorch_model*.bin"))


@lru_cache(maxsize=64)
def _folder_revision(folder: Path, stamp: tuple) -> str:
    from safetensors import safe_open
    from transformers import AutoConfig

    digests = []
    for path in _weight_files(folder):
        if path.suffix == ".safetensors":
            with safe_open(str(path), framework="pt") as f:
                digests += [_tensor_digest(f.get_tensor(name)) for name in f.keys()]  # noqa: SIM118
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            digests += [_tensor_digest(t) for t in state.values()]
    config = AutoConfig.from_pretrained(folder, local_files_only=True).to_dict()
    return _revision(config, digests)


def folder_revision(path: str | Path) -> str:
    """`model_revision` of the model a local folder holds, read from its files without building
    the model (cached per folder while its files are unchanged). One SieveError line when the
    folder holds no model."""
    folder = Path(path).resolve()
    if not (folder / "config.json").is_file():
        raise SieveError(f"{folder} is not a model folder: config.json is missing")
    files = [*_weight_files(folder), folder / "config.json"]
    if len(files) == 1:
        raise SieveError(
            f"cannot load model from {folder}: no weights (*.safetensors or pytorch_model*.bin)"
        )
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    try:
        return _folder_revision(folder, stamp)
    except SieveError:
        raise
    except Exception as exc:  # a truncated or foreign weights file
        reason = " ".join(str(exc).split())[:300]
        raise SieveError(f"cannot load model from {folder}: {reason}") from exc


class ModelMeta(BaseModel):
    """The keys of `sieve.json` that Sieve reads, each with its type; none is required (a folder
    without the file is a plain Hugging Face folder) and other keys (a bootstrap's recipe, a
    converted GGUF's provenance) are kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True)

    prompt_format: Literal["raw", "chat"] | None = None  # `pipeline.policy.prompts`
    source: str | None = None  # where the folder came from (`sieve models list`)
    model_revision: str | None = None  # `folder_revision` when it was written
    base_revision: str | None = None  # a checkpoint's: the model it was trained from
    curriculum_id: str | None = None
    train_id: str | None = None
    step: int | None = None


def read_meta(path: Path) -> dict:
    """The folder's `sieve.json` as a dict ({} without one); one SieveError line naming the file
    when it is not a JSON object of `ModelMeta`'s keys (every command that reads a model folder
    reads it here)."""
    meta = Path(path) / SIEVE_META
    if not meta.exists():
        return {}
    fix = "fix it, or delete it (a model folder needs no sieve.json)"
    try:
        raw = json.loads(meta.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SieveError(f"{meta} is not UTF-8 text (byte {exc.start}); {fix}") from None
    except ValueError as exc:  # json.JSONDecodeError
        raise SieveError(f"{meta} is not valid JSON ({exc}); {fix}") from None
    if not isinstance(raw, dict):
        raise SieveError(f"{meta} must hold a JSON object, not {_json_kind(raw)}; {fix}")
    try:
        ModelMeta.model_validate(raw)
    except ValidationError as exc:
        raise SieveError(f"{meta}: {problem(exc, ModelMeta)}; {fix}") from None
    return raw


def _json_kind(value: object) -> str:
    """What a parsed JSON value is, in JSON's words (`a list`, `null`)."""
    if value is None:
        return "null"
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def load_policy(
    path: str | Path, device: str | torch.device = "cpu"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a local causal-LM folder for sampling; one clear SieveError line when it can't."""
    folder = Path(path)
    if not folder.is_dir():
        raise SieveError(f"model folder {folder} does not exist (run `sieve bootstrap` first?)")
    if not (folder / "config.json").exists():
        raise SieveError(f"{folder} is not a model folder: config.json is missing")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # transformers raises many types for broken folders
        reason = " ".join(str(exc).split())[:300]
        raise SieveError(f"cannot load model from {folder}: {reason}") from exc
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(torch.device(device))  # type: ignore[arg-type]
    model.eval()
    return model, tokenizer
