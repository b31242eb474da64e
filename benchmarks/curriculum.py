"""The earlier tiny headline: held-out accuracy per rollout spent, uniform vs the usual ways.

Superseded by `benchmarks/headline.py` (matched updates): this comparison let arms differ in
optimizer updates and group sizes. Same starting policy (the bootstrapped tiny model), same trainer
settings, same total rollout budget per arm *including every rollout spent on curation or on
filtering*, several seeds, and held-out problems (a fixed hash split, never used for curation or
training) over the *whole* generator mix — every family and level — so a method that gains on
middle levels and forgets the easy ones shows that loss. Arms:

- `uniform`: GRPO on prompts drawn uniformly from the generator mix (G = 8);
- `dapo`: DAPO dynamic sampling — sample groups of uniformly drawn prompts online, drop the
  zero-variance ones, refill until the batch is full (Yu et al. 2025);
- `pilot_commit`: pilot each drawn prompt with G = 16, keep 0.125 ≤ p ≤ 0.75, commit to 48
  samples in total for the kept ones (the Pilot-Commit recipe);
- `sieve`, `sieve_every_rollout`, `sieve_replay`, `sieve_skip`: **retired** (issues 46/49: one
  definition of a night, the product's `sieve loop`). They ran nights of curate → train through
  a copy of the night kept in this script (`sieve_nights`, since deleted): per night, offline
  curation with the current weights (candidates spread over family × level cells by the
  ledger's history, screen G = 8 → refine 8 more, the tiny recipe `TINY_CURATE`), then GRPO on
  the night's curriculum for `train_ratio` × the night's curation cost, while the budget
  lasted; `sieve_every_rollout` added the replay of stored curation samples on a prompt's first
  visit and the GRESO-style skip of zero-variance histories, `sieve_replay` / `sieve_skip` each
  half alone. Their committed runs stay in `results/curriculum.json`, `curriculum_quick.json`
  and `curriculum_every_rollout.json` as measured history and `--resummarise` still reads them;
  asking to run one exits with a line saying so. The product's own night is measured by
  `benchmarks/headline.py --arms night`.

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

Run: `python benchmarks/curriculum.py --out NAME [--quick]` (`--quick`: one seed) runs the arms
still runnable (uniform, DAPO, pilot-commit) into `results/NAME.json`; the script refuses to
overwrite a results file that holds retired arms' runs (`curriculum.json` and
`curriculum_quick.json`, the defaults, both do). `--resummarise` recomputes the summary and the
PNG from a committed JSON, retired arms' runs included. Needs the bootstrapped tiny policy
(`sieve bootstrap`).
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

from grpo_core.collect import dynamic_sampling, pilot_commit
from grpo_core.config import GRPOConfig
from grpo_core.seeds import derive_seed, seed_torch
from grpo_core.trainer import Hooks, Item, Trainer
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set, overall
from pipeline.jobs.train.curriculum_batches import raw_verifier_reward
from pipeline.jobs.train.settings import TINY_GRPO, TINY_RECIPE_GRPO, TINY_RECIPE_ROLLOUTS_PER_STEP
from pipeline.policy.model import load_policy
from pipeline.problems import FAMILIES, family_levels, generate_mix
from pipeline.sampling.budget import SamplingConfig
from pipeline.sampling.group_sampler import HFGroupSampler
from pipeline.sampling.hf import HFSampler
from pipeline.selection import TINY_CURATE
from pipeline.store import Ledger

RESULTS = Path(__file__).parent / "results"
ARMS = ("uniform", "dapo", "pilot_commit")  # the arms this script still runs
# arms whose nights were a copy of the product's night (issues 46/49): their committed runs are
# read (--resummarise, the docs), never run again
RETIRED_ARMS = ("sieve", "sieve_every_rollout", "sieve_replay", "sieve_skip")
MIX = {f: list(family_levels(f)) for f in FAMILIES}  # the whole generator mix
G = 8
# the trainer settings of every arm (on top of TINY_GRPO) and the retired sieve arms' curation
# (still recorded in `setup`, so a new run's setup compares with the committed ones): the tiny
# policy's recipe, as `sieve demo` uses it (pipeline.jobs.train.settings /
# pipeline.selection.config)
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
    # the retired sieve arms' settings below stay fields because every committed setup records
    # them (`--resummarise` and `--add` rebuild and compare setups); nothing runs on them now
    candidates: int  # sieve (retired): candidates curated per night
    # every arm: rollouts per optimiser step (prompts × G = 8)
    rollouts_per_step: int = TINY_RECIPE_ROLLOUTS_PER_STEP
    grpo: dict[str, Any] = field(default_factory=lambda: dict(BENCH_GRPO))
    # sieve (retired): training per night in passes over its curriculum; 0 = as many rollouts
    # as `train_ratio` × the night's curation cost
    passes: float = 0.0
    # sieve (retired): training rollouts per night as a multiple of its curation cost
    train_ratio: float = 2.0
    # sieve (retired): CurateConfig overrides
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


def retired(arm: str) -> str:
    """The one line a request to run a retired arm exits with."""
    return (
        f"arm {arm!r} is retired (its night was a copy of the product's): its committed runs "
        "remain in benchmarks/results/curriculum*.json; `benchmarks/headline.py --arms night` "
        "runs the product's own night"
    )


def run_arm(arm: str, setup: Setup, seed: int, model_dir: Path, heldout: pl.DataFrame) -> dict:
    if arm in RETIRED_ARMS:
        raise SystemExit(retired(arm))
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
    if not tracker.curve or tracker.curve[-1]["rollouts"] != spent:
        tracker.evaluate(model, spent)
    return {  # the online arms curate nothing: no curation rollouts, no nights
        "arm": arm,
        "seed": seed,
        "curve": tracker.curve,
        "rollouts": spent,
        "curation_rollouts": 0,
        "nights": [],
        "zero_var_share": float(np.nanmean(zero_var)) if zero_var else math.nan,
        "seconds": time.perf_counter() - started,
    }


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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--quick", action="store_true", help="one seed, fewer evaluations")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"of {', '.join(ARMS)}")
    ap.add_argument("--grpo", default="{}", help="JSON of GRPOConfig overrides for every arm")
    ap.add_argument(
        "--out", default=None, help="results name (default: curriculum, or curriculum_quick)"
    )
    # the retired sieve arms' knobs: recorded in `setup` only, so a run can match the setup of
    # a committed file it is to be `--add`ed to
    recorded = "retired sieve arms' setting, recorded in setup only"
    ap.add_argument("--passes", type=float, default=0.0, help=recorded)
    ap.add_argument("--curate", default="{}", help=recorded)
    ap.add_argument("--rollouts-per-step", type=int, default=0, help="every arm (0: 512)")
    ap.add_argument("--budget", type=int, default=0, help="rollouts per arm (0: the mode's)")
    ap.add_argument("--train-ratio", type=float, default=0.0, help=recorded)
    ap.add_argument("--candidates", type=int, default=0, help=recorded)
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
    args = ap.parse_args(argv)
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
    arms = [a for a in args.arms.split(",") if a]
    for arm in arms:
        if arm in RETIRED_ARMS:
            raise SystemExit(retired(arm))
        if arm not in ARMS:
            raise SystemExit(f"unknown arm {arm!r}: choose from {', '.join(ARMS)}")
    history = RESULTS / f"{args.out}.json"
    if history.is_file() and any(
        r["arm"] in RETIRED_ARMS for r in json.loads(history.read_text())["runs"]
    ):
        raise SystemExit(
            f"{history} holds retired arms' runs (measured history): name another --out"
        )
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
        for arm in arms:
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
