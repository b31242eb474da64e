"""Data-parallel GRPO under `torchrun`: one process per device, the same step on every rank.

Run: `torchrun --nproc_per_node=N your_train.py` (a script that builds the `Trainer` as usual;
the trainer sees `RANK` / `WORLD_SIZE` / `LOCAL_RANK` and calls `setup()` itself, gloo on CPU,
nccl on CUDA). Without torchrun every function here is a no-op and the trainer is unchanged.

One step, on N ranks:
1. Rollouts (`DistributedConfig.rollouts`):
   - `broadcast` (default): rank 0 collects the step exactly as one process would (its batch
     source, collector, sampler and reward function) and sends the result to every rank. The
     rollouts are not parallel, but the step is the single-process step *by construction*;
   - `shard`: rank r samples and scores items [r·n/N, (r+1)·n/N) of the step (whole groups,
     seed `derive_seed(step_seed, "shard", r, N)`), then all ranks exchange their groups and
     scores. Equal to one process running `shard_collect(t, step, range(N))`, not to the plain
     collector (the sampler sees other seeds); only the plain collector can be sharded.
   Either way every rank then holds the whole step, so rewards, group advantages, the dropped
   uninformative groups and the score metrics are computed on the whole step, before sharding.
2. The step's informative rows are built into one batch on every rank; rank r trains on rows
   [r·B/N, (r+1)·B/N) (`local_rows`, contiguous, so a prompt's rows stay together for prefix
   sharing). The loss denominators (`grpo_core.update.denominators`; `dr_grpo`'s `max_tokens` is the
   config constant `dr_grpo_tokens`) come from the *whole* batch, so each micro-batch's
   share-weighted loss is its exact term of the single-process loss and Σ over ranks of the per-rank
   gradients is the single-process gradient.
3. `reduce_iteration` sums the gradients over ranks (all-reduce SUM, in buckets; DDP's
   all-reduce without DDP's 1/N, which the global denominators already carry) and the
   share-weighted loss metrics; a refusal (non-finite loss) on any rank is every rank's. The
   clip then sees the global gradient norm and every rank takes the same optimiser step, so
   the weights stay identical on all ranks (broadcast from rank 0 once at the start).

Why the model is not wrapped in `DistributedDataParallel`: the trainer calls it twice per
backward under prefix sharing, the sampler calls `generate` on it, and ranks run different
numbers of micro-batches (or none); DDP's hooks assume one forward per backward in lockstep.
The explicit all-reduce is DDP's arithmetic without those assumptions.

`SIEVE_PARALLEL=fsdp` shards parameters, gradients and optimiser state instead of copying
them (`grpo_core.fsdp`: what changes, what is refused).

Equality with one process holds to float summation order (the per-rank sums are added in
another order), measured ≤ 1e-5 on the toy model (tests/grpo_core/test_ddp.py).
Metrics hooks and checkpoints run on rank 0 only (`rank_hooks`; the other ranks wait at a
barrier while it writes); every rank resumes from the same checkpoint. Under `broadcast` only
rank 0 draws random numbers, and its RNG state is the checkpoint's; under `shard` torch's
global RNG is re-seeded per (seed, rank, step) each step, so a resumed run continues exactly.

Nothing here takes the trainer: the collection gets its `grpo_core.types.Rollouts`, the update
its parameters and micro-batches. `Dist` and `DistributedConfig` live in `grpo_core.ranks`.

Test: `.venv/bin/pytest tests/grpo_core/test_ddp.py -q` (runs torchrun with 2 gloo ranks).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from grpo_core import fsdp
from grpo_core.batch import Batch, micro_batches, rows
from grpo_core.collect import plain
from grpo_core.config import GRPOConfig
from grpo_core.ranks import Dist, DistributedConfig
from grpo_core.seeds import derive_seed
from grpo_core.types import (
    Collected,
    Collector,
    Hooks,
    Rollouts,
    Scores,
    TrainerError,
    TrainerHooks,
)
from grpo_core.update import StepInputs

T = TypeVar("T")


# ---------------------------------------------------------------- process group


def launched() -> bool:
    """Whether torchrun started this process (it sets RANK, WORLD_SIZE, LOCAL_RANK)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


