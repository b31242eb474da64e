"""Power before spending: from the committed headline runs (benchmarks/headline.py), the smallest
paired effect a campaign of N seeds (blocks) and H held-out problems detects with 80 % power at
α = 0.05, two-sided, for the final Δ (sampled and greedy pass@1, arm − uniform) and the rollouts
ratio to 2/3 and all of uniform's seed-mean greedy gain (headline_stats.py).

The model, for one comparison: a block's statistic is δ + β_b + π + ε_b, with β the block's own
effect (the seed: pool, draws, trainer; variance σ²_β), π the held-out problems' effect that
every block shares (the same problems in every block; σ²_π / H) and ε_b the block's own
problem-level noise (σ²_ε / H). The campaign's estimate has variance
SE² = σ²_β / N + σ²_π / H + σ²_ε / (N H), and detects δ ≥ MDE = (t(1 − α/2) + t(power)) · SE
with N − 1 degrees of freedom. From the N₀ blocks and H₀ problems of the runs:

- v_block, the variance of the block statistic over blocks, is σ²_β + σ²_ε / H₀;
- v_shared, its block mean's variance over replicates that redraw the problems once for every
  block, is (σ²_π + σ²_ε / N₀) / H₀;
- v_own, the same with a draw of its own for each block, is (σ²_π + σ²_ε) / (N₀ H₀);

solved for the three components (each floored at 0) and pooled over a setting's comparisons
(every arm with ≥ 2 blocks paired with uniform), weighted by N₀ − 1. The ratio is a censored,
non-linear statistic (a run that never reaches a target counts at its last rollouts): the linear
model is an approximation for it, and censoring shrinks its spread. A simulation checks the
analytic MDE: per-problem differences drawn from the pooled components at δ = MDE, called by the
headline's own rule (crossed bootstrap and t over blocks both exclude zero).

    .venv/bin/python benchmarks/power.py      # results/power.json + power.png, seconds

Test: `.venv/bin/pytest tests/test_headline_stats.py -q`.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from headline_stats import (
    crossed_weights,
    paired_delta,
    replicate_stats,
    run_curve,
    t_quantile,
)

RESULTS = Path(__file__).parent / "results"
ALPHA, POWER = 0.05, 0.8
SEEDS = tuple(range(3, 13))
PROBLEMS = (281, 500, 1000)
SAVING = 1.5  # the rollouts saving the campaign should be able to show (ratio 1 / 1.5)
METRICS = ("final_sampled", "final_greedy", "ratio_two_thirds", "ratio_all")
CAMPAIGNS = (  # (name, runs folder, setting)
    ("warm", "headline_runs", "warm"),
    ("cold", "headline_runs", "cold"),
    ("tiny", "headline_tiny_runs", "cold"),
)
N_REPLICATES = 2_000  # problem-only replicates per variance estimate
N_SIMS, N_BOOT = 200, 200  # the simulation check: campaigns and bootstrap replicates each
CHECKED = ("final_sampled", "ratio_all")  # the metrics the simulation checks (seconds each)


# ---------------------------------------------------------------- the runs


def blocks(runs_dir: Path, setting: str) -> dict[str, dict[tuple[int, str], Any]]:
    """arm → (seed, start) → finished run, scored under the campaign's verifier (the one most
    finished runs have); each run's start record under "start_record"."""
    runs = [json.loads(f.read_text()) for f in sorted(runs_dir.glob(f"{setting}_*_s*.json"))]
    runs = [r for r in runs if r["done"]]
    if not runs:
        return {}
    verifier = Counter(r.get("verifier") for r in runs).most_common(1)[0][0]
    starts = {
        json.loads(f.read_text())["hash"]: json.loads(f.read_text())
        for f in runs_dir.glob(f"start_{setting}_*.json")
    }
    out: dict[str, dict[tuple[int, str], Any]] = {}
    for r in runs:
        if r.get("verifier") == verifier and r["start"] in starts:
            r["start_record"] = starts[r["start"]]
            out.setdefault(r["arm"], {})[(r["seed"], r["start"])] = r
    return out


