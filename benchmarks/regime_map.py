"""The regime map on the tiny policy: where does choosing prompts stop paying, and does `sieve plan`
know before any training?

A pool's regime is the share of its prompts on which a uniform group of G = 8 disagrees at the
start (informative: some answers right, some wrong): where nearly every group agrees, choosing
what to sample has the most to save; where half of them already disagree, little. This benchmark
builds pools of the generator mix whose predicted share spans about 0.05 to 0.5, and runs the
tiny headline's protocol (benchmarks/headline.py: matched updates, paired seeds, the same
evaluation for every arm of a pool) on each, with the arms uniform, Sieve's default selection
(`sieve`: the ledger posterior), DAPO's dynamic sampling, the MoPPS-style Thompson selection and
the learning difficulty model with the start's cell prior (`sieve_learning`).

Steps, each resumable:

1. `--measure`: every cell of the generator mix measured from the bootstrapped tiny policy
   (`cell_prompts` x 8 samples at the training temperature, headline.measure_cells), then the
   pools chosen from it (`choose_pools`: subsets of cells, weighted as `generate_mix` spreads a
   pool over families then levels, whose predicted share is closest to each target), then for
   each pool the screen `sieve plan` reads (`plan_prompts` prompts x 16 samples from a seed no
   run uses) and its prediction (`pipeline.jobs.analysis.policy_forecast.plan`: the verdict and
   every policy's rollouts per informative group). Written to `results/regime_map.json` (`pools`).
2. `--run POOL ARM SEED`: one run, as headline.run_arm runs it, its progress file under
   `results/regime_map_runs/<pool>/`; `benchmarks/regime_map_driver.sh` runs them seed-major and
   commits each file when its run ends.
3. `--summarise`: per pool, headline's paired statistics of each arm against uniform, beside the
   pool's measured share and `sieve plan`'s prediction.

Run:  .venv/bin/python benchmarks/regime_map.py --measure
      nohup benchmarks/regime_map_driver.sh > /tmp/sieve-regime/driver.log 2>&1 &
      .venv/bin/python benchmarks/regime_map.py --summarise
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
import headline as hl

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "regime_map.json"
RUNS = RESULTS / "regime_map_runs"
STATE = Path("/tmp/sieve-regime")
TARGETS = (0.05, 0.15, 0.3, 0.5)  # predicted uniform informative share at the start
# Sieve's default (`sieve`: today's ledger posterior) and the learning model with the start's
# cell prior (`sieve_learning`), which becomes the default only if it holds on every pool here
ARMS = ("uniform", "sieve", "dapo", "mopps", "sieve_learning")
SEEDS = (1, 2, 3, 4, 5)
G = 8
CELL_PROMPTS = 32  # prompts per cell in the measurement
PLAN_PROMPTS = 256  # prompts of each pool in the screen `sieve plan` reads
PLAN_SAMPLES = 16
PLAN_SEED = 909  # no run's seed: the screen is not any run's pool
MIN_HELD = 240  # held-out problems per pool, at least (per_level grows for pools of few cells)


def informative_probability(p: float, n: int = G) -> float:
    """P(a group of n at pass rate p disagrees) = 1 - p^n - (1 - p)^n."""
    return 1.0 - p**n - (1.0 - p) ** n


def cell_weights(cells: list[tuple[str, int]]) -> dict[tuple[str, int], float]:
    """Each cell's share of a pool that `generate_mix` spreads over these cells (families
    evenly, then each family's levels evenly)."""
    families: dict[str, list[int]] = {}
    for family, level in cells:
        families.setdefault(family, []).append(level)
    return {
        (f, lv): 1.0 / len(families) / len(levels)
        for f, levels in families.items()
        for lv in levels
    }


def predicted_share(cells: list[tuple[str, int]], share: dict[tuple[str, int], float]) -> float:
    """The pool's expected informative share at G from each cell's measured share."""
    return sum(w * share[c] for c, w in cell_weights(cells).items())


