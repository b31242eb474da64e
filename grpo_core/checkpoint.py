"""Atomic, verifiable training checkpoints: write to a temp folder, fsync, rename; keep the last K.

A checkpoint is a folder `step-000050/` holding a normal Hugging Face model folder (so samplers
and `sieve eval` can load it directly; weights at `GRPOConfig.save_dtype`), `trainer_state.pt`
(scheduler, β schedule, RNG states, counters, config), `adapter/` (peft format) under LoRA,
`resume/` (what only an exact continuation needs: `optimizer.pt`, and `master.safetensors` when
the weights were saved at a lower precision than the parameters) and `manifest.json` (size and
SHA-256 of every other file).

The folder becomes visible under its final name only by `rename`, after every file and
the folder itself were fsynced, so a process killed mid-write leaves at most a `.tmp-*` folder
that loading ignores and the next save removes. Loading checks the manifest: a truncated or
corrupt checkpoint is refused with one line naming the file, and `latest_valid` falls back to
the next older one.

Only the newest checkpoint keeps `resume/`: after a save, every older checkpoint drops it —
its manifest is rewritten without those entries (write, fsync, rename over the old one), then
the folder is removed, so a kill at any point leaves each checkpoint verifiable. A checkpoint
without `resume/` restores weights, schedules and counters but starts fresh optimiser moments
(`grpo_core.state` warns). Sizes for SmolLM2-135M (fp32 parameters): see the README.

Test: `.venv/bin/pytest tests/grpo_core/test_checkpoint.py -q`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

MANIFEST = "manifest.json"
STATE = "trainer_state.pt"
PREFIX = "step-"
RESUME = "resume"  # subfolder: files only the newest checkpoint keeps
OPTIMIZER = "optimizer.pt"
MASTER = "master.safetensors"
ADAPTER = "adapter"  # subfolder: LoRA adapters in peft format


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message is one line naming the problem."""


def step_dir(root: Path, step: int) -> Path:
    return root / f"{PREFIX}{step:06d}"


def saved(root: Path, step: int) -> bool:
    """Whether checkpoint `step` exists under `root` (published: its folder has its final name)."""
    return step_dir(root, step).is_dir()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def save(
    root: Path,
    step: int,
    write_model: Callable[[Path], None],
    state: dict[str, Any],
    keep: int,
    crash_point: Callable[[str], None] = lambda name: None,
    write_resume: Callable[[Path], None] | None = None,
) -> Path:
    """Write checkpoint `step` under `root` atomically; prune to the newest `keep`; drop the
    resume-only files (`write_resume`'s, written into `resume/`) of every other one."""
    root.mkdir(parents=True, exist_ok=True)
    final = step_dir(root, step)
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        _write_tmp(tmp, write_model, state, crash_point, write_resume)
    except Exception:  # e.g. a full disk: leave no half-written folder (a kill still may)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():  # a re-run of the same step after a crash: replace it whole
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(root)
    crash_point("train.checkpoint.after_rename")
    prune(root, keep)
    for _, path in list_steps(root):
        if path != final:
            drop_resume(path)
    return final


def _write_tmp(
    tmp: Path,
    write_model: Callable[[Path], None],
    state: dict[str, Any],
    crash_point: Callable[[str], None],
    write_resume: Callable[[Path], None] | None,
) -> None:
    """Every file of a checkpoint, its manifest last, all fsynced, into the temp folder."""
    write_model(tmp)
    torch.save(state, tmp / STATE)
    if write_resume is not None:
        (tmp / RESUME).mkdir()
        write_resume(tmp / RESUME)
    crash_point("train.checkpoint.mid_write")
    manifest = {str(p.relative_to(tmp)): [p.stat().st_size, _sha256(p)] for p in _files(tmp)}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
    for p in [*_files(tmp), tmp / MANIFEST]:
        with p.open("rb") as f:
            os.fsync(f.fileno())
    _fsync_dir(tmp)


def drop_resume(path: Path) -> None:
    """Remove `resume/` from one checkpoint, manifest first (atomic rename), files after."""
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        return  # unreadable: loading refuses it anyway; nothing trustworthy to rewrite
    kept = {k: v for k, v in manifest.items() if not k.startswith(f"{RESUME}/")}
    if len(kept) < len(manifest):
        tmp = path / f"{MANIFEST}.tmp"
        tmp.write_text(json.dumps(kept, indent=1))
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, manifest_path)
        _fsync_dir(path)
    shutil.rmtree(path / RESUME, ignore_errors=True)


def prune(root: Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints and any leftover temp folders."""
    for leftover in root.glob(".tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for _, path in list_steps(root)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def list_steps(root: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every finished checkpoint under `root`, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.glob(f"{PREFIX}*"):
        suffix = path.name.removeprefix(PREFIX)
        if path.is_dir() and suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)


def verify(path: Path) -> dict[str, Any]:
    """The manifest; CheckpointError unless every file it lists is present and intact."""
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: unreadable {MANIFEST} ({exc})") from None
    for name, (size, digest) in manifest.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"checkpoint {path}: {name} is missing")
        if file.stat().st_size != size:
            raise CheckpointError(
                f"checkpoint {path}: {name} is truncated ({file.stat().st_size} of {size} bytes)"
            )
        if _sha256(file) != digest:
            raise CheckpointError(f"checkpoint {path}: {name} is corrupt (checksum mismatch)")
    if STATE not in manifest:
        raise CheckpointError(f"checkpoint {path}: {STATE} is not in the manifest")
    return dict(manifest)


def load_state(path: Path) -> dict[str, Any]:
    """The verified trainer state of one checkpoint folder.

    With `resume/` present the state also holds "optimizer" (its state dict) and "master" (the
    path of the full-precision weights, when saved); older checkpoints have neither.
    """
    manifest = verify(path)
    state: dict[str, Any] = torch.load(path / STATE, map_location="cpu", weights_only=False)
    if f"{RESUME}/{OPTIMIZER}" in manifest:
        state["optimizer"] = torch.load(
            path / RESUME / OPTIMIZER, map_location="cpu", weights_only=False
        )
    if f"{RESUME}/{MASTER}" in manifest:
        state["master"] = path / RESUME / MASTER
    return state


def latest_valid(root: Path, warn: Callable[[str], None] = print) -> tuple[Path, dict] | None:
    """Newest checkpoint that verifies, with its state; older ones are tried in turn."""
    for _, path in reversed(list_steps(root)):
        try:
            return path, load_state(path)
        except CheckpointError as exc:
            warn(f"{exc}; trying an older checkpoint")
    return None
