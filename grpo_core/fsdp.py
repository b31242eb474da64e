"""Fully sharded training under `torchrun` (`SIEVE_PARALLEL=fsdp`): FSDP2's `fully_shard`.

For a model whose weights, gradients and Adam moments do not fit one device next to its
activations. Each rank holds 1/N of every parameter, gradient and optimiser moment; a layer's
full weights exist only while its forward or backward runs. Everything else is
`grpo_core.distributed`'s data-parallel step (global denominators, rank 0 reports and saves).

What changes against ddp:
- Units: each decoder layer (the classes in the model's `_no_split_modules`, Hugging Face's
  list of blocks that must stay whole; else each item of its `ModuleList`s) is one FSDP unit,
  the rest (embeddings, tied head, final norm) the root's. A frozen reference model is sharded
  the same way.
- Gradients are reduce-scattered in every backward as plain sums (divide factor 1, sum
  reduction): the global loss denominators already carry the 1/N, as under ddp.
- Every forward is a collective, so every rank must run the same forwards in the same order:
  - rollouts: with a sampler that samples from the trained model (the hf sampler), every rank
    runs the step's collection together, on the same prompts with the same seed
    ("lockstep"); the samples and the scores are rank 0's (the reward function runs on rank 0
    only and its scores are broadcast), so what a collector decides from them (more rounds,
    dropped groups) is the same on every rank. A sampler with its own weights (`WeightSync`,
    an in-process vLLM engine) samples on rank 0 alone, as under ddp. `SIEVE_ROLLOUTS=shard` is
    refused (ranks would generate different lengths);
  - micro-batches: every rank runs as many as the rank with the most; a missing one is the
    step's first row with weight 0 (no gradient, no metrics);
  - the loss uses the full-row forward: prefix sharing makes one or two model calls depending
    on the micro-batch's completion width, which differs between ranks;
  - a non-finite loss on one rank does not stop its micro-batch loop (the step is refused on
    every rank after the loop, as before).
- Rank 0 keeps a full copy of the weights on the host (`FsdpState.host`, CPU), refreshed one
  tensor at a time (`gather_host`, a collective) before each checkpoint and before each weight
  push to a `WeightSync` sampler. Checkpoints are the same plain model folder and optimiser
  state (in `torch.optim` layout) that one process writes, so a run saved under fsdp resumes on
  one process, under ddp or under fsdp; resume reads the full tensors on every rank and keeps
  each rank's shard (`load_full`).

Refused: LoRA (`reference = "lora_base"`), not tested under FSDP here.
Nothing here takes the trainer: `wrap` shards the models it is given and returns the config to
train with; the rest take the `FsdpState`, the model, the optimiser.
Memory on rank 0's host: one full copy of the weights (what a checkpoint needs anyway).

Test: `.venv/bin/pytest tests/grpo_core/test_fsdp.py -q` (torchrun, 2 gloo ranks, toy model).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_core.batch import Batch, rows
from grpo_core.ranks import Dist
from grpo_core.types import GroupSampler, TrainerError, WeightSync

if TYPE_CHECKING:
    from grpo_core.config import GRPOConfig


@dataclass
class FsdpState:
    """What the trainer keeps under fsdp besides its sharded model."""

    lockstep: bool  # every rank runs the collection (the sampler uses the sharded model)
    host: torch.nn.Module | None  # rank 0: a full CPU copy of the weights; None elsewhere


def enabled(d: Dist) -> bool:
    return d.active and d.cfg.parallel == "fsdp"


def check(d: Dist, reference: str) -> None:
    """The fsdp combinations that are refused, each with one line saying what to use."""
    if d.cfg.rollouts == "shard":
        raise TrainerError(
            "SIEVE_ROLLOUTS=shard with SIEVE_PARALLEL=fsdp: every rank must run the same "
            "forwards under fsdp; use SIEVE_ROLLOUTS=broadcast"
        )
    if reference == "lora_base":
        raise TrainerError(
            "reference='lora_base' (LoRA) with SIEVE_PARALLEL=fsdp is not supported; LoRA "
            "trains few parameters, so use SIEVE_PARALLEL=ddp"
        )


def units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks that become FSDP units (each decoder layer), outermost first."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    found = [m for m in model.modules() if type(m).__name__ in names]
    if not found:
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
        found = [child for lst in lists for child in lst]
    return found


def shard_module(model: torch.nn.Module) -> None:
    """`fully_shard` each unit then the root, in place; gradients reduced as sums."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    for unit in units(model):
        fully_shard(unit)
    fully_shard(model)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum


