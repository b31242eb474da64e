"""Sampling throughput of the `hf` backend: grouped sampling vs a one-completion-at-a-time loop.

For G in (4, 8, 32): the same prompts (held-out problems of every family), G completions each,
temperature 1, 12 new tokens, through `HFSampler.sample` (prompts encoded once, expanded to G
rows, length-sorted micro-batches, KV cache) and through a plain loop that calls
`model.generate` once per completion. Two random-init models: the tiny policy (~0.9 M
parameters) and a larger Llama (~10 M) so the trend with model size is visible. Random weights
rarely emit <eos>, so almost every completion runs to the token limit in both arms. Each arm
makes one small untimed warm-up call first.

Run: `python benchmarks/sampling.py [--prompts 24]`
Writes benchmarks/results/sampling.json and sampling.png.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from pipeline.policy.evaluate import heldout_set
from pipeline.policy.model import TinySize, create_tiny_model, load_policy
from pipeline.sampling.base import SamplingParams
from pipeline.sampling.hf import HFSampler

RESULTS = Path(__file__).parent / "results"
MODELS = {
    "tiny (0.9M)": TinySize(),
    "larger (10M)": TinySize(
        hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6
    ),
}
GROUPS = (4, 8, 32)
NEW_TOKENS = 12


def prompts(count: int) -> list[str]:
    problems = heldout_set(4)
    picked = problems.sample(n=count, seed=0, shuffle=True)
    return [f"{q}=" for q in picked["question"]]


@torch.no_grad()
def loop_baseline(folder: Path, texts: list[str], g: int) -> tuple[int, int, float]:
    """One `generate` call per completion: (completions, new tokens, seconds)."""
    model, tokenizer = load_policy(folder)
    warm = tokenizer(texts[0], return_tensors="pt")["input_ids"]
    model.generate(warm, max_new_tokens=2, pad_token_id=tokenizer.pad_token_id)  # not timed
    torch.manual_seed(0)
    tokens, start = 0, time.perf_counter()
    for text in texts:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        for _ in range(g):
            out = model.generate(
                ids,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=NEW_TOKENS,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            tokens += out.shape[1] - ids.shape[1]
    return len(texts) * g, tokens, time.perf_counter() - start


def grouped(folder: Path, texts: list[str], g: int) -> tuple[int, int, float]:
    sampler = HFSampler(folder, device="cpu")
    params = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0)
    sampler.sample(texts[:2], 2, SamplingParams(max_new_tokens=2))  # warm-up, not timed
    start = time.perf_counter()
    groups = sampler.sample(texts, g, params)
    seconds = time.perf_counter() - start
    return sum(len(x) for x in groups), sum(c.n_tokens for x in groups for c in x), seconds


def measure(folder: Path, texts: list[str]) -> list[dict]:
    rows = []
    for g in GROUPS:
        for arm, fn in (("grouped", grouped), ("loop", loop_baseline)):
            completions, tokens, seconds = fn(folder, texts, g)
            rows.append(
                {
                    "G": g,
                    "arm": arm,
                    "completions": completions,
                    "new_tokens": tokens,
                    "seconds": seconds,
                    "completions_per_s": completions / seconds,
                    "tokens_per_s": tokens / seconds,
                }
            )
            print(json.dumps({"model_G_arm": [folder.name, g, arm], **rows[-1]}), flush=True)
    return rows


def speedups(rows: list[dict]) -> dict[str, float]:
    by = {(r["G"], r["arm"]): r["completions_per_s"] for r in rows}
    return {f"G={g}": by[(g, "grouped")] / by[(g, "loop")] for g in GROUPS}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(result["models"]), figsize=(11, 4), sharey=False)
    for ax, (name, entry) in zip(axes, result["models"].items(), strict=True):
        for arm, color in (("grouped", "tab:green"), ("loop", "tab:gray")):
            rates = [r["completions_per_s"] for r in entry["rows"] if r["arm"] == arm]
            ax.plot(GROUPS, rates, marker="o", color=color, label=arm)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(GROUPS, [str(g) for g in GROUPS])
        ax.set_xlabel("G (completions per prompt)")
        ax.set_ylabel("completions / s (log)")
        ups = ", ".join(f"{k}: {v:.1f}x" for k, v in entry["speedup"].items())
        ax.set_title(f"{name}\n{ups}", fontsize=9)
        ax.legend()
    fig.suptitle(f"hf backend on {result['machine']['cpus']} CPU cores, {NEW_TOKENS} new tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=24)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    texts = prompts(args.prompts)
    result: dict = {
        "benchmark": "sampling",
        "machine": {"cpus": len(os.sched_getaffinity(0)), "torch": torch.__version__},
        "prompts": len(texts),
        "new_tokens": NEW_TOKENS,
        "models": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, size in MODELS.items():
            folder = Path(tmp) / name.split()[0]
            create_tiny_model(folder, seed=0, size=size)
            model, _ = load_policy(folder)
            rows = measure(folder, texts)
            result["models"][name] = {
                "parameters": sum(p.numel() for p in model.parameters()),
                "rows": rows,
                "speedup": speedups(rows),
            }
    (RESULTS / "sampling.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "sampling.png")
    print(json.dumps({k: v["speedup"] for k, v in result["models"].items()}, indent=2))


if __name__ == "__main__":
    main()
