"""The headline benchmark: held-out accuracy per rollout spent — Sieve vs the usual ways.

Same starting policy (the bootstrapped tiny model), same trainer settings, same total rollout
budget per arm *including every rollout spent on curation or on filtering*, several seeds, and
held-out problems (a fixed hash split, never used for curation or training) over the *whole*
generator mix — every family and level — so a method that gains on middle levels and forgets the
easy ones shows that loss. Arms:

- `uniform`: GRPO on prompts drawn uniformly from the generator mix (G = 8);
- `dapo`: DAPO dynamic sampling — sample groups of uniformly drawn prompts online, drop the
  zero-variance ones, refill until the batch is full (Yu et al. 2025);
- `pilot_commit`: pilot each drawn prompt with G = 16, keep 0.125 ≤ p ≤ 0.75, commit to 48
  samples in total for the kept ones (the Pilot-Commit recipe);
- `sieve`: per night, offline curation with the current weights (candidates spread over family ×
  level cells by the ledger's history, screen G = 8 → refine 8 more), then GRPO on the night's
  curriculum; nights repeat while the budget lasts. The curation settings are `SIEVE_CURATE`,
  the tiny policy's recipe `pipeline.selection.TINY_CURATE` (from what `benchmarks/
  grpo_headroom.py` found to learn: stage 2 off, the band opened to [0.02, 1], half as many
  replayed solved prompts as mid-band ones).
- `sieve_every_rollout` ("Sieve + every rollout counts", issue 30 points 2-3): `sieve`, with
  each curriculum prompt's first training visit replaying its stored screen/refine samples
  (`grpo_core.history.replay_curation`; they were counted once, as curation) and the GRESO-style
  skip of prompts whose recent groups, curation and training, were all zero-variance
  (`ZeroVarSkip`, its streaks carried from night to night; the skipped rollouts buy more steps).
- `sieve_replay` and `sieve_skip`: the two halves of `sieve_every_rollout` apart (replay alone,
  skip alone), to say what each buys.

Every arm trains with the same GRPO settings (`BENCH_GRPO`: lr 2e-4 after a 20-step warm-up,
β 0.02) and 512 rollouts per optimiser step, 64 prompts × G = 8 (16 prompts per step was too noisy
to learn in grpo_headroom); DAPO and pilot-commit spend more per step because they discard
groups, and their discarded rollouts count. Held-out pass@1 — the mean over
samples at the training temperature, with greedy beside it — is measured at regular rollout
marks. Output: `benchmarks/results/curriculum.json` + `.png` (held-out pass@1 against cumulative
rollouts per arm, mean and spread over seeds; `rollouts_to_uniform_final` per arm — where the
seed-mean curve first reaches uniform's mean final accuracy, null if never, with the per-seed
crossings and the ratio to uniform's own beside it; final accuracies; zero-variance share over
training; wall time).

Run: `python benchmarks/curriculum.py --quick` (one seed, ~6 min, → `curriculum_quick.*`) or
`python benchmarks/curriculum.py` (three seeds, the committed figures, ~20 min on 2 cores).
`--resummarise` recomputes the summary and the PNG from the JSON. Needs the bootstrapped tiny
policy (`sieve bootstrap`).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from flows.curate import curate
from grpo_core.collect import dynamic_sampling, pilot_commit
from grpo_core.config import GRPOConfig
from grpo_core.history import ZeroVarSkip, replay_curation
from grpo_core.seeds import derive_seed, seed_torch
from grpo_core.trainer import Hooks, Item, Trainer
from pipeline.batches import CurriculumBatches, curriculum_frame, raw_verifier_reward
from pipeline.curate import Policy
from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set, overall
from pipeline.policy.model import load_policy, model_revision
from pipeline.problems import FAMILIES, family_levels, generate_mix
from pipeline.recipes import TINY_GRPO, TINY_RECIPE_GRPO, TINY_RECIPE_ROLLOUTS_PER_STEP
from pipeline.replay import curation_visits, stored_groups
from pipeline.sampling.budget import SamplingConfig
from pipeline.sampling.hf import HFSampler
from pipeline.sampling.training import HFGroupSampler
from pipeline.selection import TINY_CURATE, CurateConfig
from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"
ARMS = ("uniform", "dapo", "pilot_commit", "sieve", "sieve_every_rollout")
# the halves of sieve_every_rollout: (replay curation samples, skip zero-variance prompts)
SIEVE_ARMS = {
    "sieve": (False, False),
    "sieve_replay": (True, False),
    "sieve_skip": (False, True),
    "sieve_every_rollout": (True, True),
}
MIX = {f: list(family_levels(f)) for f in FAMILIES}  # the whole generator mix
G = 8
# the trainer settings of every arm (on top of TINY_GRPO) and sieve's curation: the tiny
# policy's recipe, as `sieve demo` uses it (pipeline.train / pipeline.selection.config)
BENCH_GRPO: dict[str, Any] = {**TINY_RECIPE_GRPO, "beta": 0.02, "beta_schedule": "fixed"}
SIEVE_CURATE: dict[str, Any] = dict(TINY_CURATE)

QUIET = Hooks(warning=lambda m: None)  # the trainer's warnings are not shown


@dataclass(frozen=True)
class Setup:
    budget: int  # rollouts per arm, curation included
    evals: int  # held-out evaluations along the way (plus one at 0)
    per_level: int  # held-out problems per family × level
    samples: int  # samples per held-out problem (mean = sampled pass@1)
    seeds: tuple[int, ...]
    candidates: int  # sieve: candidates curated per night
    # every arm: rollouts per optimiser step (prompts × G = 8)
    rollouts_per_step: int = TINY_RECIPE_ROLLOUTS_PER_STEP
    grpo: dict[str, Any] = field(default_factory=lambda: dict(BENCH_GRPO))
    # sieve: training per night in passes over its curriculum; 0 = as many rollouts as the
    # night's curation cost (the committed run). A cap trades training for more nights.
    passes: float = 0.0
    # sieve: training rollouts per night as a multiple of the night's curation cost (when
    # `passes` is 0)
    train_ratio: float = 2.0
    # sieve: CurateConfig overrides
    curate: dict[str, Any] = field(default_factory=lambda: dict(SIEVE_CURATE))

    @property
    def prompts_per_step(self) -> int:
        return max(1, self.rollouts_per_step // G)


# the sieve settings were chosen on quick runs of seed 0 (README); the full run uses other seeds
QUICK = Setup(budget=96_000, evals=4, per_level=20, samples=8, seeds=(0,), candidates=800)
FULL = Setup(budget=96_000, evals=8, per_level=20, samples=8, seeds=(1, 2, 3), candidates=800)


def prompt(q: str) -> str:
    return f"{q}="


def uniform_pool(seed: int, n: int) -> list[Item]:
    """Train-split problems drawn uniformly over the whole mix, as G = 8 items."""
    frame = generate_mix(MIX, n, 10_000 + seed).filter(pl.col("split") == "train")
    frame = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    return [
        Item(prompt(q), a, G, key=p, verifier=v)
        for q, a, p, v in zip(
            frame["question"], frame["answer"], frame["problem_id"], frame["verifier"], strict=True
        )
    ]


class Tracker:
    """Held-out evaluations at rollout marks; the curve of one arm × seed."""

    def __init__(self, setup: Setup, heldout: pl.DataFrame, tokenizer: Any):
        self.setup, self.heldout, self.tokenizer = setup, heldout, tokenizer
        self.marks = [round(setup.budget * (i + 1) / setup.evals) for i in range(setup.evals)]
        self.curve: list[dict[str, Any]] = []

    def due(self, spent: int) -> bool:
        return bool(self.marks) and spent >= self.marks[0]

    def evaluate(self, model: torch.nn.Module, spent: int) -> None:
        while self.marks and spent >= self.marks[0]:
            self.marks.pop(0)
        s = self.setup
        sampler = HFSampler(model=model, tokenizer=self.tokenizer, model_name="bench")
        prompts_of = {q: prompt(q) for q in self.heldout["question"]}
        cfg = EvalConfig(s.per_level, s.samples, SamplingConfig(max_new_tokens=16))
        with Ledger.memory() as ledger:
            table = evaluate(sampler, ledger, "bench", prompts_of, cfg, self.heldout)
        point = {
            "rollouts": spent,
            "sampled": overall(table, "sampled"),
            "greedy": overall(table, "greedy"),
            "by_level": table.select("family", "level", "sampled", "greedy").to_dicts(),
        }
        self.curve.append(point)
        print(
            f"    {spent:>7} rollouts: sampled {point['sampled']:.4f} greedy {point['greedy']:.4f}"
        )


def grpo_config(setup: Setup, seed: int, steps: int) -> GRPOConfig:
    values = {**TINY_GRPO, **setup.grpo, "total_steps": steps, "seed": seed, "checkpoint_every": 0}
    return GRPOConfig(**values)


def train_until(
    trainer: Trainer,
    tracker: Tracker,
    spent0: int,
    budget: int,
    zero_var: list[float],
    counts: dict[str, float] | None = None,
) -> int:
    """Run steps until the arm's budget is spent (evaluating at marks); returns rollouts spent.
    `counts` sums the steps' fresh, replayed and skipped counts."""
    spent = spent0
    counts = {} if counts is None else counts
    while spent < budget:
        out = trainer.run_step(trainer.step)
        trainer.step += 1
        spent += int(out.metrics["rollouts"])
        zero_var.append(out.metrics["zero_var_share"])
        for key in ("rollouts", "replayed_rollouts", "skipped_zero_var"):
            counts[f"train_{key}"] = counts.get(f"train_{key}", 0.0) + out.metrics.get(key, 0.0)
        if tracker.due(spent):
            tracker.evaluate(trainer.model, spent)
    return spent