def choose_pools(measured: list[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """For each target share, the subset of cells (at least 4, at least one informative cell)
    whose predicted share is closest to it; ties go to more cells. Deterministic: a fixed
    search over random subsets plus every 'k most informative + all flat' construction."""
    share = {(r["family"], int(r["level"])): float(r["informative"]) for r in measured}
    cells = sorted(share, key=lambda c: -share[c])
    informative = [c for c in cells if share[c] > 0.05]
    flat = [c for c in cells if share[c] <= 0.05]
    candidates: list[list[tuple[str, int]]] = [list(cells)]
    for k in range(1, len(informative) + 1):
        candidates.append(informative[:k] + flat)
        candidates.append(informative[:k])
        for m in range(1, len(flat) + 1, max(1, len(flat) // 6)):
            candidates.append(informative[:k] + flat[:m])
    rng = np.random.default_rng(seed)
    for _ in range(4000):
        size = int(rng.integers(4, len(cells) + 1))
        pick = sorted(rng.choice(len(cells), size, replace=False).tolist())
        candidates.append([cells[i] for i in pick])
    candidates = [c for c in candidates if len(c) >= 4 and any(share[x] > 0.05 for x in c)]
    pools = []
    for target in TARGETS:
        best = min(candidates, key=lambda c: (abs(predicted_share(c, share) - target), -len(c)))
        mix: dict[str, list[int]] = {}
        for family, level in sorted(best):
            mix.setdefault(family, []).append(level)
        pools.append(
            {
                "name": f"share{round(target * 100):02d}",
                "target": target,
                "predicted_share": predicted_share(best, share),
                "mix": mix,
                "cells": len(best),
            }
        )
    return pools


def setup_for(pool: dict[str, Any]) -> hl.Setup:
    """The tiny headline's setup, with enough held-out problems per cell for `MIN_HELD`."""
    per_level = max(hl.TINY.per_level, -(-MIN_HELD // pool["cells"]))
    return replace(hl.TINY, per_level=per_level)


def _policy(setup: hl.Setup, model_dir: Path) -> Any:
    return hl.load(setup, model_dir)  # type: ignore[arg-type]  # the fields load reads


def screen_for_plan(pol: Any, setup: hl.Setup, mix: dict[str, list[int]]) -> pl.DataFrame:
    """`PLAN_PROMPTS` train-split prompts of the pool x `PLAN_SAMPLES` samples, scored, as the
    Parquet pools `sieve plan` reads hold them (problem_id, sample_idx, reward, correct)."""
    from pipeline.problems import generate_mix
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.scoring import verify_batch

    frame = generate_mix(mix, PLAN_PROMPTS * 2, 10_000 + PLAN_SEED).filter(
        pl.col("split") == "train"
    )
    frame = frame.sample(fraction=1.0, shuffle=True, seed=PLAN_SEED).head(PLAN_PROMPTS)
    sampling = SamplingConfig(
        temperature=setup.temperature, top_p=hl.TOP_P, max_new_tokens=setup.max_new_tokens
    )
    params = sampling.params(setup.prompt_format, PLAN_SEED, greedy=False)
    groups = pol.engine.sample(pol.render(frame["question"].to_list()), PLAN_SAMPLES, params)
    rows = []
    for pid, answer, verifier, group in zip(
        frame["problem_id"], frame["answer"], frame["verifier"], groups, strict=True
    ):
        texts = [s.text for s in group]
        verdicts = verify_batch(
            texts,
            [answer] * len(texts),
            verifier,
            marker_required=setup.prompt_format == "chat",
            truncated=[s.finish_reason == "length" for s in group],
        )
        for i, v in enumerate(verdicts):
            rows.append(
                {
                    "problem_id": pid,
                    "sample_idx": i,
                    "reward": float(v.reward or 0.0),
                    "correct": bool(v.correct),
                }
            )
    return pl.DataFrame(rows)


def plan_prediction(scored: pl.DataFrame) -> dict[str, Any]:
    """`sieve plan` on the screen: its verdict, each policy's row, and the realised uniform
    informative share at G (samples 0..G-1 of each prompt)."""
    from pipeline.jobs.analysis.policy_forecast import plan
    from pipeline.selection import CurateConfig

    result = plan(scored, CurateConfig(), g=G)
    first = (
        scored.filter(pl.col("sample_idx") < G)
        .group_by("problem_id")
        .agg(pl.col("correct").sum().alias("k"), pl.len().alias("n"))
    )
    share = first.select(((pl.col("k") > 0) & (pl.col("k") < pl.col("n"))).mean()).item()
    base = next(r for r in result.rows if r.policy == "uniform")
    priced = [r for r in result.rows if r.policy != "uniform" and r.per_informative is not None]
    best = min(priced, key=lambda r: r.per_informative or 0.0) if priced else None
    return {
        "verdict": result.verdict,
        "uniform_share_screen": share,
        "best_policy": None if best is None else best.policy,
        "best_ratio": None
        if best is None or base.per_informative is None
        else (best.per_informative or 0.0) / base.per_informative,
        "rows": [r.as_dict() for r in result.rows],
    }


def measure(model_dir: Path) -> dict[str, Any]:
    """Step 1: cells, pools and `sieve plan`'s predictions (resumable: reuses what is written)."""
    from pipeline.policy.model import folder_revision
    from pipeline.problems import FAMILIES, family_levels, generate_mix

    done = json.loads(OUT.read_text()) if OUT.is_file() else {}
    setup = replace(hl.TINY, cell_prompts=CELL_PROMPTS, cell_samples=G)
    pol = _policy(setup, model_dir)
    revision = folder_revision(model_dir)
    if done.get("model_revision") != revision:
        done = {"model_revision": revision}
    if "cells" not in done:
        began = time.perf_counter()
        mix = {f: list(family_levels(f)) for f in FAMILIES}
        done["cells"] = hl.measure_cells(setup, pol, mix)
        done["cells_seconds"] = time.perf_counter() - began
        hl.atomic_write(OUT, done)
    if "pools" not in done:
        done["pools"] = choose_pools(done["cells"])
        share = {(r["family"], int(r["level"])): float(r["informative"]) for r in done["cells"]}
        for pool in done["pools"]:  # as seed 1's pool holds its cells (small cells run short)
            frame = generate_mix(pool["mix"], hl.TINY.pool_size * 2, 10_001)
            frame = frame.filter(pl.col("split") == "train")
            frame = frame.sample(fraction=1.0, shuffle=True, seed=1).head(hl.TINY.pool_size)
            pool["pool_predicted_share"] = float(
                np.mean(
                    [
                        share[(f, int(lv))]
                        for f, lv in zip(frame["family"], frame["level"], strict=True)
                    ]
                )
            )
        hl.atomic_write(OUT, done)
    for pool in done["pools"]:
        if "plan" in pool:
            continue
        began = time.perf_counter()
        scored = screen_for_plan(pol, setup_for(pool), pool["mix"])
        pool["plan"] = plan_prediction(scored)
        pool["plan"]["seconds"] = time.perf_counter() - began
        hl.atomic_write(OUT, done)
        print(f"{pool['name']}: {pool['plan']['verdict']}", flush=True)
    done["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    hl.atomic_write(OUT, done)
    return done


def run(model_dir: Path, name: str, arm: str, seed: int) -> dict[str, Any]:
    """Step 2: one pool x arm x seed under the tiny headline's protocol."""
    record = json.loads(OUT.read_text())
    pool = next((p for p in record["pools"] if p["name"] == name), None)
    if pool is None:
        raise SystemExit(f"unknown pool {name!r}: run --measure first, or choose one in {OUT}")
    if arm not in ARMS:
        raise SystemExit(f"unknown arm {arm!r}: choose from {', '.join(ARMS)}")
    setup = setup_for(pool)
    mix = {f: [int(lv) for lv in lvs] for f, lvs in pool["mix"].items()}
    held = hl.held_out(mix, setup.per_level).unique("problem_id", keep="first", maintain_order=True)
    pol = _policy(setup, model_dir)
    base = {k: v.detach().clone() for k, v in pol.model.state_dict().items()}
    runs_dir, state = RUNS / name, STATE / name
    weights, start = hl.start_point(setup, "cold", pol, base, mix, held, runs_dir, state, model_dir)
    return hl.run_arm(setup, "cold", arm, seed, pol, weights, start, mix, held, runs_dir, state)


def summarise() -> dict[str, Any]:
    """Step 3: per pool, each arm against uniform (headline.summary's statistics: crossed
    bootstrap and t intervals over paired seeds), beside the pool's share and `sieve plan`."""
    record = json.loads(OUT.read_text())
    pools = []
    for pool in record["pools"]:
        runs_dir = RUNS / pool["name"]
        row: dict[str, Any] = {
            k: pool.get(k) for k in ("name", "target", "predicted_share", "pool_predicted_share")
        }
        row["cells"], row["mix"] = pool["cells"], pool["mix"]
        row["plan"] = {k: v for k, v in pool.get("plan", {}).items() if k != "rows"}
        block = None
        if runs_dir.is_dir() and any(runs_dir.glob("cold_*_s*.json")):
            block = hl.summary(runs_dir, setup_for(pool), "tiny")["settings"].get("cold")
        row["arms"] = {}
        for arm, a in (block or {}).get("arms", {}).items():
            full = next(
                (t for t in a.get("rollouts_to_target", []) if t["fraction_of_uniform_gain"] == 1),
                None,
            )
            row["arms"][arm] = {
                "seeds": a["seeds"],
                "final_sampled": a["final_sampled"],
                "final_greedy": a["final_greedy"],
                "diff_sampled_vs_uniform": a.get("diff_sampled_vs_uniform"),
                "diff_greedy_vs_uniform": a.get("diff_greedy_vs_uniform"),
                "auc_gain_delta": a.get("auc_gain_delta"),
                "ratio_to_uniform_gain": None if full is None else full["ratio_to_uniform"],
                "not_reached": None if full is None else full["not_reached_paired"],
                "informative_by_quarter": (a.get("by_part") or {}).get("realized"),
            }
        if block is not None:
            uni = [r for r in block["runs"] if r["arm"] == "uniform"]
            row["start"] = block["start"]
            row["runs"] = len(block["runs"])
            row["uniform_runs"] = len(uni)
        pools.append(row)
    result = {
        "verdicts": verdicts(pools),
        "benchmark": "regime_map",
        "policy": "tiny",
        "model_revision": record.get("model_revision"),
        "setup": {k: v for k, v in asdict(hl.TINY).items() if k != "per_level"},
        "arms": list(ARMS),
        "seeds": list(SEEDS),
        "verifier": hl.verifier_version(),
        "pools": pools,
        "cells": record.get("cells"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }
    return result


def _call(stat: dict[str, Any] | None) -> str | None:
    """ "ahead" / "behind" when the crossed bootstrap and the t interval both exclude zero on
    one side, "n.s." otherwise, None without a comparison."""
    if not stat or stat.get("ci95") is None:
        return None
    if not stat.get("significant"):
        return "n.s."
    return "ahead" if stat["mean"] > 0 else "behind"


def verdicts(pools: list[dict[str, Any]]) -> dict[str, Any]:
    """Per arm, per pool: ahead of uniform (final sampled Δ or the area-under-the-curve Δ
    significantly above zero, neither significantly below), behind, or no difference shown; and
    whether `sieve plan`'s verdict on the pool ("curation pays") agreed with Sieve's arm."""
    out: dict[str, Any] = {"arms": {}, "plan_agrees_with_sieve": {}}
    for arm in ARMS[1:]:
        per_pool = {}
        for pool in pools:
            a = pool["arms"].get(arm)
            if a is None:
                continue
            calls = {_call(a["diff_sampled_vs_uniform"]), _call(a["auc_gain_delta"])} - {None}
            per_pool[pool["name"]] = (
                "behind" if "behind" in calls else "ahead" if "ahead" in calls else "n.s."
            )
        out["arms"][arm] = per_pool
    for pool in pools:
        call = out["arms"].get("sieve", {}).get(pool["name"])
        verdict = (pool.get("plan") or {}).get("verdict") or ""
        if call is not None and verdict:
            plan_pays = verdict.startswith("Curation pays")
            out["plan_agrees_with_sieve"][pool["name"]] = plan_pays == (call == "ahead")
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    """Δ final sampled pass@1 and the area-under-the-curve Δ against the pool's share, per arm,
    with `sieve plan`'s cost ratio beside each pool."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for arm in ARMS[1:]:
        xs, d, lo, hi, auc = [], [], [], [], []
        for pool in result["pools"]:
            a = pool["arms"].get(arm)
            share = (pool.get("plan") or {}).get("uniform_share_screen")
            if a is None or a["diff_sampled_vs_uniform"] is None or share is None:
                continue
            xs.append(share)
            diff = a["diff_sampled_vs_uniform"]
            d.append(diff["mean"])
            lo.append(diff["mean"] - diff["ci95"][0])
            hi.append(diff["ci95"][1] - diff["mean"])
            auc.append((a["auc_gain_delta"] or {}).get("mean"))
        if xs:
            axes[0].errorbar(xs, d, yerr=[lo, hi], marker="o", capsize=3, label=arm)
            axes[1].plot(xs, auc, marker="o", label=arm)
    for ax, title in zip(
        axes[:2],
        ("final sampled pass@1, arm − uniform", "AUC of greedy gain, arm − uniform"),
        strict=True,
    ):
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel("uniform informative share at the start (sieve plan's screen, G 8)")
        ax.set_title(title)
        ax.legend()
    shares = [(p.get("plan") or {}).get("uniform_share_screen") for p in result["pools"]]
    ratios = [(p.get("plan") or {}).get("best_ratio") for p in result["pools"]]
    pts = [(x, y) for x, y in zip(shares, ratios, strict=True) if x is not None and y is not None]
    if pts:
        axes[2].plot(*zip(*pts, strict=True), marker="s", color="k")
    axes[2].axhline(0.95, color="grey", ls="--", lw=0.8)
    axes[2].set_xlabel("uniform informative share at the start")
    axes[2].set_title("sieve plan: best policy's rollouts per informative group / uniform's")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def planned() -> list[tuple[str, str, int]]:
    """Every run of the map, seed-major: all pools' arms for seed 1, then seed 2, ..."""
    record = json.loads(OUT.read_text())
    names = [p["name"] for p in record["pools"]]
    return [(n, a, s) for s, n, a in itertools.product(SEEDS, names, ARMS)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=hl.TINY_MODEL)
    ap.add_argument("--measure", action="store_true", help="cells, pools, sieve plan")
    ap.add_argument("--run", nargs=3, metavar=("POOL", "ARM", "SEED"), help="one run")
    ap.add_argument("--list", action="store_true", help="print the planned runs, seed-major")
    ap.add_argument("--summarise", action="store_true", help="JSON + PNG from the run files")
    ap.add_argument("--results", type=Path, default=None, help="results folder (a pinned tree's)")
    args = ap.parse_args(argv)
    if args.results is not None:  # a pinned checkout writes into the repository it serves
        global RESULTS, OUT, RUNS
        RESULTS = args.results
        OUT, RUNS = RESULTS / "regime_map.json", RESULTS / "regime_map_runs"
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: `sieve bootstrap --home data`")
    if args.measure:
        record = measure(args.model)
        for p in record["pools"]:
            print(
                f"{p['name']}: {p['cells']} cells, predicted share {p['predicted_share']:.3f}, "
                f"screen {p['plan']['uniform_share_screen']:.3f}; {p['plan']['verdict']}"
            )
    if args.list:
        for name, arm, seed in planned():
            print(f"{name} {arm} {seed}")
    if args.summarise:
        result = summarise()
        path = RESULTS / "regime_map_summary.json"
        hl.atomic_write(path, result)
        plot(result, path.with_suffix(".png"))
        print(f"wrote {path}")
    if args.run:
        name, arm, seed = args.run
        result = run(args.model, name, arm, int(seed))
        print(f"{name} {arm} s{seed}: done={result['done']} final={result['final']}", flush=True)


if __name__ == "__main__":
    main()