def setup(cfg: DistributedConfig | None = None) -> Dist:
    """Join the torchrun job (gloo on CPU, nccl on CUDA) once; `Dist()` outside torchrun."""
    cfg = cfg or DistributedConfig.from_env()
    if not dist.is_initialized():
        if not launched() or int(os.environ["WORLD_SIZE"]) == 1:
            return Dist(cfg=cfg)
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl" if cuda else "gloo")
    return Dist(dist.get_rank(), dist.get_world_size(), cfg)


def teardown() -> None:
    """Leave the process group (end of a torchrun script); nothing outside torchrun."""
    if dist.is_initialized():
        dist.destroy_process_group()


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def is_main() -> bool:
    return rank() == 0


def barrier(d: Dist) -> None:
    if d.active:
        dist.barrier()


def on_main(d: Dist, write: Callable[[], T], elsewhere: T) -> T:
    """`write()` on rank 0 while the other ranks wait at a barrier; theirs is `elsewhere`."""
    if not d.is_main:
        barrier(d)
        return elsewhere
    try:
        return write()
    finally:
        barrier(d)  # also when rank 0 fails, so the others are not left waiting here


# ---------------------------------------------------------------- sharding


def bounds(n: int, r: int, world: int) -> tuple[int, int]:
    """Rank r's contiguous slice [lo, hi) of n rows; sizes differ by at most one."""
    return r * n // world, (r + 1) * n // world


def shard_contiguous(items: Sequence[T], r: int, world: int) -> list[T]:
    lo, hi = bounds(len(items), r, world)
    return list(items[lo:hi])


def shard_round_robin(items: Sequence[T], r: int, world: int) -> list[T]:
    return list(items[r::world])


def local_parts(d: Dist, b: Batch, cfg: GRPOConfig) -> tuple[list[Batch], int]:
    """The micro-batches of this rank's rows (of every row on one process), and how many of
    them are real: under fsdp every rank runs as many (`grpo_core.fsdp.pad_parts`)."""
    local = local_rows(d, b)
    parts = (
        []
        if local is None
        else micro_batches(local, cfg.micro_batch_size, cfg.micro_batch_tokens, cfg.share_prefix)
    )
    if fsdp.enabled(d):
        return fsdp.pad_parts(d, parts, fsdp.first_row(b))
    return parts, len(parts)


def local_rows(d: Dist, b: Batch) -> Batch | None:
    """This rank's rows of the step's batch (the batch itself on one process; None if none)."""
    if not d.active:
        return b
    lo, hi = bounds(int(b.ids.shape[0]), d.rank, d.world)
    if lo == hi:
        return None
    return rows(b, torch.arange(lo, hi, device=b.ids.device))


# ---------------------------------------------------------------- collectives


def gather(d: Dist, obj: T) -> list[T]:
    """Every rank's `obj`, in rank order (pickled; for small things such as samples)."""
    if not d.active:
        return [obj]
    out: list[Any] = [None] * d.world
    dist.all_gather_object(out, obj)
    return out


