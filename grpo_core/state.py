"""What a trainer writes into a checkpoint and how it comes back (`grpo_core.checkpoint` does the
atomic file layer).

Written per checkpoint:
- a plain model folder at `cfg.save_dtype` (under LoRA: the adapters merged in, so `load_policy`
  and vLLM load it like any other; plus `adapter/` in peft format, from which resume restores the
  trained adapters exactly). A bf16-saved folder is a bf16 model (config included): loading it
  gives bf16 parameters, so continuing training from it should `.float()` the model first;
- `trainer_state.pt`: step, lr scheduler, β schedule, counters, RNG states, config;
- `resume/` (only the newest checkpoint keeps it): the optimiser state, and fp32 master weights
  when `save_dtype` is less precise than the parameters.

Resume from a checkpoint without `resume/` (the newest was corrupt, an older one is used): the
weights (as saved), schedules and counters are restored, the optimiser starts with fresh moments,
and a warning says the continuation is not exact. Chosen over failing because failing would leave
no way to continue after a corrupt newest checkpoint short of restarting the run.

Test: `.venv/bin/pytest tests/grpo_core/test_checkpoint.py -q`.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_core import checkpoint as ckpt
from grpo_core import fsdp
from grpo_core.lora import merged
from grpo_core.types import Counters, TrainerError

if TYPE_CHECKING:
    from grpo_core.trainer import Trainer

# Fields that change the model's parameter set: a checkpoint written under other values of
# these cannot be resumed with this config.
MODEL_FIELDS = ("reference", "lora_rank", "lora_alpha")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def param_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(p.dtype for p in model.parameters() if p.is_floating_point())


def save_dtype(t: Trainer) -> torch.dtype:
    """The dtype checkpoint weights are written in (`auto`: the parameters')."""
    name = t.cfg.save_dtype
    return param_dtype(t.model) if name == "auto" else DTYPES[name]


def lossy(t: Trainer) -> bool:
    """Whether weights saved at `save_dtype` lose precision against the trainable parameters."""
    saved, own = save_dtype(t), param_dtype(t.model)
    return saved != own and torch.finfo(saved).bits <= torch.finfo(own).bits


def whole_model(t: Trainer) -> torch.nn.Module:
    """The model with whole weights: the trained one, or under fsdp rank 0's host copy (which
    `grpo_core.fsdp.gather_for_save` refreshed)."""
    if t.fsdp is None:
        return t.model
    if t.fsdp.host is None:
        raise TrainerError("only rank 0 holds the whole weights under fsdp")
    return t.fsdp.host


def save(t: Trainer, optimizer: dict[str, Any] | None = None) -> Path:
    """Checkpoint the trainer at `t.step` under its checkpoint_dir; returns the folder.
    `optimizer`: the whole optimiser state when `t.optimizer` holds shards (fsdp)."""
    if t.checkpoint_dir is None:
        raise TrainerError("no checkpoint_dir was given to the trainer")
    for name, p in whole_model(t).named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise TrainerError(f"refusing to checkpoint non-finite weights ({name})")
    return ckpt.save(
        t.checkpoint_dir,
        t.step,
        lambda folder: write_model(t, folder),
        trainer_state(t),
        t.cfg.keep_checkpoints,
        t.crash_point,
        write_resume=lambda folder: write_resume(t, folder, optimizer),
    )


def resume(t: Trainer, path: Path | None = None) -> int:
    """Restore the newest valid checkpoint (or `path`); returns the step it continues at."""
    if path is None:
        if t.checkpoint_dir is None:
            raise TrainerError("resume needs a checkpoint_dir")
        found = ckpt.latest_valid(t.checkpoint_dir, t.hooks.warn)
        if found is None:
            raise TrainerError(f"no usable checkpoint under {t.checkpoint_dir}")
        path, state = found
    else:
        state = ckpt.load_state(path)
    return restore(t, path, state)


def write_model(t: Trainer, folder: Path) -> None:
    """The plain model folder (merged under LoRA) at the save dtype, tokenizer, extras.

    A folder saved below the parameters' precision is a model of that dtype throughout (its
    config says so, `write_extra` sees the rounded copy), so its identity
    (`pipeline.policy.model.folder_revision`) is that of the model loaded from it.
    """
    own = model = whole_model(t)
    dtype = save_dtype(t)
    if t.cfg.reference == "lora_base":
        model.save_pretrained(folder / ckpt.ADAPTER)  # type: ignore[operator]
        model = merged(t.model)
    if dtype != param_dtype(model):
        model = (copy.deepcopy(model) if model is own else model).to(dtype)
    model.save_pretrained(folder, safe_serialization=True)  # type: ignore[operator]
    if hasattr(t.tokenizer, "save_pretrained"):
        t.tokenizer.save_pretrained(folder)
    t.hooks.write_extra(folder, model)


def write_resume(t: Trainer, folder: Path, optimizer: dict[str, Any] | None = None) -> None:
    """Optimiser state and, when the saved weights are rounded, fp32 master weights."""
    torch.save(optimizer or t.optimizer.state_dict(), folder / ckpt.OPTIMIZER)
    if lossy(t) and t.cfg.reference != "lora_base":  # LoRA: adapter/ is already full precision
        from safetensors.torch import save_file

        model = whole_model(t)
        params = {k: p.detach().cpu().contiguous() for k, p in model.named_parameters()}
        save_file(params, folder / ckpt.MASTER)


def trainer_state(t: Trainer) -> dict[str, Any]:
    state: dict[str, Any] = {
        "step": t.step,
        "scheduler": t.scheduler.state_dict(),
        "beta_schedule": dict(vars(t.beta_schedule)),
        "counters": dataclasses.asdict(t.counters),
        "torch_rng": torch.get_rng_state(),
        "config": dataclasses.asdict(t.cfg),
    }
    if t.device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(t.device)
    return state


def restore(t: Trainer, path: Path, state: dict[str, Any]) -> int:
    """Load `state` (read from checkpoint `path`) into the trainer; the step it continues at."""
    saved = state.get("config", {})
    for name in MODEL_FIELDS:
        if name in saved and saved[name] != getattr(t.cfg, name):
            raise ckpt.CheckpointError(
                f"checkpoint {path} was trained with {name}={saved[name]!r}, "
                f"this run has {name}={getattr(t.cfg, name)!r}; use the same value"
            )
    _load_weights(t, path, state)
    if "optimizer" in state:  # under fsdp each rank keeps its shards of the whole moments
        sd = state["optimizer"]
        t.optimizer.load_state_dict(sd if t.fsdp is None else fsdp.shard_optimizer_state(t, sd))
    else:
        t.hooks.warn(
            f"checkpoint {path} has no optimiser state (only the newest checkpoint keeps it); "
            "resuming its weights with fresh optimiser moments: not an exact continuation"
        )
    t.scheduler.load_state_dict(state["scheduler"])
    vars(t.beta_schedule).update(state["beta_schedule"])
    t.counters = Counters(**state["counters"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and t.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"], t.device)
    t.step = int(state["step"])
    return t.step


def _load_weights(t: Trainer, path: Path, state: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    if t.cfg.reference == "lora_base":
        from peft import set_peft_model_state_dict

        adapter = path / ckpt.ADAPTER / "adapter_model.safetensors"
        weights = load_file(adapter) if adapter.is_file() else state["adapter"]  # older layout
        set_peft_model_state_dict(t.model, weights)
        return
    if "master" in state:  # full precision: exact
        _copy_into(path, load_file(state["master"]), dict(t.model.named_parameters()))
        return
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ckpt.CheckpointError(f"checkpoint {path}: no *.safetensors weights")
    loaded: dict[str, Tensor] = {}
    for f in files:
        loaded.update(load_file(f))
    _copy_into(path, loaded, t.model.state_dict())


def _copy_into(path: Path, loaded: dict[str, Tensor], own: dict[str, Tensor]) -> None:
    """Copy `loaded` into `own` (cast to its dtype), or one CheckpointError line saying why not."""
    tied = tied_aliases(own)
    missing = [k for k in own if k not in loaded and not (tied.get(k, set()) & loaded.keys())]
    unexpected = [k for k in loaded if k not in own]
    bad_shape = [k for k in loaded if k in own and own[k].shape != loaded[k].shape]
    if missing or unexpected or bad_shape:
        what = (
            f"shape of {bad_shape[0]} {tuple(loaded[bad_shape[0]].shape)} vs "
            f"{tuple(own[bad_shape[0]].shape)}"
            if bad_shape
            else f"missing {missing[:2]}"
            if missing
            else f"unexpected {unexpected[:2]}"
        )
        raise ckpt.CheckpointError(
            f"checkpoint {path} does not fit this model ({what}); "
            "resume with the model it was trained from"
        )
    with torch.no_grad():  # under fsdp: every rank in the same key order (a collective)
        for k, v in loaded.items():
            own[k].copy_(fsdp.distribute_like(v.to(own[k].device), own[k]))


def tied_aliases(state: dict[str, Tensor]) -> dict[str, set[str]]:
    """For each key, the other keys sharing its storage (tied embeddings)."""
    by_ptr: dict[int, set[str]] = {}
    ptr = {k: fsdp.local(v).data_ptr() for k, v in state.items()}
    for k, p in ptr.items():
        by_ptr.setdefault(p, set()).add(k)
    return {k: by_ptr[p] - {k} for k, p in ptr.items()}
