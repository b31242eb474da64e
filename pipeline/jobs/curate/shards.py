"""Distributed curation: workers sample chunks into Parquet shards, one committer merges them.

Worker side: `sample_to_shard(policy, chunk, info, seed, index, shard_root, audit_share)` samples
and scores one chunk exactly as `pipeline.jobs.curate.curation.sample_chunk` does (the same chunk
seed, so the same rows; the same seeded verifier audit) but writes the rows to
`<shard_root>/<run_id>/chunk-<index>.parquet` (rollouts) and one sibling
`chunk-<index>.<table>.parquet` per other table it writes (`rollout_steps`, `verifier_audit`)
instead of the ledger; the shard's metadata lists those tables, so the committer reads whatever
tables a shard holds.
Each file is written atomically: a temporary name in the same folder, then a rename; the
rollouts file goes last and is what marks the shard done. The name is the
(run, chunk) key, so a retried or re-run chunk overwrites its own shard and never adds a second
one. `shard_root` is a local folder or any URI `pyarrow.fs.FileSystem.from_uri` opens
(`s3://bucket/prefix`, `gs://...`, `abfs://...`; only local folders are tested here). An object
store has no rename: there `move` is copy + delete, and the final object still appears whole,
because an object PUT/copy is atomic; temporaries of a killed worker stay behind, unread.

Committer side (the flow process, the only ledger writer): `commit_shard` inserts a shard's
tables in one transaction with the ledger's idempotent write, which skips rows whose natural key
((run_id, problem_id, sample_idx), plus step_index for steps and verifier_version for the audit)
is already stored. So a shard
counts once however often it was written (retries, a killed worker re-run elsewhere) or
committed (a committer re-run). Each shard carries its
chunk's fingerprint (run, chunk index, seed, group size, problem ids) in its Parquet metadata:
`commit_shards(..., expect=...)` commits a leftover shard only for the chunk it was sampled for.

Workers build their policy once per process from a `PolicySpec` (model folder, backend, servers,
engine options, or a `module:function` factory): no loaded model travels with a chunk.

Test: `pytest -m scale tests/flows/test_scale.py` (real local Dask and Ray clusters).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.core.crash import crash_point
from pipeline.core.errors import SieveError
from pipeline.core.timing import timed
from pipeline.jobs.curate.curation import Policy, policy_for, sample_rows
from pipeline.jobs.curate.rollouts import RunInfo
from pipeline.sampling import EngineOptions
from pipeline.store import Ledger

PREFIX, SUFFIX = "chunk-", ".parquet"
_META_RUN, _META_CHUNK, _META_PRINT = b"sieve.run_id", b"sieve.chunk", b"sieve.fingerprint"
_META_TABLES = b"sieve.tables"  # the shard's other tables (sibling files), JSON list


@dataclass(frozen=True)
class ShardRef:
    """Where one chunk's rows are, and which chunk they belong to (small: sent back by workers)."""

    run_id: str
    index: int
    uri: str  # the shard's path inside its filesystem (see `filesystem`)
    shard_root: str
    rows: int  # rollouts
    fingerprint: str
    tables: tuple[str, ...] = ()  # other tables, in sibling files


@dataclass(frozen=True)
class PolicySpec:
    """How a worker builds the policy it samples with (what travels instead of a model).

    `factory`: "module:function" called with the spec, for policies that are not a model folder
    (tests, custom samplers); None loads `model` with `backend`
    (`pipeline.jobs.curate.curation.policy_for`).
    `revision`: the model revision the flow curates; a worker whose policy differs refuses.
    """

    model: str
    backend: str = "hf"
    base_urls: tuple[str, ...] = ()
    engine: EngineOptions | None = None
    factory: str | None = None
    revision: str = ""


_WORKER_POLICIES: dict[PolicySpec, Policy] = {}


def worker_policy(spec: PolicySpec) -> Policy:
    """The policy of `spec`, loaded once per worker process (later chunks reuse it)."""
    if spec not in _WORKER_POLICIES:
        if spec.factory:
            module, _, name = spec.factory.partition(":")
            build: Callable[[PolicySpec], Policy] = getattr(importlib.import_module(module), name)
            pol = build(spec)
        else:
            pol = policy_for(spec.model, spec.backend, spec.base_urls, spec.engine)
        if spec.revision and pol.model_revision != spec.revision:
            raise SieveError(
                f"worker {os.getpid()} loaded {spec.model} at revision {pol.model_revision}, but "
                f"the flow curates revision {spec.revision}: give every worker the same model"
            )
        _WORKER_POLICIES[spec] = pol
    return _WORKER_POLICIES[spec]


# ---------------------------------------------------------------------- worker