def wrap(
    d: Dist,
    cfg: GRPOConfig,
    model: torch.nn.Module,
    ref_model: torch.nn.Module | None,
    sampler: GroupSampler,
    warn: Callable[[str], None],
) -> tuple[FsdpState, GRPOConfig]:
    """Shard `model` (and the frozen reference) in place; rank 0 keeps a host copy. Returns the
    state to keep and the config to train with (prefix sharing off)."""
    check(d, cfg.reference)
    host = copy.deepcopy(model).to("cpu").eval() if d.is_main else None
    shard_module(model)
    if ref_model is not None:
        shard_module(ref_model)
    if cfg.share_prefix:
        warn(
            "SIEVE_PARALLEL=fsdp: share_prefix is off (every rank must make the same model "
            "calls); the loss uses the full-row forward"
        )
        cfg = dataclasses.replace(cfg, share_prefix=False)
    return FsdpState(lockstep=not isinstance(sampler, WeightSync), host=host), cfg


# ---------------------------------------------------------------- full tensors


def is_sharded(x: object) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(x, DTensor)


def full(x: Tensor) -> Tensor:
    """The whole tensor of a sharded one (a collective: every rank calls it); `x` otherwise."""
    return x.full_tensor() if is_sharded(x) else x  # type: ignore[attr-defined]


def local(x: Tensor) -> Tensor:
    """This rank's shard of a sharded tensor; `x` otherwise."""
    return x.to_local() if is_sharded(x) else x  # type: ignore[attr-defined]


def local_float(x: Tensor) -> float:
    """A replicated scalar (a sharded clip's norm) as a float."""
    return float(local(x))


def gather_host(state: FsdpState, model: torch.nn.Module) -> None:
    """Copy the sharded weights into rank 0's host model, one tensor at a time (collective)."""
    host = state.host.state_dict() if state.host is not None else {}
    with torch.no_grad():
        for key, value in model.state_dict().items():
            whole = full(value.detach())
            if key in host:
                host[key].copy_(whole)


def push_weights(state: FsdpState, model: torch.nn.Module, sampler: GroupSampler) -> None:
    """A `WeightSync` sampler (rank 0's) gets the whole weights; nothing for a lockstep one."""
    if isinstance(sampler, WeightSync):
        gather_host(state, model)  # every rank
        if state.host is not None:
            sampler.sync_weights(state.host)


def full_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimiser's state dict with every sharded moment gathered (collective): the layout
    `torch.optim` gives one process. Rank 0's is complete; the others' are the same."""
    sd = optimizer.state_dict()
    sd["state"] = {
        pid: {k: full(v).cpu() if isinstance(v, Tensor) else v for k, v in st.items()}
        for pid, st in sorted(sd["state"].items())
    }
    return sd


def gather_for_save(
    state: FsdpState, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Before a checkpoint (every rank): the host copy refreshed, and the whole optimiser
    state, which rank 0 then writes as one process would."""
    gather_host(state, model)
    return full_optimizer_state(optimizer)


def distribute_like(value: Tensor, like: Tensor) -> Tensor:
    """`value` (a whole tensor, the same on every rank) as `like`'s shard; `value` if `like`
    is not sharded."""
    if not is_sharded(like):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(
        value.to(like.dtype),
        like.device_mesh,  # type: ignore[attr-defined]
        like.placements,  # type: ignore[attr-defined]
    )


def load_full(own: dict[str, Tensor], loaded: dict[str, Tensor]) -> None:
    """Copy whole tensors into a (possibly sharded) state dict; every rank passes the same."""
    with torch.no_grad():
        for key in sorted(loaded):
            own[key].copy_(distribute_like(loaded[key].to(own[key].device), own[key]))


def shard_optimizer_state(optimizer: torch.optim.Optimizer, sd: dict[str, Any]) -> dict[str, Any]:
    """A one-process optimiser state (whole moments) as this rank's shards of them; parameter
    i of `sd` is the optimiser's i-th (its groups in order, as `state_dict` numbers them)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    out = dict(sd)
    out["state"] = {
        pid: {
            k: distribute_like(v, params[int(pid)]) if _moment(v, params[int(pid)]) else v
            for k, v in st.items()
        }
        for pid, st in sd["state"].items()
    }
    return out


def _moment(v: object, p: Tensor) -> bool:
    return isinstance(v, Tensor) and tuple(v.shape) == tuple(p.shape) and v.dim() > 0


# ---------------------------------------------------------------- lockstep micro-batches


def pad_parts(d: Dist, parts: list[Batch], first: Batch) -> tuple[list[Batch], int]:
    """`parts` padded with zero-weight copies of the step's first row until every rank has
    as many micro-batches as the rank with the most; (parts, how many are real)."""
    import torch.distributed as dist

    count = torch.tensor([len(parts)])
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    # no IS metrics (nor a replay refusal) from it: it weighs nothing
    pad = dataclasses.replace(first, engine_lp=None, has_engine=None, replayed=None)
    return parts + [pad] * (int(count) - len(parts)), len(parts)


def first_row(b: Batch) -> Batch:
    return rows(b, torch.arange(1, device=b.ids.device))