def broadcast(d: Dist, obj: T) -> T:
    """Rank 0's `obj` on every rank."""
    if not d.active:
        return obj
    box = [obj if d.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[return-value]


def all_reduce_scalars(d: Dist, values: dict[str, float], op: str = "sum") -> dict[str, float]:
    """Per-key sum (or mean) over ranks; every rank must pass the same keys."""
    if not d.active:
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    if op == "mean":
        t /= d.world
    return dict(zip(keys, t.tolist(), strict=True))


def broadcast_params(d: Dist, model: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers on every rank (DDP does this when it wraps a model)."""
    if not d.active:
        return
    with torch.no_grad():
        for t in model.state_dict().values():
            dist.broadcast(t, src=0)


def all_reduce_grads(d: Dist, params: Sequence[Tensor]) -> None:
    """Σ over ranks of every gradient, in flat buckets; a missing gradient counts as zero.
    Nothing under fsdp: its backward already reduce-scattered the sums."""
    if not d.active or fsdp.enabled(d):
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    limit = int(d.cfg.bucket_mb * 2**20)
    bucket: list[Tensor] = []
    size = 0
    for p in params:
        bucket.append(p.grad)  # type: ignore[arg-type]
        size += p.numel() * p.element_size()
        if size >= limit:
            _reduce_bucket(bucket)
            bucket, size = [], 0
    if bucket:
        _reduce_bucket(bucket)


def _reduce_bucket(grads: list[Tensor]) -> None:
    by_dtype: dict[torch.dtype, list[Tensor]] = {}
    for g in grads:
        by_dtype.setdefault(g.dtype, []).append(g)
    for same in by_dtype.values():
        flat = torch.cat([g.reshape(-1) for g in same])  # (Σ numel,)
        dist.all_reduce(flat)
        offset = 0
        for g in same:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


# ---------------------------------------------------------------- the trainer's seams


def rank_hooks(d: Dist, hooks: TrainerHooks) -> TrainerHooks:
    """The owner's hooks on rank 0; on other ranks hooks that do nothing (warnings too: rank 0
    warns about the same steps, which every rank skips together)."""
    return hooks if d.is_main else Hooks(warning=lambda message: None)


def collect(
    d: Dist, src: Rollouts, step: int, collector: Collector | None, lockstep: bool
) -> Collected:
    """The step's rollouts on every rank (module docstring, point 1): `collector`'s, or the
    plain ones (`grpo_core.collect.plain`) when it is None. `lockstep`: under fsdp, a sampler
    that samples from the sharded model, so every rank runs the collection."""
    run = collector or plain
    if not d.active:
        return run(src, step)
    if lockstep:  # every rank runs the same forwards
        return broadcast(d, run(src, step))
    if d.cfg.rollouts == "broadcast":  # rank 0 is the single process, its RNG included
        got = broadcast(d, run(src, step) if d.is_main else None)
        assert got is not None
        return got
    torch.manual_seed(derive_seed(src.cfg.seed, "rank", d.rank, "step", step))
    if collector is not None:
        raise TrainerError("rollouts='shard' shards the plain collector only; use broadcast")
    return join(gather(d, shard_collect(src, step, [d.rank], d.world)))


def lockstep_scores(
    d: Dist, lockstep: bool, groups: list[list[Any]], score: Callable[[], Scores]
) -> tuple[list[list[Any]], Scores]:
    """Under fsdp lockstep, rank 0's groups and its scores (the reward function runs there
    alone) on every rank, so decisions taken on them agree; otherwise `groups` and `score()`."""
    if not lockstep:
        return groups, score()
    scores = broadcast(d, score() if d.is_main else None)
    assert scores is not None
    return broadcast(d, groups), scores


def shard_collect(src: Rollouts, step: int, ranks: Sequence[int], world: int) -> Collected:
    """The step's items `ranks` of `world` shards, each sampled with its shard's seed.

    On one process, `ranks=range(world)` is exactly what `world` sharded ranks collect together.
    """
    items = list(src.batches(step))
    if not items:
        raise TrainerError(f"the batch source returned no items for step {step}")
    parts = []
    for r in ranks:
        mine = shard_contiguous(items, r, world)
        if not mine:
            parts.append(Collected([], [], Scores([], []), 0))
            continue
        seed = derive_seed(src.step_seed(step), "shard", r, world)
        groups, scores, ts, tr = src.sample_and_score(mine, seed)
        parts.append(Collected(mine, groups, scores, sum(len(g) for g in groups), ts, tr))
    return join(parts)


def join(parts: Sequence[Collected]) -> Collected:
    """Collected parts in order as one; times are the slowest part's (they ran in parallel)."""
    scores = [p.scores for p in parts]
    merged: dict[str, Any] = {}
    for f in dataclasses.fields(Scores):
        values = [getattr(s, f.name) for s in scores]
        merged[f.name] = None if any(v is None for v in values) else [x for v in values for x in v]
    return Collected(
        [it for p in parts for it in p.items],
        [g for p in parts for g in p.groups],
        Scores(**merged),
        sum(p.rollouts for p in parts),
        max(p.time_sample for p in parts),
        max(p.time_score for p in parts),
    )


def reduce_iteration(
    d: Dist, params: Sequence[Tensor], it_metrics: dict[str, float] | str
) -> dict[str, float] | str:
    """One iteration's gradients and loss metrics summed over ranks, or any rank's refusal."""
    if not d.active:
        return it_metrics
    every = gather(d, it_metrics)
    refused = [m for m in every if isinstance(m, str)]
    if refused:
        return refused[0]
    total: dict[str, float] = {}
    for m in every:
        for k, v in m.items():  # type: ignore[union-attr]
            total[k] = total.get(k, 0.0) + v
    all_reduce_grads(d, params)
    return total


def tis_metrics(d: Dist, ctx: StepInputs) -> dict[str, float]:
    """The engine-mismatch metrics over every rank's micro-batches."""
    if d.active:
        ctx.tis = [x for part in gather(d, ctx.tis) for x in part]
    return ctx.tis_metrics()
