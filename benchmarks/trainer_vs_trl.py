"""Seconds per GRPO step: Sieve's trainer vs TRL's `GRPOTrainer`, same model, prompts, G, tokens.

Both train the same starting policy (the bootstrapped tiny model by default) for the same number
of steps on the same prompts (train-split problems from the levels where that policy is neither
hopeless nor perfect), 16 prompts × G = 4 = 64 completions per step, at most 16 new tokens,
temperature 1, the same learning rate, clip ε and β, one update per batch, rewards from Sieve's
verifiers (TRL gets them through `pipeline.integrations.trl.reward_function`). Then both final
models are evaluated on the same held-out problems of those levels: pass@1 as the mean over 8
samples at temperature 1, and greedy.

Time per step: the gaps between consecutive step ends (TRL: `on_step_end`; Sieve: its metrics
callback), after the first WARMUP steps on both sides (the first steps of a CPU run pay for
kernel selection on new tensor shapes); mean and median are reported, and Sieve's own split of a
step into sampling, scoring and update. TRL is a benchmark-only dependency (`pip install .[trl]`).

Each seed draws its own training problems and seeds both trainers; the held-out problems are the
same for every seed (HELDOUT_PER_LEVEL per level). The JSON keeps every seed's numbers and their
mean; the held-out gain is compared on the seed mean.

Run: `python benchmarks/trainer_vs_trl.py [--model data/models/tiny] [--steps 40] [--prompts 16]
[--group-size 4] [--lr 1e-4] [--levels JSON] [--seeds 0,1,2] [--out NAME]`
→ benchmarks/results/trainer_vs_trl.json + .png
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import polars as pl
import torch

RESULTS = Path(__file__).parent / "results"
# the default bootstrapped policy's middle levels (held-out sampled pass@1 0.15-0.7)
LEVELS: dict[str, list[int]] = {"arith": [3, 4]}
PROMPTS, G, MAX_NEW = 16, 4, 16  # defaults; --prompts / --group-size
WARMUP = 5  # steps left out of the timing on both sides (first-shape kernel selection)
HELDOUT_PER_LEVEL = 100


def problems(levels: dict[str, list[int]], seed: int, n: int) -> pl.DataFrame:
    from pipeline.problems import generate_mix

    return generate_mix(levels, n * 2, seed).filter(pl.col("split") == "train").head(n)


def heldout_problems(levels: dict[str, list[int]], per_level: int) -> pl.DataFrame:
    from pipeline.policy.evaluate import heldout_set

    return pl.concat(
        [heldout_set(per_level, [f]).filter(pl.col("level").is_in(lv)) for f, lv in levels.items()]
    )


def heldout(model: Any, tokenizer: Any, probs: pl.DataFrame) -> dict[str, float]:
    """Held-out pass@1 (greedy; mean of 8 samples at T = 1) on `probs`."""
    from pipeline.policy.evaluate import EvalConfig, evaluate, overall
    from pipeline.sampling.hf import HFSampler
    from pipeline.store import Ledger

    sampler = HFSampler(model=model, tokenizer=tokenizer, model_name="bench")
    prompts_of = {q: f"{q}=" for q in probs["question"]}
    with Ledger.memory() as ledger:
        cfg = EvalConfig(samples=8, temperature=1.0, max_new_tokens=MAX_NEW)
        table = evaluate(sampler, ledger, "bench", prompts_of, cfg, probs)
    return {k: overall(table, k) for k in ("greedy", "sampled")}


def step_times(stamps: list[float]) -> dict[str, float]:
    """Mean and median seconds per step after the first WARMUP steps (kernel warm-up)."""
    gaps = [b - a for a, b in itertools.pairwise(stamps)][WARMUP:]
    return {
        "seconds_per_step": sum(gaps) / len(gaps),
        "median_seconds_per_step": sorted(gaps)[len(gaps) // 2],
        "timed_steps": len(gaps),
    }


def run_sieve(
    model_dir: Path, data: pl.DataFrame, held: pl.DataFrame, steps: int, lr: float, beta: float,
    prompts: int = PROMPTS, g: int = G, seed: int = 0,
) -> dict:  # fmt: skip
    from grpo_core.config import GRPOConfig
    from grpo_core.seeds import seed_torch
    from grpo_core.trainer import Hooks, Item, Trainer
    from pipeline.batches import raw_verifier_reward
    from pipeline.policy.model import load_policy
    from pipeline.sampling.hf import HFSampler
    from pipeline.sampling.training import HFGroupSampler

    model, tok = load_policy(model_dir)
    items = [
        Item(f"{q}=", a, g, verifier=v)
        for q, a, v in zip(data["question"], data["answer"], data["verifier"], strict=True)
    ]

    def batch(step: int) -> list[Item]:
        start = (step * prompts) % len(items)
        return [items[(start + i) % len(items)] for i in range(prompts)]

    cfg = GRPOConfig(
        lr=lr, total_steps=steps, max_new_tokens=MAX_NEW, beta=beta,
        beta_schedule="fixed", checkpoint_every=0, aggregation="token_mean", seed=seed,
    )  # fmt: skip
    sampler = HFGroupSampler(HFSampler(model=model, tokenizer=tok))
    seed_torch(cfg.seed, cfg.deterministic)  # the trainer sets no process-wide torch state
    trainer = Trainer(
        model, tok, sampler, raw_verifier_reward, batch, cfg, hooks=Hooks(warning=lambda m: None)
    )
    stamps = []
    trainer.hooks = Hooks(metrics=lambda step, m: stamps.append(time.perf_counter()))
    history = trainer.train()[WARMUP + 1 :]
    split = {
        k: statistics.fmean(h[f"time_{k}"] for h in history) for k in ("sample", "score", "update")
    }
    return {**step_times(stamps), "split_seconds": split,
            "heldout": heldout(trainer.model, tok, held)}  # fmt: skip


def run_trl(
    model_dir: Path, data: pl.DataFrame, held: pl.DataFrame, steps: int, lr: float, beta: float,
    prompts: int = PROMPTS, g: int = G, seed: int = 0,
) -> dict:  # fmt: skip
    import datasets
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from pipeline.integrations.trl import reward_function

    class Stamps(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter())

    rows = data.select(
        pl.format("{}=", "question").alias("prompt"), "answer", "verifier"
    ).to_dicts()
    ds = datasets.Dataset.from_list(rows)
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    out = RESULTS / "_trl_tmp"
    args = trl.GRPOConfig(
        output_dir=str(out), use_cpu=True, report_to=[], max_steps=steps, logging_steps=1,
        per_device_train_batch_size=prompts * g, num_generations=g,
        max_completion_length=MAX_NEW, temperature=1.0, learning_rate=lr, beta=beta,
        epsilon=0.2, num_iterations=1, loss_type="dapo", save_strategy="no",
        gradient_checkpointing=False, shuffle_dataset=False, seed=seed,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
    )  # fmt: skip
    stamps = Stamps()
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=[reward_function(name="sieve")],
        args=args,
        train_dataset=ds,
        callbacks=[stamps],
    )
    trainer.train()
    return {**step_times(stamps.times), "heldout": heldout(trainer.model, tok, held)}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    names = ["sieve", "trl"]
    colours = ["tab:green", "tab:gray"]
    runs = result["runs"]
    mean = result["mean"]
    a.bar(names, [mean[n]["seconds_per_step"] for n in names], color=colours)
    for i, n in enumerate(names):
        a.scatter([i] * len(runs), [r[n]["seconds_per_step"] for r in runs], color="black", s=8)
    a.set_ylabel(
        f"seconds per step ({result['prompts_per_step'] * result['group_size']} completions)"
    )
    a.set_title(f"speed: Sieve {result['speedup']:.1f}x faster per step")
    start = result["start"]["sampled"]
    b.bar(names, [100 * (mean[n]["heldout_sampled"] - start) for n in names], color=colours)
    for i, n in enumerate(names):
        gains = [100 * (r[n]["heldout"]["sampled"] - start) for r in runs]
        b.scatter([i] * len(runs), gains, color="black", s=8)
    b.axhline(0, color="black", lw=0.5)
    b.set_ylabel("held-out pass@1 gain (points, mean of 8 samples)")
    b.set_title(f"after {result['steps']} steps, {len(runs)} seeds (dots)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def seed_mean(runs: list[dict], name: str) -> dict[str, float]:
    keys = ("seconds_per_step", "median_seconds_per_step")
    out = {k: statistics.fmean(r[name][k] for r in runs) for k in keys}
    for k in ("greedy", "sampled"):
        out[f"heldout_{k}"] = statistics.fmean(r[name]["heldout"][k] for r in runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--beta", type=float, default=0.02)
    ap.add_argument("--levels", default=json.dumps(LEVELS), help="JSON family -> levels to train")
    ap.add_argument("--out", default="trainer_vs_trl", help="results file name (no suffix)")
    ap.add_argument("--prompts", type=int, default=PROMPTS, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=G, help="completions per prompt")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    args = ap.parse_args()
    levels = {f: list(v) for f, v in json.loads(args.levels).items()}
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if not seeds:
        raise SystemExit("--seeds: give at least one seed")
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: run `sieve bootstrap` first")
    held = heldout_problems(levels, HELDOUT_PER_LEVEL)
    from pipeline.policy.model import load_policy, read_meta

    start_model, tok = load_policy(args.model)
    start = heldout(start_model, tok, held)
    shape = (args.prompts, args.group_size)
    runs = []
    for seed in seeds:
        data = problems(levels, seed, max(400, args.prompts * args.steps))
        common = (args.model, data, held, args.steps, args.lr, args.beta, *shape)
        sieve = run_sieve(*common, seed=seed)
        trl_res = run_trl(*common, seed=seed)
        speedup = trl_res["seconds_per_step"] / sieve["seconds_per_step"]
        runs.append({"seed": seed, "sieve": sieve, "trl": trl_res, "speedup": speedup})
        print(json.dumps(runs[-1]), flush=True)
    mean = {n: seed_mean(runs, n) for n in ("sieve", "trl")}
    result = {
        "benchmark": "trainer_vs_trl",
        "machine": {
            "cpus": torch.get_num_threads(),
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "model": str(args.model),
        "model_revision": read_meta(args.model).get("model_revision"),
        "steps": args.steps,
        "prompts_per_step": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": MAX_NEW,
        "lr": args.lr,
        "beta": args.beta,
        "levels": levels,
        "heldout_problems": held.height,
        "seeds": seeds,
        "start": start,
        "runs": runs,
        "mean": mean,
        "speedup": mean["trl"]["seconds_per_step"] / mean["sieve"]["seconds_per_step"],
        "speedup_median": mean["trl"]["median_seconds_per_step"]
        / mean["sieve"]["median_seconds_per_step"],
        "sieve_split_seconds": {
            k: statistics.fmean(r["sieve"]["split_seconds"][k] for r in runs)
            for k in ("sample", "score", "update")
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / f"{args.out}.png")
    keys = ("start", "mean", "speedup", "speedup_median", "sieve_split_seconds")
    print(json.dumps({k: result[k] for k in keys}, indent=1))


if __name__ == "__main__":
    main()
