"""Distributed curation on real local clusters: a Dask `LocalCluster` (2 worker processes, one
thread each) and a Ray instance (`num_cpus=2`). The sharded curation equals the single-process
run, a worker killed mid-chunk changes nothing, committing the shards again adds nothing, a
finished run leaves no shards, and shards in an S3 bucket (a local moto server) work the same.

The cluster tests are marked `scale` (`make test-scale`, needs `pip install '.[scale]'`); the
shard/committer unit tests at the top run everywhere. Workers build their policy from a
`module:function` factory in this module (the simulated policy) or load the tiny model folder.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from flows import curate as flow
from flows.scale import ScaleConfig
from pipeline.jobs.curate import curation, shards
from pipeline.jobs.curate.curation import Policy
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.curate_child import CFG, simulated_policy

ROOT = Path(__file__).resolve().parents[2]
KILL_ENV = "SIEVE_TEST_KILL_FLAG"  # a file: the first worker to sample with it armed dies
HERE = "tests.flows.test_scale"
TINY_CFG = CurateConfig(n_candidates=48, mix={"arith": "2-3"}, seed=3, chunk_size=12)


# ---------------------------------------------------------------------- worker policies


def simulated_worker_policy(spec: shards.PolicySpec) -> Policy:
    """What a worker samples with in the simulated tests (the flow process holds the same)."""
    return simulated_policy(CFG)


class KillOnce:
    """A sampler that kills its worker process (os._exit) on the first chunk after arming."""

    def __init__(self, inner: Any, flag: Path):
        self.inner, self.flag = inner, flag

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def sample(self, prompts: Any, n: int, params: Any) -> Any:
        try:
            os.rename(self.flag, self.flag.with_suffix(".fired"))  # atomic: one worker wins
        except FileNotFoundError:
            return self.inner.sample(prompts, n, params)
        os._exit(1)  # mid-chunk: the task started, nothing of the chunk is written


def killing_worker_policy(spec: shards.PolicySpec) -> Policy:
    pol = simulated_worker_policy(spec)
    return replace(pol, sampler=KillOnce(pol.sampler, Path(os.environ[KILL_ENV])))


# ---------------------------------------------------------------------- helpers


def fingerprint(home: Path) -> dict[str, object]:
    with Ledger.open(home, read_only=True) as led:
        prints: dict[str, object] = {"problems": led.checksum("problems")[:1]}
        for table in ("rollouts", "rollout_steps", "curriculum_items", "rejections"):
            prints[table] = led.checksum(table)
        heads = "SELECT * EXCLUDE (created_at) FROM curricula ORDER BY 1"  # not the clock
        prints["curricula"] = led.sql(heads).rows()
        runs = led.sql("SELECT run_id, status, group_size FROM sampling_runs ORDER BY run_id")
        prints["runs"] = runs.rows()
        dupes = led.sql(
            "SELECT count(*) AS n FROM (SELECT run_id, problem_id, sample_idx FROM rollouts "
            "GROUP BY ALL HAVING count(*) > 1)"
        )
        prints["duplicates"] = dupes["n"][0]
    return prints


def curate_simulated(home: Path, scale: dict[str, Any], factory: str | None = None) -> None:
    p = flow.CurateParams(
        model="simulated",
        home=str(home),
        config=CFG,
        scale=ScaleConfig(**scale, policy_factory=factory),
    )
    flow._POLICIES[flow.policy_key(p)] = simulated_policy(CFG)  # the flow process's policy
    flow.run(p)


def run_ids(home: Path) -> list[str]:
    with Ledger.open(home, read_only=True) as led:
        return list(led.sql("SELECT run_id FROM sampling_runs ORDER BY 1")["run_id"])


def expected_chunks(home: Path, run_id: str, chunk_size: int) -> int:
    with Ledger.open(home, read_only=True) as led:
        n = led.sql(
            "SELECT count(DISTINCT problem_id) AS n FROM rollouts WHERE run_id = $r", {"r": run_id}
        )["n"][0]
    return -(-int(n) // chunk_size)


# ---------------------------------------------------------------------- shard unit tests


def test_a_shard_holds_the_rows_sample_chunk_commits_and_counts_once(tmp_path: Path) -> None:
    pol = simulated_policy(CFG)
    info = curation.run_info(pol, "screen", 8, "k", CFG)
    chunk = curation.chunks(simulated_problems(), CFG)[1]
    with Ledger.memory() as direct, Ledger.memory() as merged:
        curation.sample_chunk(
            direct, pol, chunk, info, CFG.seed, 1, 0.5
        )  # half the verdicts audited
        root = str(tmp_path / "shards")
        first = shards.sample_to_shard(pol, chunk, info, CFG.seed, 1, root, 0.5)
        again = shards.sample_to_shard(pol, chunk, info, CFG.seed, 1, root, 0.5)  # a retried chunk
        (tmp_path / "shards" / info.run_id / ".tmp-dead-chunk-000001.parquet").write_bytes(b"x")
        assert first == again and len(shards.list_shards(root, info.run_id)) == 1
        assert shards.commit_shards(merged, info.run_id, root) == {1: chunk.height * 8}
        assert shards.commit_shards(merged, info.run_id, root) == {1: 0}  # the committer again
        assert shards.commit_shards(merged, info.run_id, root, expect={1: "other"}) == {}
        assert first.tables == ("rollout_steps", "verifier_audit")
        for table in ("rollouts", "rollout_steps", "verifier_audit"):  # every table it writes
            assert merged.checksum(table) == direct.checksum(table)
        assert direct.checksum("verifier_audit")[0] > 0
    shards.remove_run(root, info.run_id)  # temporaries included
    assert not (tmp_path / "shards" / info.run_id).exists()
    shards.remove_run(root, info.run_id)  # already gone: nothing to do


def test_a_worker_with_another_model_revision_refuses() -> None:
    spec = shards.PolicySpec("simulated", factory=f"{HERE}:simulated_worker_policy", revision="x")
    with pytest.raises(Exception, match="revision"):
        shards.worker_policy(spec)


def simulated_problems() -> pl.DataFrame:
    from pipeline.problems import generate_mix

    return generate_mix(CFG.mix_levels(), CFG.n_candidates, CFG.seed)


# ---------------------------------------------------------------------- clusters


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Workers (started after this) import this module and see the kill flag's path. Dask's
    spawned workers take this process's sys.path, Ray's the environment's PYTHONPATH."""
    flag = tmp_path_factory.mktemp("kill") / "armed"
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", KILL_ENV, "SIEVE_VERIFY_TIMEOUT")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), saved["PYTHONPATH"]]))
    os.environ[KILL_ENV] = str(flag)
    # a verdict deadline no load can reach: these tests compare ledgers for equality, and a
    # fresh worker's first math-verify call (~0.5 s quiet) missed the 3 s default at load 6,
    # turning one verdict into verifier_error on Ray alone
    os.environ["SIEVE_VERIFY_TIMEOUT"] = "60"
    sys.path.insert(0, str(ROOT))
    yield flag
    sys.path.remove(str(ROOT))
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module", params=["dask", "ray"])
def cluster(request: pytest.FixtureRequest, worker_env: Path) -> Iterator[dict[str, Any]]:
    """The `scale` parameter of a curation on a real local cluster of 2 worker processes."""
    if request.param == "dask":
        distributed = pytest.importorskip("distributed")
        pytest.importorskip("prefect_dask")
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local:
            yield {"runner": "dask", "runner_address": local.scheduler_address}
    else:
        ray = pytest.importorskip("ray")
        pytest.importorskip("prefect_ray")
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200_000_000)
        try:
            yield {"runner": "ray"}  # no address: the runner reuses this instance
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    home = tmp_path_factory.mktemp("single")
    curate_simulated(home, {"runner": "local"})
    return fingerprint(home)


