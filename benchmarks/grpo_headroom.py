"""Where GRPO helps the bootstrapped tiny policy, and where it breaks it.

From the same bootstrapped weights, each arm runs the same GRPO settings (lr 2e-4 with a 30-step
warm-up, β 0.02 to a frozen reference, 16 prompts × G = 8 per step, 300 steps) on a different
prompt source, then measures held-out pass@1 (the mean of 8 samples at T = 1, greedy beside it;
30 held-out problems per level, never trained on) per family × level:

- `mid_fresh`: fresh train-split problems of the policy's middle levels (sampled pass@1 in
  [0.15, 0.7] before training) — the "target levels";
- `all_fresh`: fresh problems of every level the policy solves at all (sampled ≥ 0.02), i.e. the
  middle levels plus the rarely solved ones;
- `curated`: Sieve's default two-stage curriculum (screen G = 8 → refine G = 32) over the trained
  family, trained as `sieve train` does (128 rollouts per step, stage 1 then stage 2);
- `curated_stage1`: the same curation with stage 2 switched off and a higher band floor
  (`hard_max_p` 0.01, `band_low` 0.15): only mid-band prompts;
- `mid_fresh_p64`, `curated_p64`: `mid_fresh` and `curated` with 64 prompts per step for 150
  steps (less noise per update; is the collapse just batch noise?);
- `curated_target_wide_p64`: Sieve curation of 4,000 candidates from the target levels only,
  stage 2 off, the stage-1 band opened to [0.02, 1] and replay share 0.5; 64 prompts × 150;
- `curated_target_lean_p64`: the same from 2,000 candidates with a cheaper curation (no refine
  of 0/8 prompts, refine G = 8): the learning test's recipe (tests/test_learning.py).

Output: `benchmarks/results/grpo_headroom.json` + `.png` (gain per level and arm; training pass
rate along the run). Run: `python benchmarks/grpo_headroom.py [--model DIR] [--arms a,b]`
(~11 min on 2 cores; re-running some arms on the same weights replaces only those in the JSON).
Needs the bootstrapped tiny policy (`sieve bootstrap`).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from flows.curate import curate
from grpo_core.config import GRPOConfig
from grpo_core.seeds import seed_torch
from grpo_core.trainer import Hooks, Item, Trainer
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set
from pipeline.jobs.curate.curation import policy_for
from pipeline.jobs.train.curriculum_batches import (
    CurriculumBatches,
    curriculum_frame,
    raw_verifier_reward,
)
from pipeline.policy.model import load_policy
from pipeline.problems import generate_mix
from pipeline.sampling.budget import SamplingConfig
from pipeline.sampling.group_sampler import HFGroupSampler
from pipeline.sampling.hf import HFSampler
from pipeline.selection import TINY_CURATE, CurateConfig
from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True)
class Arm:
    """One prompt source and batch shape; every arm shares GRPO below."""

    # "mid": fresh problems of the target levels; "solved": of every level solved at all;
    # "curate": a Sieve curriculum
    source: str
    per_step: int = 16  # prompts per optimiser step (× G = 8 rollouts)
    steps: int = 300
    curate: dict[str, Any] = field(default_factory=dict)  # CurateConfig overrides
    candidates: int = 2000
    target_only: bool = False  # curate from the target levels only (else the whole family)


# stage 2 off, the stage-1 band opened to 0.02 <= p <= 1, half as many replayed all-correct
# prompts as stage 1, a cheaper refine
WIDE = {"hard_max_p": 0.01, "refine_g": 16, "band_low": 0.02, "band_high": 1.0, "replay_share": 0.5}
# WIDE with a cheaper curation: 0/8 prompts are not refined (that only feeds stage 2), the refine
# adds G = 8 — the tiny policy's curation recipe, pipeline.selection.TINY_CURATE
LEAN: dict[str, Any] = dict(TINY_CURATE)
# the *_p64 arms spend 4x the rollouts per step for half the steps (less noise per update)
ARMS = {
    "mid_fresh": Arm("mid"),
    "all_fresh": Arm("solved"),
    "curated": Arm("curate"),
    "curated_stage1": Arm("curate", curate={"hard_max_p": 0.01, "band_low": 0.15}),
    "mid_fresh_p64": Arm("mid", 64, 150),
    "curated_p64": Arm("curate", 64, 150),
    "curated_target_wide_p64": Arm("curate", 64, 150, WIDE, 4000, target_only=True),
    "curated_target_lean_p64": Arm("curate", 64, 150, LEAN, 2000, target_only=True),
}
LEVELS = {"arith": [1, 2, 3, 4, 5, 6], "linear": [1, 2, 3, 4], "modular": [1, 2, 3, 4]}
GRPO = {"lr": 2e-4, "lr_warmup_steps": 30, "beta": 0.02, "beta_schedule": "fixed",
        "max_new_tokens": 16, "checkpoint_every": 0}  # fmt: skip
G, PER_LEVEL, SAMPLES = 8, 30, 8
MID = (0.15, 0.7)
SOLVED_AT_ALL = 0.02


def prompt(question: str) -> str:
    return f"{question}="


def heldout(model: torch.nn.Module, tok: Any) -> pl.DataFrame:
    frames = [
        heldout_set(PER_LEVEL, [f]).filter(pl.col("level").is_in(v)) for f, v in LEVELS.items()
    ]
    problems = pl.concat(frames)
    sampler = HFSampler(model=model, tokenizer=tok)
    with Ledger.memory() as ledger:
        cfg = EvalConfig(PER_LEVEL, SAMPLES, SamplingConfig(max_new_tokens=16))
        return evaluate(sampler, ledger, "bench", {q: prompt(q) for q in problems["question"]},
                        cfg, problems)  # fmt: skip


def fresh_items(levels: dict[str, list[int]], seed: int) -> list[Item]:
    pool = generate_mix(levels, 40_000, seed).filter(pl.col("split") == "train")
    pool = pool.sample(fraction=1.0, shuffle=True, seed=seed)
    rows = zip(pool["question"], pool["answer"], pool["verifier"], strict=True)
    return [Item(prompt(q), a, G, verifier=v) for q, a, v in rows]


def cells(table: pl.DataFrame, low: float, high: float) -> dict[str, list[int]]:
    picked = table.filter((pl.col("sampled") >= low) & (pl.col("sampled") <= high))
    out: dict[str, list[int]] = {}
    for family, level in picked.select("family", "level").rows():
        out.setdefault(family, []).append(int(level))
    return out


def curated_batches(
    model_dir: Path, mix: dict[str, str], arm: Arm, seed: int
) -> tuple[CurriculumBatches, dict]:
    with Ledger.memory() as ledger:
        cfg = CurateConfig(n_candidates=arm.candidates, mix=mix, seed=1 + 1000 * seed, **arm.curate)
        result = curate(ledger, policy_for(model_dir), cfg)
        frame = curriculum_frame(ledger, result.curriculum_id)
    composition = (
        frame.group_by("family", "level", "stage")
        .agg(pl.len().alias("items"), pl.col("group_size").mean().alias("mean_g"))
        .sort("family", "level", "stage")
    )
    prompts = [prompt(q) for q in frame["question"]]
    batches = CurriculumBatches(frame, prompts, arm.per_step * G, arm.steps, seed)
    info = {"curation_rollouts": sum(result.rollouts.values()), "items": frame.height,
            "composition": composition.to_dicts()}  # fmt: skip
    return batches, info


def run_arm(
    name: str, model_dir: Path, before: pl.DataFrame, family: str, seed: int = 0
) -> dict[str, Any]:
    arm = ARMS[name]
    torch.manual_seed(seed)
    model, tok = load_policy(model_dir)
    mid = cells(before, *MID)
    info: dict[str, Any] = {}
    batches: Callable[[int], list[Item]]
    if arm.source == "curate":
        levels = {f: ",".join(map(str, v)) for f, v in mid.items()}
        batches, info = curated_batches(
            model_dir, levels if arm.target_only else {family: "all"}, arm, seed
        )
    else:
        chosen = mid if arm.source == "mid" else cells(before, SOLVED_AT_ALL, 1.0)
        items = fresh_items(chosen, 5 + 1000 * seed)
        info["levels"] = chosen

        def batches(step: int) -> list[Item]:
            return items[step * arm.per_step : (step + 1) * arm.per_step]

    info.update(prompts_per_step=arm.per_step, steps=arm.steps)
    cfg = GRPOConfig(**GRPO, total_steps=arm.steps, seed=seed)
    sampler = HFGroupSampler(HFSampler(model=model, tokenizer=tok))
    seed_torch(cfg.seed, cfg.deterministic)  # the trainer sets no process-wide torch state
    trainer = Trainer(
        model, tok, sampler, raw_verifier_reward, batches, cfg, hooks=Hooks(warning=lambda m: None)
    )
    started = time.perf_counter()
    history = trainer.train()
    seconds = time.perf_counter() - started
    after = heldout(trainer.model, tok)
    target_cells = pl.DataFrame(
        [(f, lv) for f, v in mid.items() for lv in v],
        schema={"family": pl.String, "level": before.schema["level"]},
        orient="row",
    ).with_columns(pl.lit(True).alias("target"))
    table = (
        before.rename({"greedy": "greedy_before", "sampled": "sampled_before"})
        .join(after.select("family", "level", "greedy", "sampled"), on=["family", "level"])
        .with_columns((pl.col("sampled") - pl.col("sampled_before")).alias("sampled_gain"),
                      (pl.col("greedy") - pl.col("greedy_before")).alias("greedy_gain"))
        .join(target_cells, on=["family", "level"], how="left")
        .with_columns(pl.col("target").fill_null(False))
    )  # fmt: skip
    target, other = table.filter(pl.col("target")), table.filter(~pl.col("target"))
    curve = [float(np.mean([h["pass_rate"] for h in history[i : i + 25]]))
             for i in range(0, len(history), 25)]  # fmt: skip
    return {
        "arm": name,
        **info,
        "train_seconds": seconds,
        "target_levels": mid,
        "target_sampled_gain": float(target["sampled_gain"].mean()),
        "target_greedy_gain": float(target["greedy_gain"].mean()),
        "other_mean_sampled_gain": float(other["sampled_gain"].mean()),
        "other_worst_sampled_gain": float(other["sampled_gain"].min()),
        "train_pass_rate_every_25_steps": curve,
        "kl_end": float(np.mean([h["kl"] for h in history[-25:]])),
        "by_level": table.to_dicts(),
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    arms = result["arms"]
    labels = [f"{r['family']} {r['level']}" for r in arms[0]["by_level"]]
    x = np.arange(len(labels))
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        gains = [100 * r["sampled_gain"] for r in arm["by_level"]]
        name = arm["arm"] + (f" seed {arm['seed']}" if arm.get("seed") else "")
        left.bar(x + i * width, gains, width, label=name)
        curve = arm["train_pass_rate_every_25_steps"]
        right.plot(np.arange(len(curve)) * 25, curve, marker="o", label=name)
    left.axhline(0, color="black", lw=0.5)
    left.set_xticks(x + 0.4 - width / 2, labels, rotation=60, fontsize=8)
    left.set_ylabel("held-out sampled pass@1 change (points)")
    left.set_title("gain per level after 300 GRPO steps")
    left.legend(fontsize=8)
    right.set_xlabel("step")
    right.set_ylabel("training pass rate (25-step mean)")
    right.set_title("training pass rate")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--family", default="arith", help="family the curated arms curate from")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (data, curation, GRPO)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model, tok = load_policy(args.model)
    before = heldout(model, tok)
    del model
    arms = []
    for arm in args.arms.split(","):
        for seed in map(int, args.seeds.split(",")):
            print(f"arm {arm} seed {seed} ...", flush=True)
            r = {**run_arm(arm, args.model, before, args.family, seed), "seed": seed}
            curve = [round(v, 2) for v in r["train_pass_rate_every_25_steps"]]
            print(
                f"  target {r['target_levels']}: sampled {100 * r['target_sampled_gain']:+.1f} "
                f"greedy {100 * r['target_greedy_gain']:+.1f}; others worst "
                f"{100 * r['other_worst_sampled_gain']:+.1f}; train pass rate {curve}",
                flush=True,
            )
            arms.append(r)
    meta = json.loads((args.model / "sieve.json").read_text())
    result = {
        "model_revision": meta.get("model_revision"),
        "settings": {
            **GRPO,
            "G": G,
            "per_level": PER_LEVEL,
            "samples": SAMPLES,
            "mid_band": MID,
        },
        "before": before.to_dicts(),
        "arms": arms,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": torch.get_num_threads(),
        },
    }
    path = RESULTS / "grpo_headroom.json"
    if path.exists():  # keep the arms of earlier runs on the same weights, replace re-run ones
        old = json.loads(path.read_text())
        if old.get("model_revision") == result["model_revision"]:
            ran = {(a["arm"], a.get("seed", 0)) for a in arms}
            kept = [a for a in old["arms"] if (a["arm"], a.get("seed", 0)) not in ran]
            runs = kept + arms
            result["arms"] = sorted(
                runs, key=lambda a: (list(ARMS).index(a["arm"]), a.get("seed", 0))
            )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grpo_headroom.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / "grpo_headroom.png")
    print(f"wrote {RESULTS / 'grpo_headroom.json'} and .png")


if __name__ == "__main__":
    main()
