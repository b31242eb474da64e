"""Scaling curation out: which Prefect task runner runs the chunks, and the sharded chunk loop.

`ScaleConfig` (the curate flow's `scale` parameter) picks the runner:

- `local` (default): the chunks run one after another in the flow process, each committing its
  own rows (`pipeline.jobs.curate.curation.sample_chunk`); nothing here is used.
- `dask`: `prefect_dask.DaskTaskRunner` on the cluster at `runner_address`
  (`tcp://scheduler:8786`), or on a local `distributed.LocalCluster` of `workers` processes
  with one thread each.
- `ray`: `prefect_ray.RayTaskRunner` on the cluster at `runner_address` (`ray://head:10001`,
  or `auto`), or on a local Ray instance of `workers` CPUs (an instance this process already
  started is reused).

With dask or ray, `sharded_stage` submits one `sample_to_shard` task per pending chunk; each
worker builds its policy once (`pipeline.jobs.curate.shards.PolicySpec`), samples, scores and writes
a Parquet shard under `shard_root`; the flow process commits each shard as its task finishes
(`pipeline.jobs.curate.shards.commit_shard`, idempotent on the rollouts' natural key). Shards left
by an earlier, interrupted try are committed first when they belong to a chunk still missing. Once
the run is finished in the ledger its shard folder is deleted (`keep_shards` keeps it).
A worker process that dies mid-chunk is re-run by the cluster itself (Dask's
`distributed.scheduler.allowed-failures`, Ray's task `max_retries`, both 3 by default); the
task's Prefect `retries` covers exceptions such as a failed object-store write.

The flow opens the runner itself around its chunk fan-out (`open_runner`), rather than being
defined with it, so `sieve curate`, the nightly flow and deployments all honour the parameter.
Install the runners with `pip install '.[scale]'`.

Test: `make test-scale` (tests/flows/test_scale.py: real local Dask and Ray clusters).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import polars as pl
from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed
from pydantic import BaseModel, Field

from grpo_core.validate import STRICT, AtLeastOne
from pipeline.core.errors import SieveError
from pipeline.core.hooks import Progress, report
from pipeline.jobs.curate import curation, shards
from pipeline.jobs.curate.rollouts import RunInfo
from pipeline.selection import CurateConfig
from pipeline.store import Ledger

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

# A local Ray instance's shared-object store: chunks and shard refs are small, and Ray's own
# default (30 % of RAM) would claim memory the samplers need.
RAY_OBJECT_STORE_BYTES = 200_000_000


class ScaleConfig(BaseModel):
    """Where the chunks of a sampling run execute (unknown keys rejected)."""

    model_config = STRICT

    runner: Literal["local", "dask", "ray"] = Field(
        default="local",
        description="local: chunks in the flow process, each committing itself (no cluster); "
        "dask / ray: chunks as tasks on a cluster, written as shards, merged by the flow.",
    )
    runner_address: str | None = Field(
        default=None,
        description="An existing cluster (dask: tcp://host:8786; ray: ray://host:10001 or "
        "auto). None: start a local one of `workers` processes for the flow run.",
    )
    workers: AtLeastOne = Field(
        default=2, description="Worker processes of a local cluster (one chunk each)."
    )
    shard_root: str | None = Field(
        default=None,
        description="Folder or object-store URI (s3://bucket/prefix) every worker can write and "
        "the flow can read. None: <home>/shards, which only local workers share.",
    )
    keep_shards: bool = Field(
        default=False,
        description="Keep a run's shards after every chunk is committed (for inspection). "
        "False: the run's shard folder is deleted once the run is finished in the ledger.",
    )
    policy_factory: str | None = Field(
        default=None,
        description="module:function(PolicySpec) -> Policy that workers call instead of loading "
        "`model` with `backend` (custom samplers, tests). None: load the model folder.",
    )

    def task_runner(self) -> TaskRunner:
        """The Prefect task runner of `runner` (the dask/ray integrations imported here)."""
        if self.runner == "dask":
            from prefect_dask import DaskTaskRunner

            if self.runner_address:
                return DaskTaskRunner(address=self.runner_address)
            local = {"n_workers": self.workers, "threads_per_worker": 1, "processes": True}
            return DaskTaskRunner(cluster_kwargs={**local, "dashboard_address": None})
        if self.runner == "ray":
            from prefect_ray import RayTaskRunner

            if self.runner_address:
                return RayTaskRunner(address=self.runner_address)
            init = {"num_cpus": self.workers, "include_dashboard": False}
            return RayTaskRunner(
                init_kwargs={**init, "object_store_memory": RAY_OBJECT_STORE_BYTES}
            )
        raise SieveError("the local runner has no task runner to open: chunks run in the flow")


@dataclass(frozen=True)
class Fanout:
    """An open task runner, what workers build their policy from, and where shards go."""

    runner: TaskRunner
    spec: shards.PolicySpec
    shard_root: str
    keep_shards: bool = False


@contextmanager
def open_runner(
    scale: ScaleConfig, spec: shards.PolicySpec, shard_root: str
) -> Iterator[Fanout | None]:
    """The started task runner for `scale` (None for the local runner: nothing to start)."""
    if scale.runner == "local":
        yield None
        return
    with scale.task_runner() as runner:
        yield Fanout(runner, spec, shard_root, scale.keep_shards)


sample_shard = task(
    name="sample_to_shard",
    cache_policy=NO_CACHE,
    retries=1,
    task_run_name="{info.purpose}-shard-{index}",
)(shards.sample_spec_to_shard)


def sharded_stage(
    ledger: Ledger,
    problems: pl.DataFrame,
    info: RunInfo,
    cfg: CurateConfig,
    progress: Progress | None,
    fanout: Fanout,
) -> int:
    """`pipeline.jobs.curate.curation.sample_run` with the chunks as tasks on the runner, committed
    from their shards as they finish. Returns the number of rollouts the run holds."""
    parts = curation.chunks(problems, cfg)
    todo = curation.pending_chunks(ledger, info, parts)
    if not todo and curation.is_finished(ledger, info.run_id):
        done_with_shards(fanout, info)  # a run finished before its shards were removed
        return problems.height * info.group_size
    curation.start_run(ledger, info)
    prints = {i: shards.chunk_fingerprint(parts[i], info, cfg.seed, i) for i in todo}
    shards.commit_shards(ledger, info.run_id, fanout.shard_root, expect=prints)  # an earlier try
    todo = curation.pending_chunks(ledger, info, parts)
    futures: list[PrefectFuture[shards.ShardRef]] = [
        fanout.runner.submit(
            sample_shard,
            parameters={
                "spec": fanout.spec,
                "chunk": parts[i],
                "info": info,
                "seed": cfg.seed,
                "index": i,
                "shard_root": fanout.shard_root,
                "audit_share": cfg.audit_share,
            },
        )
        for i in todo
    ]
    for done, future in enumerate(as_completed(futures), start=1):
        ref = future.result()
        commit_chunk(ledger, info, parts[ref.index], ref, prints[ref.index])
        report(progress, "curate", info.purpose, done, len(todo))
    curation.set_status(ledger, info, "finished")
    done_with_shards(fanout, info)
    return problems.height * info.group_size


def done_with_shards(fanout: Fanout, info: RunInfo) -> None:
    """Remove a finished run's shard folder (its rows are in the ledger) unless kept."""
    if not fanout.keep_shards:
        shards.remove_run(fanout.shard_root, info.run_id)


def commit_chunk(
    ledger: Ledger, info: RunInfo, chunk: pl.DataFrame, ref: shards.ShardRef, fingerprint: str
) -> None:
    """Commit a worker's shard and check that the chunk is now stored (never on trust)."""
    if ref.fingerprint != fingerprint:
        raise SieveError(f"shard {ref.uri} holds another chunk than chunk {ref.index}")
    shards.commit_shard(ledger, ref)
    if not curation.chunk_stored(ledger, info, chunk):
        raise SieveError(
            f"chunk {ref.index} of run {info.run_id} was committed from {ref.uri}, but its "
            f"rollouts are not in the ledger {ledger.path or '(in memory)'}"
        )


__all__ = ["Fanout", "ScaleConfig", "open_runner", "sample_shard", "sharded_stage"]