@pytest.mark.scale
def test_sharded_curation_equals_the_single_process_run(
    cluster: dict[str, Any], reference: dict[str, object], tmp_path: Path
) -> None:
    scale = {**cluster, "keep_shards": True}
    curate_simulated(tmp_path, scale, f"{HERE}:simulated_worker_policy")
    assert fingerprint(tmp_path) == reference
    runs = run_ids(tmp_path)
    for run_id in runs:  # one shard per chunk, in the default root beside the ledger
        shard_list = shards.list_shards(str(tmp_path / "shards"), run_id)
        assert len(shard_list) == expected_chunks(tmp_path, run_id, CFG.chunk_size)
    with Ledger.open(tmp_path) as led:  # the committer run again changes nothing
        again = [shards.commit_shards(led, r, str(tmp_path / "shards")) for r in runs]
    assert all(n == 0 for written in again for n in written.values())
    assert fingerprint(tmp_path) == reference


@pytest.mark.scale
def test_a_worker_killed_mid_chunk_leaves_the_same_ledger(
    cluster: dict[str, Any], reference: dict[str, object], worker_env: Path, tmp_path: Path
) -> None:
    worker_env.touch()  # armed: the first chunk any worker samples kills that worker
    curate_simulated(tmp_path, cluster, f"{HERE}:killing_worker_policy")
    assert worker_env.with_suffix(".fired").exists() and not worker_env.exists()
    worker_env.with_suffix(".fired").unlink()
    result = fingerprint(tmp_path)
    assert result == reference and result["duplicates"] == 0
    for run_id in run_ids(tmp_path):  # committed runs leave no shards (nor the dead temporaries)
        assert not (tmp_path / "shards" / run_id).exists()


