"""Process rewards on the tiny policy: outcome-only vs outcome+steps GRPO at equal rollouts.

Issue 20, part 4. From the bootstrapped tiny policy, two arms train on the *same* prompts with
the same seed and the same GRPO settings (the headline benchmark's `BENCH_GRPO` on top of
`TINY_GRPO`: lr 2e-4 after a 20-step warm-up, β 0.02 fixed; 64 prompts × G = 8 = 512 rollouts
per step): fresh train-split problems of the tiny policy's learnable levels, arith 3 and 4 (the
"target levels" of `benchmarks/grpo_headroom.py`, its `fresh_items`; README "What training
achieves on the tiny policy"). They differ only in the advantage:

- `outcome`: GRPO's group-relative advantage of the verifier's reward (`advantage="outcome"`);
- `outcome+steps`: plus `step_weight` 0.5 × a group-relative advantage per checkable fragment
  on its tokens (`advantage="outcome+steps"`, `Scores.steps` from
  `pipeline.jobs.train.curriculum_batches.verifier_reward`). The tiny policy answers with a bare
  number, so its fragments are aligned prefixes of the answer: fragment k is right iff the first k
  characters match the gold's.

Measured at 0, half and all of the training rollouts (both arms share the start evaluation):
held-out pass@1 sampled (mean of 8 samples at T = 1) and greedy on the target levels (50
held-out problems per level); at the start and the end also every other family × level of the
generator mix (8 problems per level, a coarse forgetting check: `other_worst_sampled_change` is
the worst level's change); held-out *step correctness*, computed from the evaluation
completions themselves: the share of correct prefix fragments (`pipeline.scoring.steps.
check_steps`, as the ledger's `first_wrong_step` view holds them) per sampled completion,
averaged over the completions that have fragments. Along training, per step: the share of
groups that carry an outcome signal (1 − `zero_var_share`), the share whose only signal is
their fragments (computed here from the step's `Scores.steps` for both arms with
the trainer's cell rule, so the outcome arm shows what it leaves unused; the steps arm's trainer
metric `step_signal_share` beside it), the training pass rate and the training fragments'
correct share.

Run: `python benchmarks/process_rewards.py [--seeds 0] [--steps 32]` (the committed figures:
500 s wall for both arms on 2 cores shared with other work, 96–288 s of training per arm as the
load varied; 32 steps is what fits ~10 minutes there) or `--quick` (3 steps, a smaller
held-out set, → `process_rewards_quick.*`). Output: `benchmarks/results/process_rewards.json`
+ `.png` (held-out pass@1 on the target levels against training rollouts per arm; signal share
per step). Needs the bootstrapped tiny policy (`sieve bootstrap`).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

sys.path.insert(0, str(Path(__file__).parent))
from curriculum import BENCH_GRPO, MIX, QUIET
from grpo_headroom import G, fresh_items, prompt

from grpo_core.config import GRPOConfig
from grpo_core.seeds import seed_torch
from grpo_core.trainer import Item, Trainer
from grpo_core.types import Sample, Scores
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set, overall
from pipeline.jobs.train.curriculum_batches import verifier_reward
from pipeline.jobs.train.settings import TINY_GRPO, TINY_RECIPE_ROLLOUTS_PER_STEP
from pipeline.policy.model import load_policy
from pipeline.sampling.budget import SamplingConfig
from pipeline.sampling.group_sampler import HFGroupSampler
from pipeline.sampling.hf import HFSampler
from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"
TARGET = {"arith": [3, 4]}  # the tiny policy's learnable levels (grpo_headroom's target levels)
ARMS: dict[str, dict[str, Any]] = {
    "outcome": {"advantage": "outcome"},
    "outcome+steps": {"advantage": "outcome+steps", "step_weight": 0.5},
}
PROMPTS = TINY_RECIPE_ROLLOUTS_PER_STEP // G  # 64 prompts × G = 8 per step
SAMPLES = 8  # held-out samples per problem at T = 1


def heldout_problems(target_per_level: int, other_per_level: int) -> pl.DataFrame:
    """The target levels at `target_per_level` problems each, every other level of the mix at
    `other_per_level`; a `target` column says which."""
    frames = []
    for family in MIX:
        wanted = TARGET.get(family, [])
        for n, target in ((target_per_level, True), (other_per_level, False)):
            if target and not wanted:
                continue
            rows = heldout_set(n, [family]).filter(pl.col("level").is_in(wanted) == target)
            frames.append(rows.with_columns(pl.lit(target).alias("target")))
    return pl.concat(frames)


STEP_SQL = """
SELECT p.family, p.level, avg(w.correct_steps / w.steps) AS step_correct, count(*) AS completions
FROM first_wrong_step AS w
JOIN problems AS p USING (problem_id)
JOIN sampling_runs AS s USING (run_id)
WHERE s.temperature > 0
GROUP BY p.family, p.level
"""


def held_out(model: torch.nn.Module, tok: Any, problems: pl.DataFrame, rollouts: int) -> dict:
    """Held-out pass@1 (sampled, greedy) and step correctness, target levels vs the rest."""
    sampler = HFSampler(model=model, tokenizer=tok, model_name="bench")
    per_level = int(problems.group_by("family", "level").len()["len"].max())
    cfg = EvalConfig(per_level, SAMPLES, SamplingConfig(max_new_tokens=16))
    with Ledger.memory() as ledger:
        table = evaluate(sampler, ledger, "bench", {q: prompt(q) for q in problems["question"]},
                         cfg, problems.drop("target"))  # fmt: skip
        steps = ledger.sql(STEP_SQL)
    flags = problems.select("family", "level", "target").unique()
    table = (
        table.select("family", "level", "problems", "sampled", "greedy")
        .join(steps, on=["family", "level"], how="left")
        .join(flags, on=["family", "level"])
        .sort("family", "level")
    )
    target, other = table.filter(pl.col("target")), table.filter(~pl.col("target"))
    n = target["completions"].cast(pl.Float64).fill_null(0)
    point = {
        "rollouts": rollouts,
        "target_sampled": overall(target, "sampled"),
        "target_greedy": overall(target, "greedy"),
        "target_step_correct": float((target["step_correct"].fill_null(0) * n).sum() / n.sum()),
        "other_sampled_level_mean": float(other["sampled"].mean()) if other.height else None,
        "by_level": table.to_dicts(),
    }
    print(
        f"    {rollouts:>6} rollouts: target sampled {point['target_sampled']:.4f} greedy "
        f"{point['target_greedy']:.4f} step-correct {point['target_step_correct']:.4f}; other "
        f"levels (mean) sampled {point['other_sampled_level_mean']}",
        flush=True,
    )
    return point


def step_only_share(items: Sequence[Item], scores: Scores) -> tuple[float, float]:
    """(share of groups whose only signal is their fragments, training fragments' correct
    share) of one step's scores, by the trainer's rule: a group carries a step signal when some
    (fragment index) cell of it holds both a right and a wrong fragment. Samples arrive grouped:
    a group is a run of consecutive samples of the same item."""
    bounds = [i for i in range(len(items)) if i == 0 or items[i] is not items[i - 1]]
    groups = only = right = total = 0
    for start, end in zip(bounds, [*bounds[1:], len(items)], strict=True):
        correct = scores.correct[start:end]
        frags = (scores.steps or [None] * len(items))[start:end]
        cells: dict[int, set[bool]] = {}
        for f in frags:
            for k, (_, _, ok) in enumerate(f or ()):
                cells.setdefault(k, set()).add(bool(ok))
                right, total = right + bool(ok), total + 1
        outcome = len({c for c in correct if c is not None}) > 1
        groups += 1
        only += (not outcome) and any(len(v) > 1 for v in cells.values())
    return only / max(groups, 1), right / max(total, 1)


def run_arm(
    arm: str, seed: int, steps: int, evals: int, model_dir: Path, problems: pl.DataFrame,
    start: dict,
) -> dict[str, Any]:  # fmt: skip
    torch.manual_seed(seed)
    model, tok = load_policy(model_dir)
    pool = fresh_items(TARGET, 5 + 1000 * seed)  # the same prompts, in the same order, per arm
    if len(pool) < steps * PROMPTS:
        raise SystemExit(f"only {len(pool)} fresh problems for {steps} × {PROMPTS} prompts")
    per_step: list[dict[str, float | None]] = []

    def reward(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        scores = verifier_reward(items, samples, marker_required=False)  # raw format
        only, frag_correct = step_only_share(items, scores)
        per_step.append({"step_only_share": only, "train_fragment_correct": frag_correct})
        return scores

    values = {**TINY_GRPO, **BENCH_GRPO, "total_steps": steps, "seed": seed,
              "checkpoint_every": 0, **ARMS[arm]}  # fmt: skip
    seed_torch(seed)  # the trainer sets no process-wide torch state
    trainer = Trainer(
        model, tok, HFGroupSampler(HFSampler(model=model, tokenizer=tok)), reward,
        lambda s: pool[s * PROMPTS : (s + 1) * PROMPTS], GRPOConfig(**values), hooks=QUIET,
    )  # fmt: skip
    marks = {round(steps * (i + 1) / evals) for i in range(evals)}
    curve, spent, train_seconds = [start], 0, 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        out = trainer.run_step(step)
        trainer.step = step + 1
        train_seconds += time.perf_counter() - t0
        spent += int(out.metrics["rollouts"])
        m = out.metrics
        per_step[-1].update(
            outcome_signal_share=1.0 - m["zero_var_share"],
            pass_rate=m["pass_rate"],
            trainer_step_signal_share=m.get("step_signal_share"),
            step_token_share=m.get("step_token_share"),
            kl=m.get("kl", float("nan")),
        )
        per_step[-1]["seconds"] = time.perf_counter() - t0
        if step + 1 in marks:  # the other levels only at the end (held-out time is the cost)
            shown = problems if step + 1 == steps else problems.filter(pl.col("target"))
            curve.append(held_out(trainer.model, tok, shown, spent))
    end = curve[-1]
    before = {(r["family"], r["level"]): r["sampled"] for r in start["by_level"]}
    other_change = [
        r["sampled"] - before[(r["family"], r["level"])] for r in end["by_level"] if not r["target"]
    ]

    def mean(key: str) -> float | None:
        values = [v for s in per_step if (v := s[key]) is not None and v == v]  # not measured
        return float(np.mean(values)) if values else None

    return {
        "arm": arm,
        "seed": seed,
        "settings": ARMS[arm],
        "rollouts": spent,
        "train_seconds": train_seconds,
        "curve": curve,
        "target_sampled_change": end["target_sampled"] - start["target_sampled"],
        "target_greedy_change": end["target_greedy"] - start["target_greedy"],
        "target_step_correct_change": end["target_step_correct"] - start["target_step_correct"],
        "other_worst_sampled_change": float(min(other_change)),
        "other_mean_sampled_change": float(np.mean(other_change)),
        "outcome_signal_share": mean("outcome_signal_share"),
        "step_only_signal_share": mean("step_only_share"),
        "trainer_step_signal_share": mean("trainer_step_signal_share"),
        "step_token_share": mean("step_token_share"),
        "train_pass_rate_first_last_10": [float(np.mean([s["pass_rate"] for s in per_step[:10]])),
                                          float(np.mean([s["pass_rate"] for s in per_step[-10:]]))],
        "per_step": per_step,
    }  # fmt: skip


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"outcome": "tab:gray", "outcome+steps": "tab:green"}
    for run in result["runs"]:
        c, label = colors[run["arm"]], f"{run['arm']} seed {run['seed']}"
        xs = [p["rollouts"] for p in run["curve"]]
        a.plot(xs, [p["target_sampled"] for p in run["curve"]], marker="o", color=c,
               label=f"{label}: sampled")  # fmt: skip
        a.plot(xs, [p["target_greedy"] for p in run["curve"]], marker="s", ls="--", color=c,
               label=f"{label}: greedy")  # fmt: skip
        steps = np.arange(len(run["per_step"]))
        b.plot(steps, [s["outcome_signal_share"] for s in run["per_step"]], color=c,
               label=f"{label}: outcome signal")  # fmt: skip
        b.plot(steps, [s["step_only_share"] for s in run["per_step"]], ls=":", color=c,
               label=f"{label}: fragment-only signal")  # fmt: skip
    a.set_xlabel("training rollouts")
    a.set_ylabel("held-out pass@1, arith 3-4")
    a.set_title("held-out pass@1 on the target levels")
    b.set_xlabel("step")
    b.set_ylabel("share of groups")
    b.set_title("groups carrying signal per step")
    for ax in (a, b):
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--quick", action="store_true", help="3 steps, a small held-out set")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (prompts and GRPO)")
    ap.add_argument("--steps", type=int, default=32, help="optimiser steps per arm (512 each)")
    ap.add_argument("--arms", default=",".join(ARMS))
    args = ap.parse_args()
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: run `sieve bootstrap` first")
    steps, evals = (3, 1) if args.quick else (args.steps, 2)
    problems = heldout_problems(*((20, 4) if args.quick else (50, 8)))
    started = time.perf_counter()
    model, tok = load_policy(args.model)
    print("start (shared by both arms)", flush=True)
    start = held_out(model, tok, problems, 0)
    del model
    runs = []
    for seed in map(int, args.seeds.split(",")):
        for arm in args.arms.split(","):
            print(f"arm {arm} seed {seed}", flush=True)
            r = run_arm(arm, seed, steps, evals, args.model, problems, start)
            print(
                f"  {r['train_seconds']:.0f} s training; target sampled "
                f"{100 * r['target_sampled_change']:+.1f} greedy "
                f"{100 * r['target_greedy_change']:+.1f} step-correct "
                f"{100 * r['target_step_correct_change']:+.1f} points; other levels worst "
                f"{100 * r['other_worst_sampled_change']:+.1f}; signal: outcome "
                f"{r['outcome_signal_share']:.3f} fragment-only {r['step_only_signal_share']:.3f}",
                flush=True,
            )
            runs.append(r)
    name = "process_rewards_quick" if args.quick else "process_rewards"
    result = {
        "benchmark": "process_rewards",
        "mode": "quick" if args.quick else "full",
        "model": str(args.model),
        "settings": {
            "grpo": {**TINY_GRPO, **BENCH_GRPO, "total_steps": steps},
            "arms": ARMS,
            "target_levels": TARGET,
            "prompts_per_step": PROMPTS,
            "G": G,
            "heldout_samples": SAMPLES,
            "heldout_problems": problems.group_by("target").len().to_dicts(),
        },
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cpus": torch.get_num_threads(),
        },
        "wall_seconds": time.perf_counter() - started,
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / f"{name}.png")
    print(f"wrote {RESULTS / name}.json and .png ({result['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
