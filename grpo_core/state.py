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

The trainer hands out a `TrainerState` (`Trainer.state()`): its model, optimiser and schedules
by reference, its step and counters by value, the config, and where the whole weights are (the
model, or under fsdp rank 0's host copy). `save` writes one; `resume` loads a checkpoint into
its objects in place and returns it with the checkpoint's step and counters, which the trainer
takes back (`Trainer.load_state`). Nothing here sees the trainer itself.

Test: `.venv/bin/pytest tests/grpo_core/test_checkpoint.py -q`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from grpo_core import checkpoint as ckpt
from grpo_core import fsdp
from grpo_core.config import GRPOConfig
from grpo_core.kl import BetaSchedule
from grpo_core.lora import merged
from grpo_core.types import Counters, TrainerError, TrainerHooks

# Fields that change the model's parameter set: a checkpoint written under other values of
# these cannot be resumed with this config.
MODEL_FIELDS = ("reference", "lora_rank", "lora_alpha")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class TrainerState:
    """What a checkpoint holds of a trainer, as the trainer hands it out (`Trainer.state()`)."""

    step: int  # the next step to run
    counters: Counters  # a copy: the trainer's own are not changed through it
    cfg: GRPOConfig
    model: torch.nn.Module  # the trained model: peft-wrapped under LoRA, sharded under fsdp
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    beta_schedule: BetaSchedule
    # a module holding the whole weights: `model`, or under fsdp rank 0's host copy (None on
    # the other ranks), which `grpo_core.fsdp.gather_for_save` refreshes before a save
    whole: torch.nn.Module | None
    sharded: bool = False  # fsdp: `model` and `optimizer` hold this rank's shards

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def param_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(p.dtype for p in model.parameters() if p.is_floating_point())


def save_dtype(st: TrainerState) -> torch.dtype:
    """The dtype checkpoint weights are written in (`auto`: the parameters')."""
    name = st.cfg.save_dtype
    return param_dtype(st.model) if name == "auto" else DTYPES[name]


def lossy(st: TrainerState) -> bool:
    """Whether weights saved at `save_dtype` lose precision against the trainable parameters."""
    saved, own = save_dtype(st), param_dtype(st.model)
    return saved != own and torch.finfo(saved).bits <= torch.finfo(own).bits


def whole_model(st: TrainerState) -> torch.nn.Module:
    """The model with whole weights (`TrainerState.whole`); refused where there is none."""
    if st.whole is None:
        raise TrainerError("only rank 0 holds the whole weights under fsdp")
    return st.whole


def save(
    st: TrainerState,
    root: Path | None,
    tokenizer: Any,
    hooks: TrainerHooks,
    crash_point: Callable[[str], None] = lambda name: None,
    optimizer: dict[str, Any] | None = None,
) -> Path:
    """Checkpoint `st` at its step under `root`; returns the folder. `optimizer`: the whole
    optimiser state when `st.optimizer` holds shards (fsdp)."""
    if root is None:
        raise TrainerError("no checkpoint_dir was given to the trainer")
    for name, p in whole_model(st).named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise TrainerError(f"refusing to checkpoint non-finite weights ({name})")
    return ckpt.save(
        root,
        st.step,
        lambda folder: write_model(st, folder, tokenizer, hooks),
        trainer_state(st),
        st.cfg.keep_checkpoints,
        crash_point,
        write_resume=lambda folder: write_resume(st, folder, optimizer),
    )


def resume(
    st: TrainerState, root: Path | None, path: Path | None, warn: Callable[[str], None]
) -> TrainerState:
    """Load the newest valid checkpoint under `root` (or `path`) into `st`'s objects; `st` with
    the checkpoint's step and counters."""
    if path is None:
        if root is None:
            raise TrainerError("resume needs a checkpoint_dir")
        found = ckpt.latest_valid(root, warn)
        if found is None:
            raise TrainerError(f"no usable checkpoint under {root}")
        path, state = found
    else:
        state = ckpt.load_state(path)
    return restore(st, path, state, warn)


def carry(st: TrainerState, path: Path) -> bool:
    """Load checkpoint `path`'s AdamW moments, lr schedule and β schedule state into `st`'s
    objects (`Trainer.carry`: a new run continuing that one); False, changing nothing, when
    `path` kept no optimiser state (only a run's newest checkpoint does). Refused under fsdp."""
    state = ckpt.load_state(path)
    if "optimizer" not in state:
        return False
    if st.sharded:
        raise TrainerError("carry is not supported under fsdp")
    st.optimizer.load_state_dict(state["optimizer"])
    st.scheduler.load_state_dict(state["scheduler"])
    vars(st.beta_schedule).update(state["beta_schedule"])
    return True


def write_model(st: TrainerState, folder: Path, tokenizer: Any, hooks: TrainerHooks) -> None:
    """The plain model folder (merged under LoRA) at the save dtype, tokenizer, extras.

    A folder saved below the parameters' precision is a model of that dtype throughout (its
    config says so, `write_extra` sees the rounded copy), so its identity
    (`pipeline.policy.model.folder_revision`) is that of the model loaded from it.
    """
    own = model = whole_model(st)
    dtype = save_dtype(st)
    if st.cfg.reference == "lora_base":
        model.save_pretrained(folder / ckpt.ADAPTER)  # type: ignore[operator]
        model = merged(st.model)
    if dtype != param_dtype(model):
        model = (copy.deepcopy(model) if model is own else model).to(dtype)
    model.save_pretrained(folder, safe_serialization=True)  # type: ignore[operator]
    if hasattr(tokenizer, "save_pretrained"):
        tokenizer.save_pretrained(folder)
    hooks.write_extra(folder, model)


def write_resume(st: TrainerState, folder: Path, optimizer: dict[str, Any] | None = None) -> None:
    """Optimiser state and, when the saved weights are rounded, fp32 master weights."""
    torch.save(optimizer or st.optimizer.state_dict(), folder / ckpt.OPTIMIZER)
    if lossy(st) and st.cfg.reference != "lora_base":  # LoRA: adapter/ is already full precision
        from safetensors.torch import save_file

        model = whole_model(st)
        params = {k: p.detach().cpu().contiguous() for k, p in model.named_parameters()}
        save_file(params, folder / ckpt.MASTER)


def trainer_state(st: TrainerState) -> dict[str, Any]:
    state: dict[str, Any] = {
        "step": st.step,
        "scheduler": st.scheduler.state_dict(),
        "beta_schedule": dict(vars(st.beta_schedule)),
        "counters": dataclasses.asdict(st.counters),
        "torch_rng": torch.get_rng_state(),
        "config": dataclasses.asdict(st.cfg),
    }
    if st.device.type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state(st.device)
    return state


def restore(
    st: TrainerState, path: Path, state: dict[str, Any], warn: Callable[[str], None]
) -> TrainerState:
    """Load `state` (read from checkpoint `path`) into `st`'s objects; `st` with its step and
    counters."""
    saved = state.get("config", {})
    for name in MODEL_FIELDS:
        if name in saved and saved[name] != getattr(st.cfg, name):
            raise ckpt.CheckpointError(
                f"checkpoint {path} was trained with {name}={saved[name]!r}, "
                f"this run has {name}={getattr(st.cfg, name)!r}; use the same value"
            )
    _load_weights(st, path, state)
    if "optimizer" in state:  # under fsdp each rank keeps its shards of the whole moments
        sd = state["optimizer"]
        sd = fsdp.shard_optimizer_state(st.optimizer, sd) if st.sharded else sd
        st.optimizer.load_state_dict(sd)
    else:
        warn(
            f"checkpoint {path} has no optimiser state (only the newest checkpoint keeps it); "
            "resuming its weights with fresh optimiser moments: not an exact continuation"
        )
    st.scheduler.load_state_dict(state["scheduler"])
    vars(st.beta_schedule).update(state["beta_schedule"])
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and st.device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"], st.device)
    return dataclasses.replace(st, step=int(state["step"]), counters=Counters(**state["counters"]))


def _load_weights(st: TrainerState, path: Path, state: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    if st.cfg.reference == "lora_base":
        from peft import set_peft_model_state_dict

        adapter = path / ckpt.ADAPTER / "adapter_model.safetensors"
        weights = load_file(adapter) if adapter.is_file() else state["adapter"]  # older layout
        set_peft_model_state_dict(st.model, weights)
        return
    if "master" in state:  # full precision: exact
        _copy_into(path, load_file(state["master"]), dict(st.model.named_parameters()))
        return
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ckpt.CheckpointError(f"checkpoint {path}: no *.safetensors weights")
    loaded: dict[str, Tensor] = {}
    for f in files:
        loaded.update(load_file(f))
    _copy_into(path, loaded, st.model.state_dict())


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