def estimates(
    arm: list[Any], uni: list[Any], wb: np.ndarray, wps: list[np.ndarray]
) -> dict[str, np.ndarray]:
    """Each metric's campaign estimate per replicate (n,), with the blocks drawn by `wb` (n, B)
    and block b's problems by wps[b] (n, H): the final Δ and the log rollouts ratios (whose
    targets move with the blocks drawn: uniform's seed-mean gain), and that gain."""
    nb = len(arm)
    out = {}
    for key in ("sampled", "greedy"):
        col = f"per_problem_{key}"
        d = [np.subtract(a["final"][col], u["final"][col]) for a, u in zip(arm, uni, strict=True)]
        per = np.stack([w @ di / len(di) for w, di in zip(wps, d, strict=True)], 1)  # (n, B)
        out[f"final_{key}"] = (wb * per).sum(1) / nb
    ca = [run_curve(r, r["start_record"]) for r in arm]
    cu = [run_curve(r, r["start_record"]) for r in uni]
    budget = max(float(c.x[-1]) for c in (*ca, *cu))
    ya = [c.replicates(w) for c, w in zip(ca, wps, strict=True)]
    yu = [c.replicates(w) for c, w in zip(cu, wps, strict=True)]
    st = replicate_stats(ca, cu, ya, yu, wb, budget)
    out["ratio_two_thirds"] = (wb * st["fractions"][1]["log"]).sum(1) / nb
    out["ratio_all"] = (wb * st["fractions"][2]["log"]).sum(1) / nb
    out["gain"] = st["gain"]
    return out


def components(arm: list[Any], uni: list[Any], rng: np.random.Generator) -> dict[str, Any]:
    """Per metric: v_block, v_shared, v_own and the components σ²_β, σ²_π, σ²_ε they solve to
    (the module's docstring), for one comparison of N₀ blocks on H₀ problems. v_block comes
    from resampling blocks, N₀² / (N₀ − 1) times the estimate's variance (the sample variance
    of the block values for a mean of them; for a ratio it also holds the target's spread)."""
    n0, h0 = len(arm), len(arm[0]["final"]["per_problem_greedy"])
    n = N_REPLICATES
    fixed = [np.ones((1, h0))] * n0
    point = estimates(arm, uni, np.ones((1, n0)), fixed)
    wb, shared = crossed_weights(rng, n, n0, h0)
    own = [crossed_weights(rng, n, 1, h0)[1] for _ in range(n0)]
    by_block = estimates(arm, uni, wb, [np.ones((n, h0))] * n0)
    by_shared = estimates(arm, uni, np.ones((n, n0)), [shared] * n0)
    by_own = estimates(arm, uni, np.ones((n, n0)), own)
    out = {}
    for m in METRICS:
        if m.startswith("ratio") and point["gain"][0] <= 0:
            continue  # uniform gained nothing on average: no target to reach
        v_block = float(by_block[m].var()) * n0**2 / (n0 - 1)
        v_shared, v_own = float(by_shared[m].var()), float(by_own[m].var())
        pi = max(0.0, (v_shared - v_own) * h0 * n0 / (n0 - 1))
        eps = max(0.0, v_own * n0 * h0 - pi)
        out[m] = {
            "blocks": n0, "problems": h0, "mean": float(point[m][0]),
            "v_block": v_block, "v_shared": v_shared, "v_own": v_own,
            "sigma2_block": max(0.0, v_block - eps / h0),
            "sigma2_problem_shared": pi, "sigma2_problem_own": eps,
        }  # fmt: skip
    return out


