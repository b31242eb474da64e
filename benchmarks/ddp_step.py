"""The trainer's step on one process vs 2-process data parallel (torchrun, gloo), side by side.

The built-in tiny policy (`pipeline.policy.model.new_tiny_model`) trains on synthetic rollouts:
a sampler that returns seeded random completions of a fixed length with seeded 0/1 rewards, so
the step is almost all update (forward, backward, gradient all-reduce, optimiser) and the two
runs train on the same rows. For each step shape (prompts × G × completion tokens) the median
wall time of `Trainer.run_step` over `--steps` steps (after one warm-up step) is measured on
1 process with all `--threads` threads and on 2 ranks with half of them each (same cores), and
reported as the ratio one / two (> 1: data parallel is faster). Rollouts are broadcast from rank
0 (`grpo_core.distributed`), which is free here (the sampler does no work). A third arm runs the
2 ranks under `SIEVE_PARALLEL=fsdp` (`grpo_core.fsdp`: sharded parameters, gradients and Adam
moments; the loss then uses the full-row forward, without prefix sharing, which the other two
arms use) and records the parameters each rank holds.

Run: `python benchmarks/ddp_step.py [--threads 2] [--steps 5]`; `--quick` is a 1-step smoke run
of one small shape. Writes benchmarks/results/ddp_step.json and ddp_step.png (`--out` elsewhere).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHAPES = [(8, 8, 32), (16, 8, 32), (16, 8, 96), (32, 16, 64)]  # prompts, G, completion tokens
QUICK = [(4, 4, 8)]


class SyntheticSampler:
    """Seeded random completions of exactly `length` tokens (no model call)."""

    def __init__(self, vocab: int, length: int):
        self.vocab, self.length = vocab, length

    def sample_groups(
        self, prompts: Sequence[str], sizes: Sequence[int], *, temperature: float,
        max_new_tokens: int, seed: int,
    ) -> list:  # fmt: skip
        import torch

        from grpo_core.types import Sample

        gen = torch.Generator().manual_seed(seed)
        out = []
        for g in sizes:
            ids = torch.randint(3, self.vocab, (g, self.length), generator=gen).tolist()
            out.append([Sample(tuple(t), "1" if t[0] % 2 else "0", False) for t in ids])
        return out


def reward(items: Sequence, samples: Sequence) -> object:
    from grpo_core.types import Scores

    correct = [s.text == "1" for s in samples]
    return Scores([float(c) for c in correct], list(correct))


def worker(shape: tuple[int, int, int], steps: int) -> dict[str, float]:
    """Time `steps` trainer steps of `shape` on this process (one rank or alone)."""
    from grpo_core import distributed
    from grpo_core.config import GRPOConfig
    from grpo_core.seeds import seed_torch
    from grpo_core.trainer import Item, Trainer
    from pipeline.policy.model import new_tiny_model

    prompts, g, length = shape
    model, tok = new_tiny_model(0)
    items = [Item(f"{i}+{(7 * i) % 100}=", "1", g) for i in range(prompts)]
    cfg = GRPOConfig(
        lr=1e-4, max_new_tokens=length, total_steps=steps + 1, checkpoint_every=0,
        beta_schedule="fixed", beta=0.02,
    )  # fmt: skip
    sampler = SyntheticSampler(len(tok), length)
    seed_torch(cfg.seed, cfg.deterministic)  # the trainer sets no process-wide torch state
    t = Trainer(model, tok, sampler, reward, lambda step: items, cfg)
    times, updates = [], []
    for step in range(steps + 1):
        distributed.barrier(t.dist)
        start = time.perf_counter()
        out = t.run_step(step)
        distributed.barrier(t.dist)
        if step:  # the first step warms up
            times.append(time.perf_counter() - start)
            updates.append(out.metrics["time_update"])
    from grpo_core import fsdp

    held = sum(fsdp.local(p).numel() for p in t.model.parameters())  # this rank's share
    return {
        "step_s": statistics.median(times),
        "update_s": statistics.median(updates),
        "params_held": held,
    }


def _launch(
    world: int, threads: int, shape: tuple[int, int, int], steps: int, out: Path,
    parallel: str = "ddp",
) -> dict:  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, threads // world)), "PYTHONPATH": str(ROOT)}
    env["SIEVE_PARALLEL"] = parallel
    args = [str(Path(__file__).resolve()), "--worker", str(out), "--steps", str(steps)]
    args += ["--shape", ",".join(map(str, shape))]
    if world == 1:
        cmd = [sys.executable, *args]
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}"]
        cmd += [f"--master_port={port}", *args]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["shapes"]
    names = [f"{r['prompts']}×{r['group']}\n×{r['tokens']} tok" for r in rows]
    x = range(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for k, (arm, label) in enumerate(
        [("one", "1 process"), ("ddp", "2 ranks, ddp"), ("fsdp", "2 ranks, fsdp")]
    ):
        steps = [r[arm]["step_s"] for r in rows]
        axes[0].bar([i + 0.27 * (k - 1) for i in x], steps, 0.27, label=label)
    axes[0].set_xticks(list(x), names)
    axes[0].set_ylabel("median step (s)")
    axes[0].legend()
    for k, key in enumerate(("speedup", "fsdp_speedup")):
        ratios = [r[key] for r in rows]
        axes[1].bar([i + 0.4 * (k - 0.5) for i in x], ratios, 0.4, label=("ddp", "fsdp")[k])
        for i, r in enumerate(ratios):
            axes[1].text(i + 0.4 * (k - 0.5), r, f"{r:.2f}x", ha="center", va="bottom")
    axes[1].axhline(1.0, color="gray", lw=1)
    axes[1].set_xticks(list(x), names)
    axes[1].set_ylabel("one / two ranks (> 1: faster)")
    axes[1].legend()
    fig.suptitle(f"trainer step, tiny policy, {result['threads']} threads in all, gloo")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2, help="cores in all (split over ranks)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1 step of one small shape (smoke)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return _worker_main(args)
    shapes, steps = (QUICK, 1) if args.quick else (SHAPES, args.steps)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            one = _launch(1, args.threads, shape, steps, Path(tmp) / "one.json")
            ddp = _launch(2, args.threads, shape, steps, Path(tmp) / "ddp.json")
            sharded = _launch(2, args.threads, shape, steps, Path(tmp) / "fsdp.json", "fsdp")
            p, g, n = shape
            rows.append({"prompts": p, "group": g, "tokens": n, "one": one, "ddp": ddp,
                         "fsdp": sharded, "speedup": one["step_s"] / ddp["step_s"],
                         "fsdp_speedup": one["step_s"] / sharded["step_s"]})  # fmt: skip
            print(json.dumps(rows[-1]))
    result = {
        "benchmark": "ddp_step",
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
        "threads": args.threads,
        "steps": steps,
        "shapes": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ddp_step.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out / "ddp_step.png")


def _worker_main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from grpo_core import distributed

    shape = tuple(int(v) for v in args.shape.split(","))
    timing = worker(shape, args.steps)  # type: ignore[arg-type]
    if distributed.is_main():
        args.worker.write_text(json.dumps(timing))
    distributed.teardown()


if __name__ == "__main__":
    main()