def run_arm(arm: str, setup: Setup, seed: int, model_dir: Path, heldout: pl.DataFrame) -> dict:
    torch.manual_seed(seed)
    model, tok = load_policy(model_dir)
    tracker = Tracker(setup, heldout, tok)
    tracker.evaluate(model, 0)
    sampler = HFGroupSampler(HFSampler(model=model, tokenizer=tok))
    zero_var: list[float] = []
    started = time.perf_counter()
    steps = setup.budget // setup.rollouts_per_step + 10  # an upper bound; the budget stops it
    pool = uniform_pool(seed, setup.budget)
    per_step = setup.prompts_per_step
    committed = max(1, setup.rollouts_per_step // 48)  # pilot-commit: prompts of 48 per step

    def draw(step: int, round_: int, k: int = per_step) -> list[Item]:
        rng = np.random.default_rng(derive_seed(seed, "draw", step, round_))
        return [pool[int(i)] for i in rng.choice(len(pool), size=k, replace=False)]

    nights: list[dict[str, int]] = []  # sieve: what each night's curation cost and kept
    if arm in ("uniform", "dapo", "pilot_commit"):
        collector = {
            "uniform": None,
            "dapo": dynamic_sampling(draw, target=per_step, max_rounds=8),
            "pilot_commit": pilot_commit(
                lambda s, r: draw(s, r, 3 * committed),
                target=committed,
                pilot_g=16,
                total_g=48,
                max_rounds=4,
            ),
        }[arm]
        seed_torch(seed)  # the trainer sets no process-wide torch state
        trainer = Trainer(
            model, tok, sampler, raw_verifier_reward, lambda s: draw(s, 0),
            grpo_config(setup, seed, steps), collector=collector, hooks=QUIET,
        )  # fmt: skip
        spent = train_until(trainer, tracker, 0, setup.budget, zero_var)
    else:
        replay, skip = SIEVE_ARMS[arm]
        spent = sieve_nights(
            setup, seed, model, tok, sampler, tracker, zero_var, nights, replay, skip
        )
    if not tracker.curve or tracker.curve[-1]["rollouts"] != spent:
        tracker.evaluate(model, spent)
    return {
        "arm": arm,
        "seed": seed,
        "curve": tracker.curve,
        "rollouts": spent,
        "curation_rollouts": sum(n["curation_rollouts"] for n in nights),
        "nights": nights,
        "zero_var_share": float(np.nanmean(zero_var)) if zero_var else math.nan,
        "seconds": time.perf_counter() - started,
    }


def sieve_nights(
    setup: Setup,
    seed: int,
    model: torch.nn.Module,
    tok: Any,
    sampler: HFGroupSampler,
    tracker: Tracker,
    zero_var: list[float],
    nights: list[dict[str, int]],
    replay: bool = False,
    skip_flat: bool = False,
) -> int:
    """Nights of curate (ledger history carried over) → train, until the budget is spent;
    `replay`: first visits train on the stored curation samples, `skip_flat`: the GRESO-style
    skip over curation and training streaks.

    Appends each night's curation cost, candidates and kept prompts to `nights` (with replay or
    skip: replayed and fresh training rollouts and skips too); returns the rollouts spent."""
    spent = 0
    night = 0
    trainer: Trainer | None = None
    skip = ZeroVarSkip(seed=seed)  # skip_flat: streaks over curation and training, all nights
    with Ledger.memory() as ledger:
        while spent < setup.budget:
            cfg = CurateConfig(
                n_candidates=setup.candidates,
                mix={f: "all" for f in FAMILIES},
                seed=1_000 * seed + night,
                chunk_size=512,
                **setup.curate,
            )
            hf = HFSampler(model=model, tokenizer=tok, model_name="bench")
            policy = Policy(hf, model_revision(model), lambda qs: [prompt(q) for q in qs])
            result = curate(ledger, policy, cfg)
            cost = sum(result.rollouts.values())
            spent += cost
            kept = result.items.height
            nights.append(
                {"curation_rollouts": cost, "candidates": result.candidates, "kept": kept}
            )
            print(
                f"    night {night}: curation {cost} rollouts, kept {result.items.height} "
                f"(stages {result.items['stage'].value_counts().sort('stage').rows()})"
            )
            if tracker.due(spent):
                tracker.evaluate(model, spent)
            if result.items.is_empty() or spent >= setup.budget:
                night += 1
                continue
            frame = curriculum_frame(ledger, result.curriculum_id)
            # a night trains for train_ratio × its curation cost in rollouts (at least one pass),
            # or for `passes` passes over its curriculum when set
            collector = None
            if replay or skip_flat:
                gcfg = grpo_config(setup, seed, 1)
                runs = [result.screen_run, result.refine_run]
                groups: dict[str, Any] = {}
                if skip_flat:
                    visits = curation_visits(ledger, runs)
                    skip.observe_flags(
                        visits["problem_id"].to_list(),
                        visits["flat"].to_list(),
                        visits["size"].to_list(),  # a flat group counts by its size
                    )
                if replay:
                    stored = stored_groups(ledger, runs, tok, temperature=gcfg.temperature,
                                           max_new_tokens=gcfg.max_new_tokens)  # fmt: skip
                    groups = stored.groups
                    nights[-1]["retokenised_off"] = stored.retokenised_off
                step0 = trainer.step if trainer is not None else 0
                collector = replay_curation(groups, start=step0, skip=skip if skip_flat else None)
            one_pass = int(frame["group_size"].sum())
            by_cost = max(int(setup.train_ratio * cost), one_pass)
            length = by_cost if not setup.passes else int(setup.passes * one_pass)
            night_budget = min(setup.budget, spent + length)
            steps = max(1, (night_budget - spent) // setup.rollouts_per_step)
            batches = CurriculumBatches(
                frame, [prompt(q) for q in frame["question"]], setup.rollouts_per_step, steps, seed
            )
            step0 = trainer.step if trainer is not None else 0
            seed_torch(seed + night)  # the trainer sets no process-wide torch state
            trainer = Trainer(
                model, tok, sampler, raw_verifier_reward, lambda s, b=batches, s0=step0: b(s - s0),
                grpo_config(setup, seed + night, step0 + steps), hooks=QUIET, collector=collector,
            )  # fmt: skip
            trainer.step = step0
            counts: dict[str, float] = {}
            spent = train_until(trainer, tracker, spent, night_budget, zero_var, counts)
            nights[-1].update({k: int(v) for k, v in counts.items()})
            model = trainer.model
            night += 1
    return spent


def rollouts_to(curve: Sequence[dict], target: float, key: str = "sampled") -> float | None:
    """Rollouts at which the curve first reaches `target` (linear interpolation), or None."""
    if curve and curve[0][key] >= target:
        return float(curve[0]["rollouts"])
    for a, b in itertools.pairwise(curve):
        if b[key] >= target:
            t = (target - a[key]) / (b[key] - a[key])
            return float(a["rollouts"] + t * (b["rollouts"] - a["rollouts"]))
    return None


NIGHT_COUNTS = ("train_rollouts", "train_replayed_rollouts", "train_skipped_zero_var")


def night_counts(runs: list[dict]) -> dict[str, float]:
    """Mean per seed of the fresh and replayed training rollouts and the skipped prompts, for
    an arm whose nights count them (replay and/or skip); {} for the others."""
    if not any(key in n for r in runs for n in r["nights"] for key in NIGHT_COUNTS):
        return {}
    return {
        key: float(np.mean([sum(n.get(key, 0) for n in r["nights"]) for r in runs]))
        for key in NIGHT_COUNTS
    }


def summarise(runs: list[dict], setup: Setup) -> dict[str, Any]:
    by_arm: dict[str, list[dict]] = {}
    for r in runs:
        by_arm.setdefault(r["arm"], []).append(r)
    finals = {
        arm: {
            "sampled_mean": float(np.mean([r["curve"][-1]["sampled"] for r in rs])),
            "sampled_std": float(np.std([r["curve"][-1]["sampled"] for r in rs])),
            "greedy_mean": float(np.mean([r["curve"][-1]["greedy"] for r in rs])),
            "start_sampled": float(np.mean([r["curve"][0]["sampled"] for r in rs])),
            "zero_var_share": float(np.nanmean([r["zero_var_share"] for r in rs])),
            "curation_rollouts": float(np.mean([r["curation_rollouts"] for r in rs])),
            "seconds": float(np.mean([r["seconds"] for r in rs])),
            **night_counts(rs),
        }
        for arm, rs in by_arm.items()
    }
    out: dict[str, Any] = {"final": finals}
    # where each arm first reaches uniform's final accuracy; a run without uniform (the
    # every-rollout halves) is read against the sieve arm's final instead
    ref = "sieve" if "uniform" not in finals and "sieve" in finals else "uniform"
    target = finals.get(ref, {}).get("sampled_mean")
    reach: dict[str, float | None] = {}
    by_seed: dict[str, list[float | None]] = {}
    for arm, rs in by_arm.items():
        if target is None:
            continue
        reach[arm] = rollouts_to(mean_curve([r["curve"] for r in rs]), target)
        by_seed[arm] = [rollouts_to(r["curve"], target) for r in rs]
    budget = reach.get(ref)
    ratio = {a: (v / budget if v is not None and budget else None) for a, v in reach.items()}
    return out | {
        f"{ref}_final": target,
        f"rollouts_to_{ref}_final": reach,
        f"rollouts_to_{ref}_final_vs_{ref}": ratio,
        f"rollouts_to_{ref}_final_by_seed": by_seed,
    }


def mean_curve(curves: Sequence[Sequence[dict]], points: int = 400) -> list[dict]:
    """The seeds' sampled-accuracy curves averaged on a common rollout grid (linear between
    evaluations), up to the shortest curve's end: where "reaches" is read for an arm."""
    end = min(c[-1]["rollouts"] for c in curves)
    grid = np.linspace(0.0, end, points)
    ys = [np.interp(grid, [p["rollouts"] for p in c], [p["sampled"] for p in c]) for c in curves]
    mean = np.mean(ys, axis=0)
    return [{"rollouts": float(x), "sampled": float(y)} for x, y in zip(grid, mean, strict=True)]


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"uniform": "tab:gray", "dapo": "tab:blue", "pilot_commit": "tab:orange",
              "sieve": "tab:green", "sieve_every_rollout": "tab:red",
              "sieve_replay": "tab:olive", "sieve_skip": "tab:purple"}  # fmt: skip
    for arm in colors:
        runs = [r for r in result["runs"] if r["arm"] == arm]
        if not runs:
            continue
        for key, ax in (("sampled", a), ("greedy", b)):
            xs = np.array([[p["rollouts"] for p in r["curve"]] for r in runs], dtype=float)
            ys = np.array([[p[key] for p in r["curve"]] for r in runs], dtype=float)
            if xs.ndim != 2:  # ragged curves (sieve's nights): plot each seed
                for r in runs:
                    ax.plot([p["rollouts"] for p in r["curve"]], [p[key] for p in r["curve"]],
                            color=colors[arm], alpha=0.6)  # fmt: skip
                continue
            x, m, s = xs.mean(0), ys.mean(0), ys.std(0)
            ax.plot(x, m, marker="o", color=colors[arm], label=arm)
            ax.fill_between(x, m - s, m + s, color=colors[arm], alpha=0.15)
    a.set_title("held-out pass@1, mean over samples at T=1 (whole mix)")
    b.set_title("held-out greedy pass@1 (whole mix)")
    for ax in (a, b):
        ax.set_xlabel("cumulative rollouts (curation + training)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def add_runs(result: dict, other: dict) -> list[dict]:
    """`result`'s runs with `other`'s added (an arm × seed in both: `other`'s); refused when the
    two were measured on different setups (budget, evaluations, trainer or curation settings)."""
    if other["setup"] != {**result["setup"], "seeds": other["setup"]["seeds"]}:
        raise SystemExit("cannot add runs measured on another setup (only the seeds may differ)")
    new = {(r["arm"], r["seed"]) for r in other["runs"]}
    kept = [r for r in result["runs"] if (r["arm"], r["seed"]) not in new]
    for r in other["runs"]:
        r["added_later"] = True  # measured in another process, same setup and code path
    return kept + other["runs"]


SHOWN = ("final", "rollouts_to_uniform_final", "rollouts_to_uniform_final_vs_uniform")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--quick", action="store_true", help="one seed, fewer evaluations (~6 min)")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--grpo", default="{}", help="JSON of GRPOConfig overrides for every arm")
    ap.add_argument(
        "--out", default=None, help="results name (default: curriculum, or curriculum_quick)"
    )
    ap.add_argument("--passes", type=float, default=0.0, help="sieve: passes per night (0: old)")
    ap.add_argument("--curate", default="{}", help="sieve: JSON of CurateConfig overrides")
    ap.add_argument("--rollouts-per-step", type=int, default=0, help="every arm (0: 512)")
    ap.add_argument("--budget", type=int, default=0, help="rollouts per arm (0: the mode's)")
    ap.add_argument("--train-ratio", type=float, default=0.0, help="sieve: see Setup")
    ap.add_argument("--candidates", type=int, default=0, help="sieve: per night (0: 800)")
    ap.add_argument("--seeds", default="", help="comma-separated seeds (default: the mode's)")
    ap.add_argument(
        "--add",
        default="",
        help="with --resummarise: comma-separated results names whose runs replace or join the "
        "same arm × seed in results/<out>.json (an arm measured later on the same setup)",
    )
    ap.add_argument(
        "--resummarise", action="store_true", help="recompute summary + PNG from the JSON"
    )
    args = ap.parse_args()
    if args.out is None:  # a quick run never overwrites the committed full figures
        args.out = "curriculum_quick" if args.quick else "curriculum"
    if args.resummarise:
        path = RESULTS / f"{args.out}.json"
        result = json.loads(path.read_text())
        setup = Setup(**{**result["setup"], "seeds": tuple(result["setup"]["seeds"])})
        for name in filter(None, args.add.split(",")):
            result["runs"] = add_runs(result, json.loads((RESULTS / f"{name}.json").read_text()))
        result.update(summarise(result["runs"], setup))
        path.write_text(json.dumps(result, indent=1))
        plot(result, RESULTS / f"{args.out}.png")
        print(json.dumps({k: result.get(k) for k in SHOWN}, indent=1))
        return
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: run `sieve bootstrap` first")
    base = QUICK if args.quick else FULL
    overrides = {
        "grpo": {**base.grpo, **json.loads(args.grpo)},
        "curate": {**base.curate, **json.loads(args.curate)},
        "passes": args.passes,
    }
    if args.rollouts_per_step:
        overrides["rollouts_per_step"] = args.rollouts_per_step
    if args.budget:
        overrides["budget"] = args.budget
    if args.train_ratio:
        overrides["train_ratio"] = args.train_ratio
    if args.candidates:
        overrides["candidates"] = args.candidates
    if args.seeds:
        overrides["seeds"] = tuple(int(x) for x in args.seeds.split(","))
    setup = Setup(**{**base.__dict__, **overrides})
    heldout = heldout_set(setup.per_level)
    started = time.perf_counter()
    runs = []
    for seed in setup.seeds:
        for arm in args.arms.split(","):
            print(f"arm {arm} seed {seed}", flush=True)
            runs.append(run_arm(arm, setup, seed, args.model, heldout))
    result = {
        "benchmark": "curriculum",
        "mode": "quick" if args.quick else "full",
        "machine": {"cpus": torch.get_num_threads(), "platform": platform.platform()},
        "model": str(args.model),
        "setup": {**setup.__dict__, "grpo": {**TINY_GRPO, **setup.grpo}},
        "heldout_problems": heldout.height,
        **summarise(runs, setup),
        "wall_seconds": time.perf_counter() - started,
        "runs": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / f"{args.out}.png")
    print(json.dumps({k: result.get(k) for k in SHOWN}, indent=1))


if __name__ == "__main__":
    main()