def pooled(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The components averaged over comparisons, weighted by their blocks − 1."""
    if not found:
        return None
    w = np.array([c["blocks"] - 1 for c in found], dtype=np.float64)
    keys = ("sigma2_block", "sigma2_problem_shared", "sigma2_problem_own")
    return {
        **{k: float(np.average([c[k] for c in found], weights=w)) for k in keys},
        "df": int(w.sum()),
        "comparisons": len(found),
    }


# ---------------------------------------------------------------- power


def se(c: dict[str, Any], seeds: int, problems: int) -> float:
    return math.sqrt(
        c["sigma2_block"] / seeds
        + c["sigma2_problem_shared"] / problems
        + c["sigma2_problem_own"] / (seeds * problems)
    )


def mde(c: dict[str, Any], seeds: int, problems: int) -> float:
    """The smallest |δ| detected with probability POWER at level ALPHA (two-sided)."""
    t = t_quantile(1 - ALPHA / 2, seeds - 1) + t_quantile(POWER, seeds - 1)
    return t * se(c, seeds, problems)


def seeds_needed(c: dict[str, Any], problems: int, effect: float, most: int = 1000) -> int | None:
    """The fewest seeds whose MDE is at most `effect`, or None within `most`."""
    return next((n for n in range(3, most + 1) if mde(c, n, problems) <= effect), None)


def simulated_power(
    c: dict[str, Any], seeds: int, problems: int, effect: float, rng: np.random.Generator
) -> float:
    """The share of simulated campaigns the headline's rule calls significant in the effect's
    direction: per-problem differences δ + β_b + π_j + ε_bj drawn from the components."""
    hits = 0
    for _ in range(N_SIMS):
        beta = rng.normal(0, math.sqrt(c["sigma2_block"]), (seeds, 1))
        pi = rng.normal(0, math.sqrt(c["sigma2_problem_shared"]), (1, problems))
        eps = rng.normal(0, math.sqrt(c["sigma2_problem_own"]), (seeds, problems))
        d = effect + beta + pi + eps
        got = paired_delta(d, np.zeros_like(d), rng, N_BOOT)
        hits += got["significant"] and got["mean"] > 0
    return hits / N_SIMS


def campaign(name: str, folder: str, setting: str, rng: np.random.Generator) -> dict[str, Any]:
    """One campaign's components per comparison, pooled, the MDE table and its checks."""
    arms = blocks(RESULTS / folder, setting)
    uni = arms.get("uniform", {})
    found: dict[str, list[dict[str, Any]]] = {m: [] for m in METRICS}
    comparisons = []
    for arm, mine in sorted(arms.items()):
        paired = sorted(k for k in mine if k in uni)
        if arm == "uniform" or len(paired) < 2:
            continue
        got = components([mine[k] for k in paired], [uni[k] for k in paired], rng)
        comparisons.append({"arm": arm, "blocks": len(paired), "metrics": got})
        for m, c in got.items():
            found[m].append(c)
    pool = {m: pooled(found[m]) for m in METRICS}
    table: dict[str, Any] = {}
    for m, c in pool.items():
        if c is None:
            continue
        table[m] = {str(h): [{"seeds": n, "mde": mde(c, n, h)} for n in SEEDS] for h in PROBLEMS}
        if m.startswith("ratio"):  # as the saving the campaign can show: exp(MDE) x
            for h in PROBLEMS:
                for row in table[m][str(h)]:
                    row["detectable_saving"] = math.exp(row["mde"])
    checks = [
        {"metric": m, "seeds": n, "problems": h, "effect": mde(c, n, h),
         "simulated_power": simulated_power(c, n, h, mde(c, n, h), rng)}
        for m, c in pool.items() if c is not None and m in CHECKED
        for n in (3, 5, 8, 12) for h in (PROBLEMS[0], PROBLEMS[-1])
    ]  # fmt: skip
    return {
        "runs": f"results/{folder}/{setting}_*",
        "comparisons": comparisons,
        "pooled": pool,
        "mde": table,
        "simulated": checks,
        "recommendation": recommend(pool),
    }


def variance_upper(c: dict[str, Any], level: float = POWER) -> dict[str, Any]:
    """The components with σ²_β at its one-sided `level` upper confidence bound, df · s² /
    χ²(1 − level, df): the blocks behind the estimate are few. χ² by Wilson-Hilferty."""
    z = -0.8416212335729143 if level == 0.8 else None  # the standard normal's 0.2 quantile
    if z is None:
        raise ValueError(f"only the 80 % bound is tabulated; got {level}")
    k = c["df"]
    chi2 = k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3
    return {**c, "sigma2_block": c["sigma2_block"] * k / chi2}


def recommend(pool: dict[str, Any]) -> dict[str, Any]:
    """Per ratio metric and H, the fewest seeds that would show a SAVING-fold saving at the
    estimated between-block variance and at its 80 % upper bound (None beyond 1,000), and the
    smallest N of the grid (then the smallest H) that does, if any."""
    out: dict[str, Any] = {}
    effect = math.log(SAVING)
    for m in ("ratio_two_thirds", "ratio_all"):
        c = pool.get(m)
        if c is None:
            out[m] = None
            continue
        grid = [(n, h) for n in SEEDS for h in PROBLEMS if mde(c, n, h) <= effect]
        out[m] = {
            "seeds_needed": {str(h): seeds_needed(c, h, effect) for h in PROBLEMS},
            "seeds_needed_at_upper_variance": {
                str(h): seeds_needed(variance_upper(c), h, effect) for h in PROBLEMS
            },
            "in_grid": None if not grid else {"seeds": grid[0][0], "problems": grid[0][1]},
        }
    return out


# ---------------------------------------------------------------- output


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, c in result["campaigns"].items() if c["mde"]]
    fig, axes = plt.subplots(len(names), 2, figsize=(11, 3.6 * len(names)), squeeze=False)
    for row, name in zip(axes, names, strict=True):
        table = result["campaigns"][name]["mde"]
        for m, style in (("final_sampled", "-"), ("final_greedy", "--")):
            for h, color in zip(PROBLEMS, ("tab:blue", "tab:orange", "tab:green"), strict=True):
                if m in table:
                    pts = table[m][str(h)]
                    row[0].plot([p["seeds"] for p in pts], [p["mde"] for p in pts], style,
                                color=color, label=f"{m[6:]}, H {h}")  # fmt: skip
        row[0].set_ylabel("smallest detectable final Δ (pass@1)")
        for m, style, what in (("ratio_two_thirds", "-", "2/3"), ("ratio_all", "--", "all")):
            for h, color in zip(PROBLEMS, ("tab:blue", "tab:orange", "tab:green"), strict=True):
                if m in table:
                    pts = table[m][str(h)]
                    row[1].plot([p["seeds"] for p in pts], [p["detectable_saving"] for p in pts],
                                style, color=color, label=f"{what} of the gain, H {h}")  # fmt: skip
        if not any(m in table for m in ("ratio_two_thirds", "ratio_all")):
            row[1].text(0.5, 0.5, "no target: uniform gained nothing on average",
                        ha="center", transform=row[1].transAxes)  # fmt: skip
        row[1].axhline(SAVING, color="k", lw=0.8)
        row[1].set_yscale("log")
        row[1].set_ylabel("smallest detectable rollouts saving (×)")
        for ax in row:
            ax.set_xlabel("seeds (blocks)")
            ax.set_title(f"{name}: 80 % power, α = 0.05")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    rng = np.random.default_rng(0)
    result = {
        "benchmark": "power",
        "alpha": ALPHA,
        "power": POWER,
        "saving": SAVING,
        "seeds": list(SEEDS),
        "problems": list(PROBLEMS),
        "campaigns": {name: campaign(name, f, s, rng) for name, f, s in CAMPAIGNS},
    }
    (RESULTS / "power.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / "power.png")
    print(f"wrote {RESULTS / 'power.json'}")


if __name__ == "__main__":
    main()
