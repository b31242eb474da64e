"""Data-parallel training (`grpo_core.distributed`) against one process, on the toy task.

One `torchrun --nproc_per_node=2` job on gloo runs every scenario of `ddp_child.py`; the same
scenarios run here on one process with the same global batch (6 items × G = 8 per step, 4
steps). Losses and every weight must agree within 1e-5, both ranks must hold the same weights,
and rank 1 must call no metrics or checkpoint hook. About 20 s on 2 busy cores.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core import distributed
from grpo_core.distributed import Dist, DistributedConfig
from grpo_core.types import Collected, Item, Sample, Scores
from tests.grpo_core import ddp_child

pytestmark = pytest.mark.integration  # 18 s: torchrun ranks

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-5
COMPARED = ("token_mean", "dr_grpo", "shard", "resume")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(
    names: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory, key: str
) -> dict[str, Any]:
    """The scenarios `names` in one 2-rank torchrun job and on this process:
    {"one": {name: result}, key: {name: [rank 0, rank 1]}, "dir": the job's folder}."""
    one_dir, job_dir = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp(key)
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--nnodes=1",
        f"--master_port={_free_port()}", str(ROOT / "tests/grpo_core/ddp_child.py"),
        str(job_dir), *names,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    one = {name: ddp_child.run(name, one_dir) for name in names}
    job = {
        name: [torch.load(job_dir / f"{name}-{r}.pt", weights_only=False) for r in (0, 1)]
        for name in names
    }
    return {"one": one, key: job, "dir": job_dir}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_job(COMPARED, tmp_path_factory, "ddp")


def _max_diffs(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float]:
    pairs = zip(a["history"], b["history"], strict=True)
    losses = max(abs(x["loss"] - y["loss"]) for x, y in pairs)
    weights = max(float((a["state"][k] - b["state"][k]).abs().max()) for k in a["state"])
    return losses, weights


@pytest.mark.parametrize("name", COMPARED)
def test_two_ranks_equal_one_process(runs: dict[str, Any], name: str) -> None:
    one, (rank0, rank1) = runs["one"][name], runs["ddp"][name]
    assert rank0["world"] == 2 and one["world"] == 1
    trained = [h["trained_samples"] for h in one["history"]]
    assert sum(trained) > 0, "no informative step: the comparison would be vacuous"
    assert trained == [h["trained_samples"] for h in rank0["history"]]
    losses, weights = _max_diffs(one, rank0)
    print(f"{name}: max |loss diff| {losses:.1e}, max |weight diff| {weights:.1e}")
    assert losses <= TOL and weights <= TOL, (losses, weights)
    moved = max(
        float((one["state"][k] - ddp_child.make_toy_model().state_dict()[k]).abs().max())
        for k in one["state"]
    )
    assert moved > 100 * TOL, "the weights barely moved: the comparison would be vacuous"
    for k in rank0["state"]:
        assert torch.equal(rank0["state"][k], rank1["state"][k]), k


def test_resume_on_two_ranks_equals_four_straight_steps(runs: dict[str, Any]) -> None:
    resumed, straight = runs["ddp"]["resume"][0], runs["ddp"]["token_mean"][0]
    assert ddp_child.SCENARIOS["resume"] == ddp_child.SCENARIOS["token_mean"]
    losses, weights = _max_diffs(resumed, straight)
    print(f"resume: max |loss diff| {losses:.1e}, max |weight diff| {weights:.1e}")
    assert losses <= TOL and weights <= TOL, (losses, weights)
    steps = sorted(p.name for p in (runs["dir"] / "ckpt-resume-2").iterdir())
    assert steps == ["step-000002", "step-000004"]


def test_only_rank_0_reports_metrics_and_checkpoints(runs: dict[str, Any]) -> None:
    for name in COMPARED:
        rank0, rank1 = runs["ddp"][name]
        assert rank0["metrics_calls"] == ddp_child.STEPS and rank1["metrics_calls"] == 0
        assert rank1["checkpoint_calls"] == 0
    assert runs["ddp"]["resume"][0]["checkpoint_calls"] == 2


# ---------------------------------------------------------------- without a process group


def test_contiguous_shards_cover_every_row_once() -> None:
    for n in range(0, 12):
        for world in (1, 2, 3, 5):
            rows = [
                r
                for rank in range(world)
                for r in distributed.shard_contiguous(range(n), rank, world)
            ]
            assert rows == list(range(n))
            robin = [distributed.shard_round_robin(range(n), rank, world) for rank in range(world)]
            assert sorted(r for part in robin for r in part) == list(range(n))
            sizes = [
                len(distributed.shard_contiguous(range(n), rank, world)) for rank in range(world)
            ]
            assert max(sizes) - min(sizes) <= 1


def test_one_process_collectives_are_no_ops() -> None:
    d = Dist()
    assert not d.active and d.is_main
    assert distributed.gather(d, 3) == [3] and distributed.broadcast(d, "x") == "x"
    assert distributed.all_reduce_scalars(d, {"a": 1.0}) == {"a": 1.0}
    assert distributed.reduce_iteration(d, [], "why") == "why"
    assert distributed.setup(DistributedConfig()) == Dist()


def test_join_keeps_order_and_drops_a_field_one_part_lacks() -> None:
    s = Sample((2,), "a", False)
    a = Collected([Item("a", "A", 1)], [[s]], Scores([1.0], [True], [((0, 1, True),)]), 1, 2.0)
    b = Collected([Item("b", "B", 2)], [[s, s]], Scores([0.0, None], [False, None]), 2, 1.0)
    joined = distributed.join([a, b])
    assert [it.prompt for it in joined.items] == ["a", "b"]
    assert joined.scores.rewards == [1.0, 0.0, None] and joined.scores.steps is None
    assert joined.rollouts == 3 and joined.time_sample == 2.0