def chunk_fingerprint(chunk: pl.DataFrame, info: RunInfo, seed: int, index: int) -> str:
    """What decides a chunk's rows besides the policy: run, chunk index, seed, G, problem ids."""
    payload = json.dumps(
        [info.run_id, index, seed, info.group_size, sorted(chunk["problem_id"].to_list())]
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def sample_to_shard(
    policy: Policy,
    chunk: pl.DataFrame,
    info: RunInfo,
    seed: int,
    index: int,
    shard_root: str,
    audit_share: float | None = None,
) -> ShardRef:
    """Sample and score one chunk and write its rows as the chunk's shard (atomically)."""
    rows = sample_rows(policy, chunk, info, seed, index, audit_share)
    crash_point(f"shards.{info.purpose}.before_shard_write")
    return write_shard(
        rows, shard_root, info.run_id, index, chunk_fingerprint(chunk, info, seed, index)
    )


def sample_spec_to_shard(
    spec: PolicySpec,
    chunk: pl.DataFrame,
    info: RunInfo,
    seed: int,
    index: int,
    shard_root: str,
    audit_share: float | None = None,
) -> ShardRef:
    """`sample_to_shard` with the worker's own policy (what a distributed chunk task runs)."""
    pol = worker_policy(spec)
    return sample_to_shard(pol, chunk, info, seed, index, shard_root, audit_share)


def filesystem(shard_root: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, base path) of a local folder or an object-store URI."""
    if "://" in shard_root:
        return pafs.FileSystem.from_uri(shard_root)
    return pafs.LocalFileSystem(), os.path.abspath(shard_root)


def shard_name(index: int) -> str:
    return f"{PREFIX}{index:06d}{SUFFIX}"


def write_shard(
    tables: Mapping[str, pl.DataFrame], shard_root: str, run_id: str, index: int, fingerprint: str
) -> ShardRef:
    """Write the chunk's tables to the (run, chunk) shard, each file under a temporary name then
    renamed over the final one; the rollouts file last (it marks the shard complete)."""
    fs, base = filesystem(shard_root)
    folder = f"{base}/{run_id}"
    fs.create_dir(folder, recursive=True)
    others = tuple(t for t in tables if t != "rollouts")
    meta = {
        _META_RUN: run_id.encode(),
        _META_CHUNK: str(index).encode(),
        _META_PRINT: fingerprint.encode(),
        _META_TABLES: json.dumps(others).encode(),
    }
    final = f"{folder}/{shard_name(index)}"
    with timed("shard_writes"):
        for table in (*others, "rollouts"):
            path = final if table == "rollouts" else sibling(final, table)
            temp = f"{folder}/.tmp-{uuid.uuid4().hex}-{Path(path).name}"
            pq.write_table(
                tables[table].to_arrow().replace_schema_metadata(meta), temp, filesystem=fs
            )
            fs.move(temp, path)
    return ShardRef(
        run_id, index, final, shard_root, tables["rollouts"].height, fingerprint, others
    )


def sibling(rollouts_path: str, table: str) -> str:
    """The file of another table of the shard whose rollouts are at `rollouts_path`."""
    return rollouts_path.removesuffix(SUFFIX) + f".{table}{SUFFIX}"


# ---------------------------------------------------------------------- committer


def list_shards(shard_root: str, run_id: str) -> list[ShardRef]:
    """The finished shards of a run, by chunk index (temporaries are skipped)."""
    fs, base = filesystem(shard_root)
    infos = fs.get_file_info(pafs.FileSelector(f"{base}/{run_id}", allow_not_found=True))
    refs = []
    for info in infos:
        name = info.base_name
        if info.type == pafs.FileType.File and name.startswith(PREFIX) and name.count(".") == 1:
            meta = pq.read_metadata(info.path, filesystem=fs)
            kv = meta.metadata or {}
            index, fingerprint = int(kv[_META_CHUNK]), kv[_META_PRINT].decode()
            others = tuple(json.loads(kv.get(_META_TABLES, b"[]")))
            refs.append(
                ShardRef(run_id, index, info.path, shard_root, meta.num_rows, fingerprint, others)
            )
    return sorted(refs, key=lambda r: r.index)


def read_shard(ref: ShardRef) -> dict[str, pa.Table]:
    """The shard's tables, each checked to belong to the shard's chunk."""
    fs, _ = filesystem(ref.shard_root)
    paths = {"rollouts": ref.uri, **{t: sibling(ref.uri, t) for t in ref.tables}}
    tables = {t: pq.read_table(path, filesystem=fs) for t, path in paths.items()}
    for table, arrow in tables.items():
        if (arrow.schema.metadata or {}).get(_META_PRINT, b"").decode() != ref.fingerprint:
            raise SieveError(f"shard {paths[table]} holds another chunk's rows")
    return tables


def commit_shard(ledger: Ledger, ref: ShardRef) -> int:
    """Insert the shard's tables (one transaction); rows already stored count zero. Returns the
    number of new rollouts."""
    with timed("ledger_writes"):
        return ledger.write_batch(read_shard(ref))["rollouts"]


def remove_run(shard_root: str, run_id: str) -> None:
    """Delete a run's shard folder (its shards and any temporaries of killed workers); called
    once every chunk of the run is in the ledger. Nothing if the folder is gone."""
    fs, base = filesystem(shard_root)
    folder = f"{base}/{run_id}"
    if fs.get_file_info(folder).type != pafs.FileType.NotFound:
        fs.delete_dir(folder)


def commit_shards(
    ledger: Ledger, run_id: str, shard_root: str, expect: Mapping[int, str] | None = None
) -> dict[int, int]:
    """Commit every shard of a run (or, with `expect` = {chunk: fingerprint}, only the shards
    of those chunks whose fingerprint matches). Returns new rows per committed chunk; a second
    call returns zeros."""
    written = {}
    for ref in list_shards(shard_root, run_id):
        if expect is None or expect.get(ref.index) == ref.fingerprint:
            written[ref.index] = commit_shard(ledger, ref)
    return written


__all__ = [
    "PolicySpec",
    "ShardRef",
    "chunk_fingerprint",
    "commit_shard",
    "commit_shards",
    "list_shards",
    "remove_run",
    "sample_spec_to_shard",
    "sample_to_shard",
    "worker_policy",
    "write_shard",
]
