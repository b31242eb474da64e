"""Selection on a simulated pool with known pass rates: what each strategy finds per rollout.

The pool: N prompts (default 20 000) with a true pass rate p each — 35 % at 0, 15 % at 1, the
rest Beta(0.8, 0.8) (mass toward both ends, as real pools have). The sampler draws each answer's
correctness from p. "Truly informative" means 0.1 ≤ p ≤ 0.9. Everything downstream of the
sampler is the real code: `group_stats`, `screen_survivors`, `build_curriculum`, `history_prior`.

1. Strategies (precision / recall of the truly informative prompts against rollouts spent):
   two-stage (screen G = 8 → refine G = 32 on survivors → band), single-stage G = 8 and
   single-stage G = 40 (the n a refined prompt ends with), both through `build_curriculum`; and
   the open-r1 rule at G = 8 (keep 0.1 < k/8 < 0.9) as the usual baseline. Replay items are
   left out of the counts (they are all-correct by construction). "two-stage screen only" is the
   set the screen sends to refine (where recall is lost before the band); `informative_groups` is
   the expected share of training groups that are not constant, at each item's own G.
2. History prior over several nights: each night every prompt's logit p drifts (policy gets a
   little better: +0.15 ± 0.5 per night) and the pool is re-curated two-stage, with the prior
   (history = the last 3 nights' per-prompt stats, seed varied per night or fixed) or without.

Run: `python benchmarks/selection.py [--n 20000] [--nights 6] [--seeds 3]`
Writes benchmarks/results/selection.json and selection.png.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.selection import (
    CurateConfig,
    build_curriculum,
    group_stats,
    history_prior,
    screen_survivors,
)

RESULTS = Path(__file__).parent / "results"
BAND = (0.1, 0.9)


def pool(n: int, rng: np.random.Generator) -> tuple[pl.Series, np.ndarray]:
    """(ids, true pass rates): 35 % at 0, 15 % at 1, 50 % Beta(0.8, 0.8)."""
    kind = rng.choice(3, size=n, p=[0.35, 0.15, 0.5])
    p = np.where(kind == 0, 0.0, np.where(kind == 1, 1.0, rng.beta(0.8, 0.8, size=n)))
    ids = pl.Series("problem_id", [f"{i:016x}" for i in range(n)])
    return ids, p


def sample(ids: pl.Series, p: np.ndarray, g: int, rng: np.random.Generator) -> pl.DataFrame:
    """Rollouts of g binary answers per prompt, correct with probability p."""
    correct = rng.random((len(p), g)) < p[:, None]  # (N, G)
    return pl.DataFrame(
        {
            "problem_id": ids.gather(np.repeat(np.arange(len(p)), g)),
            "reward": correct.ravel().astype(np.float64),
            "correct": correct.ravel(),
        }
    )


def _selected(items: pl.DataFrame) -> pl.DataFrame:
    return items.filter(pl.col("reason") != "replay")


def score(selected: pl.Series, truth: dict[str, float], rollouts: int) -> dict[str, Any]:
    """Precision / recall of `selected` ids against 0.1 ≤ p ≤ 0.9."""
    informative = {pid for pid, p in truth.items() if BAND[0] <= p <= BAND[1]}
    chosen = set(selected.to_list())
    hits = len(chosen & informative)
    return {
        "rollouts": rollouts,
        "selected": len(chosen),
        "precision": hits / len(chosen) if chosen else 0.0,
        "recall": hits / len(informative),
    }


def with_train_quality(row: dict[str, Any], items: pl.DataFrame, truth: dict[str, float]) -> None:
    """Add the expected share of informative training groups at each item's own G."""
    main = _selected(items)
    if main.height == 0:
        row["informative_groups"] = 0.0
        return
    p = np.array([truth[pid] for pid in main["problem_id"]])
    g = main["group_size"].to_numpy()
    row["informative_groups"] = float(np.mean(1 - p**g - (1 - p) ** g))
    row["stage1"] = int((main["stage"] == 1).sum())
    row["stage2"] = int((main["stage"] == 2).sum())


def two_stage(
    ids: pl.Series, p: np.ndarray, cfg: CurateConfig, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Screen → refine survivors → curriculum. Returns (items, pooled counts, rollouts)."""
    screen = group_stats(sample(ids, p, cfg.screen_g, rng))
    out = screen_survivors(screen, cfg)
    pick = ids.is_in(out.refine["problem_id"].implode()).to_numpy()
    refine = group_stats(sample(ids.filter(pick), p[pick], cfg.refine_g, rng))
    both = (
        pl.concat([screen, refine])
        .group_by("problem_id")
        .agg(pl.col("n", "k").sum(), pl.col("reward_min").min(), pl.col("reward_max").max())
    )
    pooled = both.filter(pl.col("problem_id").is_in(out.refine["problem_id"].implode()))
    items, _ = build_curriculum(pooled, out.all_correct, cfg)
    return items, both, len(p) * cfg.screen_g + int(pick.sum()) * cfg.refine_g


def single_stage(
    ids: pl.Series, p: np.ndarray, g: int, cfg: CurateConfig, rng: np.random.Generator
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """G samples on everything, then the same curriculum rules. Returns (items, stats)."""
    stats = group_stats(sample(ids, p, g, rng))
    correct = stats.filter(pl.col("k") == pl.col("n"))
    rest = stats.filter(pl.col("k") < pl.col("n"))
    items, _ = build_curriculum(rest, correct, cfg)
    return items, stats


def compare_strategies(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    ids, p = pool(n, rng)
    truth = dict(zip(ids.to_list(), p.tolist(), strict=True))
    cfg = CurateConfig(seed=seed)
    rows = []
    items, both, spent = two_stage(ids, p, cfg, rng)
    refined = both.filter(pl.col("n") > cfg.screen_g)["problem_id"]
    rows.append({"strategy": "two-stage screen only", **score(refined, truth, spent)})
    rows.append(
        {"strategy": "two-stage 8 -> 32", **score(_selected(items)["problem_id"], truth, spent)}
    )
    with_train_quality(rows[-1], items, truth)
    for g in (8, 40):
        items, stats = single_stage(ids, p, g, cfg, rng)
        rows.append(
            {
                "strategy": f"single-stage G={g}",
                **score(_selected(items)["problem_id"], truth, n * g),
            }
        )
        with_train_quality(rows[-1], items, truth)
        if g == 8:
            rate = pl.col("k") / pl.col("n")
            kept = stats.filter((rate > BAND[0]) & (rate < BAND[1]))["problem_id"]
            rows.append({"strategy": "open-r1 rule G=8", **score(kept, truth, n * g)})
            flat = pl.DataFrame({"problem_id": kept, "group_size": g, "stage": 1, "reason": ""})
            with_train_quality(rows[-1], flat, truth)
    return rows


def drift(z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One night of policy change on the logit of p (clipped so 0 / 1 stay reachable)."""
    return np.clip(z + rng.normal(0.15, 0.5, size=len(z)), -12, 12)


def history_rows(both: pl.DataFrame, night: int) -> pl.DataFrame:
    """prompt_stats-like rows for one night's revision (binary rewards: flat = k in {0, n})."""
    return both.select(
        "problem_id",
        pl.lit(f"rev{night}").alias("model_revision"),
        "n",
        "k",
        ((pl.col("k") == 0) | (pl.col("k") == pl.col("n"))).alias("zero_variance"),
        pl.lit(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=night)).alias("last_seen"),
    )