@pytest.fixture(scope="module")
def object_store() -> Iterator[str]:
    """An S3 bucket on a local moto server, as the shard_root URI workers and flow share."""
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    query = f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    root = f"s3://testing:testing@sieve-shards/nightly?{query}"
    bucket, _ = shards.filesystem(f"{root}&allow_bucket_creation=true")
    bucket.create_dir("sieve-shards")
    try:
        yield root
    finally:
        server.stop()


@pytest.mark.scale
def test_shards_in_an_object_store_give_the_same_ledger(
    cluster: dict[str, Any], reference: dict[str, object], object_store: str, tmp_path: Path
) -> None:
    """Workers write their shards to S3 (moto), the flow commits them from there; object
    stores have no rename, so each shard is a copy of its temporary and a delete."""
    import pyarrow.fs as pafs

    scale = {**cluster, "shard_root": object_store, "keep_shards": True}
    curate_simulated(tmp_path, scale, f"{HERE}:simulated_worker_policy")
    assert fingerprint(tmp_path) == reference
    fs, base = shards.filesystem(object_store)
    for run_id in run_ids(tmp_path):
        stored = shards.list_shards(object_store, run_id)
        assert len(stored) == expected_chunks(tmp_path, run_id, CFG.chunk_size)
        assert all(ref.uri.startswith(f"{base}/{run_id}/") for ref in stored)
        shards.remove_run(object_store, run_id)
    assert fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=True)) == []


@pytest.fixture(scope="module")
def tiny_reference(
    partly_trained_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, object]:
    home = tmp_path_factory.mktemp("tiny-single")
    curate_tiny(partly_trained_dir, home, {"runner": "local"})
    return fingerprint(home)


def curate_tiny(model: Path, home: Path, scale: dict[str, Any]) -> None:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker runs: the same kernels, the same samples
    try:
        p = flow.CurateParams(
            model=str(model), home=str(home), config=TINY_CFG, scale=ScaleConfig(**scale)
        )
        flow.run(p)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.scale
def test_the_tiny_model_curated_on_the_cluster_equals_the_single_process_run(
    cluster: dict[str, Any],
    tiny_reference: dict[str, object],
    partly_trained_dir: Path,
    tmp_path: Path,
) -> None:
    """Workers load the model folder themselves; both stages fill (the policy is partly right)."""
    curate_tiny(partly_trained_dir, tmp_path, cluster)
    result = fingerprint(tmp_path)
    assert result == tiny_reference
    assert result["curriculum_items"][0] > 0 and len(result["runs"]) == 2  # type: ignore[index]
