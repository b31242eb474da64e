"""Runs the trainer on the toy task for tests/grpo_core/test_ddp.py, one process or under torchrun.

`python -m torch.distributed.run --nproc_per_node=2 tests/grpo_core/ddp_child.py OUT NAME...`
runs each named scenario on 2 gloo ranks; each rank writes `OUT/NAME-RANK.pt` with the per-step
metrics, the final weights and how many times its metrics / checkpoint hooks were called.
The test runs the same scenarios on one process with `run(NAME, OUT)` and compares.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):  # run as a script by torchrun: make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from grpo_core import distributed, fsdp
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Trainer
from tests.grpo_core.conftest import ToySampler, ToyTokenizer, first_letter_reward, toy_batches
from tests.grpo_core.conftest import toy_model as make_toy_model

STEPS = 4
WORLD = 2  # the torchrun job the single-process `shard` run reproduces
BASE: dict[str, Any] = {
    "lr": 3e-3,
    "max_new_tokens": 3,
    "checkpoint_every": 0,
    "total_steps": STEPS,
    "beta_schedule": "fixed",
    "beta": 0.05,
}
SCENARIOS: dict[str, dict[str, Any]] = {
    # prefix sharing, 2 iterations (old log-probs, the clip active), micro-batches of 4 rows
    "token_mean": {"num_iterations": 2, "micro_batch_size": 4},
    # full rows; dr_grpo's denominator is the constant max_new_tokens on every rank
    "dr_grpo": {"aggregation": "dr_grpo", "share_prefix": False, "micro_batch_size": 3},
    # each rank samples its half of the items
    "shard": {"aggregation": "seq_mean", "micro_batch_size": 5},
    # 2 steps, checkpoint, a new trainer resumes, 2 more steps
    "resume": {"num_iterations": 2, "micro_batch_size": 4},
    # SIEVE_PARALLEL=fsdp (sharded parameters): the same steps without prefix sharing
    "fsdp_token_mean": {"num_iterations": 2, "micro_batch_size": 4, "share_prefix": False},
    # truncated rows dropped (odd row counts) and 1-row micro-batches: rank 0 runs one more
    # micro-batch than rank 1 on some steps, so rank 1 runs padding micro-batches
    "fsdp_dr_grpo": {
        "aggregation": "dr_grpo",
        "share_prefix": False,
        "micro_batch_size": 1,
        "mask_truncated": True,
    },
    "fsdp_resume": {"num_iterations": 2, "micro_batch_size": 4, "share_prefix": False},
    # a sampler with its own weights: rank 0 samples alone, pushed the gathered weights
    "fsdp_sync": {"micro_batch_size": 4, "share_prefix": False, "reference": "none", "beta": 0.0},
}


class OwnWeightsSampler(ToySampler):
    """ToySampler over its own copy of the weights, pushed the trained ones (`WeightSync`)."""

    def __init__(self, model: torch.nn.Module, tokenizer: ToyTokenizer):
        super().__init__(copy.deepcopy(model), tokenizer)
        self.syncs = 0

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model.load_state_dict(model.state_dict())
        self.syncs += 1


class Counted:
    """Hooks that count their calls (rank 1 must make none)."""

    def __init__(self) -> None:
        self.metrics = 0
        self.checkpoints = 0

    def hooks(self) -> Hooks:
        def on_metrics(step: int, m: dict[str, float]) -> None:
            self.metrics += 1

        def on_checkpoint(step: int, path: Path) -> None:
            self.checkpoints += 1

        return Hooks(metrics=on_metrics, checkpoint=on_checkpoint, warning=lambda m: None)


def trainer(name: str, counted: Counted, ckpt: Path | None) -> Trainer:
    cfg = GRPOConfig(**{**BASE, **SCENARIOS[name]})
    model, tok = make_toy_model(), ToyTokenizer()
    sampler = (OwnWeightsSampler if name == "fsdp_sync" else ToySampler)(model, tok)
    collector = None
    if name == "shard" and not distributed.launched():  # the single-process equivalent
        collector = functools.partial(_shard_all, world=WORLD)
    return Trainer(
        model,
        tok,
        sampler,
        first_letter_reward,
        toy_batches(prompts_per_step=6, g=8),
        cfg,
        ckpt,
        hooks=counted.hooks(),
        collector=collector,
    )


def _shard_all(t: Trainer, step: int, world: int) -> Any:
    return distributed.shard_collect(t, step, range(world), world)


def run(name: str, out: Path) -> dict[str, Any]:
    """One scenario on this process (one rank of a job, or alone); its result, also saved."""
    if distributed.launched():  # read by the trainer's `distributed.setup()`
        os.environ["SIEVE_ROLLOUTS"] = "shard" if name == "shard" else "broadcast"
        os.environ["SIEVE_PARALLEL"] = "fsdp" if name.startswith("fsdp") else "ddp"
    counted = Counted()
    pads = _count_pads()
    if name.endswith("resume"):
        ckpt = out / f"ckpt-{name}-{distributed.world_size()}"
        first = trainer(name, counted, ckpt)
        history = first.train(max_steps=STEPS // 2)
        # a copy of the half-way checkpoint while it is the newest (it alone keeps resume/)
        shutil.copytree(ckpt, out / f"half-{name}-{distributed.world_size()}", dirs_exist_ok=True)
        t = trainer(name, counted, ckpt)
        assert t.resume() == STEPS // 2
        history += t.train()
    else:
        t = trainer(name, counted, None)
        history = t.train()
    own = t.model.state_dict()
    result = {
        "history": history,
        "state": {k: fsdp.full(v.detach()).clone() for k, v in own.items()},  # whole, every rank
        "local_numel": sum(fsdp.local(p).numel() for p in t.model.parameters()),
        "syncs": getattr(t.sampler, "syncs", 0),
        "pads": pads,  # padding micro-batches this rank ran (fsdp)
        "metrics_calls": counted.metrics,
        "checkpoint_calls": counted.checkpoints,
        "world": t.dist.world,
    }
    torch.save(result, out / f"{name}-{t.dist.rank}.pt")
    return result


def _count_pads() -> list[int]:
    """A list that collects how many padding micro-batches each fsdp step added on this rank."""
    pads: list[int] = []
    real = _PAD_PARTS

    def counting(d: Any, parts: list[Any], first: Any) -> tuple[list[Any], int]:
        out, n = real(d, parts, first)
        pads.append(len(out) - n)
        return out, n

    fsdp.pad_parts = counting  # type: ignore[assignment]
    return pads


_PAD_PARTS = fsdp.pad_parts


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    for name in argv[1:]:
        run(name, out)
    distributed.teardown()


if __name__ == "__main__":
    main(sys.argv[1:])
