"""Fully sharded training (`SIEVE_PARALLEL=fsdp`, `grpo_core.fsdp`) against one process.

One `torchrun --nproc_per_node=2` job on gloo runs the fsdp scenarios of `ddp_child.py`; the
same scenarios run here on one process (6 items × G = 8 per step, 4 steps). Losses and every
weight must agree within 1e-5, each rank must hold about half of the parameters, a checkpoint
written under fsdp must resume on one process and continue exactly as the one-process run, and
the combinations fsdp refuses must be refused in one line. About 20 s on 2 busy cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core import checkpoint as ckpt
from grpo_core import fsdp
from grpo_core.distributed import Dist, DistributedConfig
from grpo_core.types import TrainerError
from tests.grpo_core import ddp_child
from tests.grpo_core.test_ddp import TOL, _max_diffs, run_job

pytestmark = pytest.mark.integration  # 18 s: torchrun ranks

ROOT = Path(__file__).resolve().parents[2]
COMPARED = ("fsdp_token_mean", "fsdp_dr_grpo", "fsdp_resume", "fsdp_sync")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_job(COMPARED, tmp_path_factory, "fsdp")


@pytest.mark.parametrize("name", COMPARED)
def test_two_sharded_ranks_equal_one_process(runs: dict[str, Any], name: str) -> None:
    one, (rank0, rank1) = runs["one"][name], runs["fsdp"][name]
    assert rank0["world"] == 2 and one["world"] == 1
    trained = [h["trained_samples"] for h in one["history"]]
    assert sum(trained) > 0, "no informative step: the comparison would be vacuous"
    assert trained == [h["trained_samples"] for h in rank0["history"]]
    losses, weights = _max_diffs(one, rank0)
    print(f"{name}: max |loss diff| {losses:.1e}, max |weight diff| {weights:.1e}")
    assert losses <= TOL and weights <= TOL, (losses, weights)
    start = ddp_child.make_toy_model().state_dict()
    moved = max(float((one["state"][k] - start[k]).abs().max()) for k in one["state"])
    assert moved > 100 * TOL, "the weights barely moved: the comparison would be vacuous"
    for k in rank0["state"]:
        assert torch.equal(rank0["state"][k], rank1["state"][k]), k


def test_uneven_micro_batch_counts_are_padded_and_weigh_nothing(runs: dict[str, Any]) -> None:
    """fsdp_dr_grpo has steps where one rank has a micro-batch more: the other pads (and the
    weights still equal one process's, above); the even scenarios pad nothing."""
    rank0, rank1 = runs["fsdp"]["fsdp_dr_grpo"]
    assert sum(rank0["pads"]) + sum(rank1["pads"]) > 0
    assert all(sum(runs["fsdp"]["fsdp_token_mean"][r]["pads"]) == 0 for r in (0, 1))


def test_each_rank_holds_half_of_the_parameters(runs: dict[str, Any]) -> None:
    total = sum(p.numel() for p in ddp_child.make_toy_model().parameters())
    for name in COMPARED:
        rank0, rank1 = runs["fsdp"][name]
        assert rank0["local_numel"] + rank1["local_numel"] == total, name
        assert abs(rank0["local_numel"] - total / 2) <= 0.05 * total, name
        assert runs["one"][name]["local_numel"] == total


def test_a_sampler_with_its_own_weights_is_pushed_them_by_rank_0_only(
    runs: dict[str, Any],
) -> None:
    rank0, rank1 = runs["fsdp"]["fsdp_sync"]
    one = runs["one"]["fsdp_sync"]
    assert rank0["syncs"] == one["syncs"] >= ddp_child.STEPS  # at train() and after each update
    assert rank1["syncs"] == 0


def test_resume_under_fsdp_equals_four_straight_steps(runs: dict[str, Any]) -> None:
    resumed, straight = runs["fsdp"]["fsdp_resume"][0], runs["fsdp"]["fsdp_token_mean"][0]
    assert ddp_child.SCENARIOS["fsdp_resume"] == ddp_child.SCENARIOS["fsdp_token_mean"]
    losses, weights = _max_diffs(resumed, straight)
    assert losses <= TOL and weights <= TOL, (losses, weights)
    assert runs["fsdp"]["fsdp_resume"][0]["checkpoint_calls"] == 2
    assert runs["fsdp"]["fsdp_resume"][1]["checkpoint_calls"] == 0


def test_a_checkpoint_written_under_fsdp_resumes_on_one_process(runs: dict[str, Any]) -> None:
    """The fsdp checkpoint of step 2 holds whole weights and a one-process optimiser state:
    one process resumes from it and its 2 last steps equal the one-process straight run's."""
    written = ckpt.step_dir(runs["dir"] / "half-fsdp_resume-2", 2)
    assert (written / ckpt.RESUME).is_dir(), "no optimiser state: the resume would not be exact"
    t = ddp_child.trainer("fsdp_resume", ddp_child.Counted(), None)
    assert t.resume(written) == 2
    history = t.train()
    straight = runs["one"]["fsdp_token_mean"]
    ends = {"history": history, "state": t.model.state_dict()}
    losses, weights = _max_diffs(ends, {**straight, "history": straight["history"][2:]})
    print(f"fsdp checkpoint resumed on one process: {losses:.1e}, {weights:.1e}")
    assert losses <= TOL and weights <= TOL, (losses, weights)


@pytest.mark.parametrize(
    ("rollouts", "reference", "needle"),
    [("shard", "frozen", "SIEVE_ROLLOUTS=broadcast"), ("broadcast", "lora_base", "ddp")],
)
def test_refused_combinations_say_what_to_use(rollouts: str, reference: str, needle: str) -> None:
    d = Dist(0, 2, DistributedConfig(rollouts, "fsdp"))  # type: ignore[arg-type]
    assert fsdp.enabled(d)
    with pytest.raises(TrainerError, match=needle):
        fsdp.check(d, reference)
    fsdp.check(Dist(0, 2, DistributedConfig("broadcast", "fsdp")), "frozen")  # accepted


def test_units_are_the_decoder_layers() -> None:
    model = ddp_child.make_toy_model()
    assert [type(u).__name__ for u in fsdp.units(model)] == ["LlamaDecoderLayer"] * 2
    plain = torch.nn.Sequential(torch.nn.ModuleList([torch.nn.Linear(2, 2)] * 3))
    assert len(fsdp.units(plain)) == 3