def one_night(
    ids: pl.Series, p: np.ndarray, history: pl.DataFrame | None, cfg: CurateConfig, night: int
) -> tuple[dict[str, Any], pl.DataFrame]:
    rng = np.random.default_rng([night, 99])  # same draws for every arm of the same night
    truth = dict(zip(ids.to_list(), p.tolist(), strict=True))
    cands = ids.to_frame()
    if history is not None:
        cands, _ = history_prior(cands, history, cfg)
    pick = ids.is_in(cands["problem_id"].implode()).to_numpy()
    items, both, spent = two_stage(ids.filter(pick), p[pick], cfg, rng)
    row = {"night": night, **score(_selected(items)["problem_id"], truth, spent)}
    return row, history_rows(both, night)


def simulate_nights(n: int, nights: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    ids, p0 = pool(n, rng)
    z0 = np.log(np.clip(p0, 1e-6, 1 - 1e-6) / (1 - np.clip(p0, 1e-6, 1 - 1e-6)))
    arms: dict[str, list[dict[str, Any]]] = {"no prior": [], "prior, seed per night": [],
                                             "prior, fixed seed": []}  # fmt: skip
    hist: dict[str, list[pl.DataFrame]] = {arm: [] for arm in arms}
    z = z0
    for night in range(nights):
        p = 1 / (1 + np.exp(-z))
        p = np.where(p < 1e-5, 0.0, np.where(p > 1 - 1e-5, 1.0, p))
        for arm, rows in arms.items():
            cfg = CurateConfig(seed=night if arm == "prior, seed per night" else seed)
            history = pl.concat(hist[arm]) if arm != "no prior" and hist[arm] else None
            row, seen = one_night(ids, p, history, cfg, night)
            rows.append(row)
            hist[arm] = [*hist[arm], seen][-cfg.history_revisions :]
        z = drift(z, rng)
    return arms


def plot(
    strategies: list[dict[str, Any]], nights: dict[str, list[dict[str, Any]]], path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    ax = axes[0]
    for i, row in enumerate(strategies):
        x, color = row["rollouts"] / 1e3, f"C{i}"
        ax.scatter(x, row["recall"], marker="o", color=color, label=row["strategy"])
        ax.scatter(x, row["precision"], marker="x", color=color)
    ax.set(xlabel="rollouts spent (thousands)", ylabel="o recall, x precision")
    ax.set_title("strategies (mean over seeds)")
    ax.legend(fontsize=6)
    for arm, rows in nights.items():
        x = [r["night"] for r in rows]
        axes[1].plot(x, [r["rollouts"] / 1e3 for r in rows], marker="o", label=arm)
        axes[2].plot(x, [r["recall"] for r in rows], marker="o", label=arm)
    axes[1].set(xlabel="night", ylabel="rollouts spent (thousands)", title="history prior: cost")
    axes[2].set(xlabel="night", ylabel="recall of 0.1 ≤ p ≤ 0.9", title="history prior: recall")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def mean_rows(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Field-wise mean over seeds of rows that line up (strings kept from the first run)."""
    out = []
    for rows in zip(*runs, strict=True):
        merged = {k: (v if isinstance(v, str) else float(np.mean([r[k] for r in rows])))
                  for k, v in rows[0].items()}  # fmt: skip
        out.append(merged)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--nights", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    t0 = time.perf_counter()
    strategies = mean_rows([compare_strategies(args.n, s) for s in range(args.seeds)])
    nights = simulate_nights(args.n, args.nights, seed=0)
    result = {
        "n_prompts": args.n,
        "seeds": args.seeds,
        "pool": "35% p=0, 15% p=1, 50% Beta(0.8, 0.8); informative = 0.1 <= p <= 0.9",
        "config": CurateConfig().model_dump(exclude={"mix"}),
        "strategies_mean_over_seeds": strategies,
        "nights": nights,
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": platform.platform(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "selection.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(strategies, nights, RESULTS / "selection.png")
    print(json.dumps({"strategies": strategies, "nights": nights}, indent=1))


if __name__ == "__main__":
    main()
