"""The selection headline's statistics (benchmarks/headline.py) and its power analysis
(benchmarks/power.py): paired differences with a crossed bootstrap over blocks and the held-out
problems they share, seed-level t intervals beside it, and rollouts to targets that favour
neither arm, read from isotonic fits of each run's greedy curve.

- **Crossed bootstrap.** Every block (one seed from one start) scores the same held-out
  problems, so an arm's advantage on a problem recurs in every block. Drawing problems afresh
  inside each block treats that shared part as noise that averages out over blocks, and the
  interval comes out too narrow. A crossed replicate draws the blocks with replacement and one
  draw of problems that every block of the replicate uses (Owen 2007's pigeonhole bootstrap,
  slightly conservative).
- **t over blocks.** A percentile bootstrap over 3-5 blocks undercovers; the Student t interval
  on the per-block values (n − 1 df) does not, for normal block effects. A difference is called
  significant only when both intervals exclude no-difference.
- **Targets from the seed mean.** A target set by uniform's own final in each block is reached
  by uniform's isotonic fit by construction (the fit's last value is at least its last point),
  so an identical arm looks slower. Here each block's targets are its start plus 1/3, 2/3 and
  all of uniform's mean gain over the compared blocks, the same for both runs of a block. A run
  that never reaches a target is counted at its last rollouts (a lower bound), on either side,
  and the blocks are listed. Ratios are geometric means over blocks (a mean of ratios is above 1
  for identical arms).
- **Per-problem scores between marks.** The runs record per-problem greedy scores at the start
  and the end; at a mark in between (mean accuracy only, for runs that predate recording it) a
  replicate moves the point by its problem draw's shift interpolated in rollouts between the
  nearest marks that have scores.

Calibration on synthetic campaigns (`python benchmarks/headline_stats.py`, results/
headline_stats.json + .png): how often identical arms are called different, whether the ratio
interval covers 1 for them, and how often a 1.5x or 2x faster arm is found, by blocks.

Test: `.venv/bin/pytest tests/test_headline_stats.py -q`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LEVEL = 0.95  # two-sided interval level
N_BOOT = 10_000  # bootstrap replicates per interval in the summary
FRACTIONS = (1 / 3, 2 / 3, 1.0)  # of uniform's seed-mean gain over the start


# ---------------------------------------------------------------- Student's t


def t_two_sided(x: float, df: int) -> float:
    """P(|T| ≤ x) for Student's t with integer `df` (Abramowitz & Stegun 26.7.3-4, exact)."""
    th = math.atan(abs(x) / math.sqrt(df))
    s, c2 = math.sin(th), math.cos(th) ** 2
    if df % 2 == 0:
        term = total = 1.0
        for k in range(1, df // 2):
            term *= (2 * k - 1) / (2 * k) * c2
            total += term
        return s * total
    total, term = 0.0, math.cos(th)
    for k in range(1, (df - 1) // 2 + 1):
        total += term
        term *= 2 * k / (2 * k + 1) * c2
    return 2 / math.pi * (th + s * total)


@functools.cache
def t_quantile(q: float, df: int) -> float:
    """The `q` quantile of Student's t with integer `df` ≥ 1, by bisection to 1e-10."""
    if not 0.0 < q < 1.0 or df < 1:
        raise ValueError(f"need 0 < q < 1 and df ≥ 1; got q={q}, df={df}")
    target, lo, hi = abs(2 * q - 1), 0.0, 1.0
    while t_two_sided(hi, df) < target:
        hi *= 2
    while hi - lo > 1e-10 * max(1.0, hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided(mid, df) < target else (lo, mid)
    return math.copysign((lo + hi) / 2, q - 0.5)


def t_interval(vals: Sequence[float], level: float = LEVEL) -> list[float] | None:
    """mean ± t(n − 1) · s / √n over `vals` (one value per block); None under two values."""
    v = np.asarray(vals, dtype=np.float64)
    if len(v) < 2:
        return None
    half = t_quantile(0.5 + level / 2, len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))
    return [float(v.mean()) - half, float(v.mean()) + half]


# ---------------------------------------------------------------- the crossed bootstrap


def draw_counts(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """(n, k): how often each of k items is drawn in each of n draws of k with replacement."""
    idx = rng.integers(0, k, (n, k)) + k * np.arange(n)[:, None]
    return np.bincount(idx.ravel(), minlength=n * k).reshape(n, k).astype(np.float64)


def crossed_weights(
    rng: np.random.Generator, n: int, blocks: int, problems: int
) -> tuple[np.ndarray, np.ndarray]:
    """`n` replicates' draw counts: blocks (n, B) and problems (n, H), each drawn with
    replacement; one problem draw per replicate, shared by every block in it."""
    return draw_counts(rng, n, blocks), draw_counts(rng, n, problems)


def _excludes(ci: list[float] | None, null: float) -> bool:
    return ci is not None and (ci[0] > null or ci[1] < null)


def verdict(point: float, boots: np.ndarray, per_block: np.ndarray, log: bool) -> dict[str, Any]:
    """A paired statistic's summary: the point, the crossed bootstrap's percentile interval, the
    t interval over blocks; `log` statistics are reported as ratios (exp of each)."""
    tail = 100 * (1 - LEVEL) / 2
    ci = [float(x) for x in np.percentile(boots, [tail, 100 - tail])]
    t = t_interval(per_block)
    f = np.exp if log else (lambda x: x)
    null = 1.0 if log else 0.0
    out = {
        "mean": float(f(point)),
        "ci95": [float(f(x)) for x in ci],
        "t_ci95": None if t is None else [float(f(x)) for x in t],
        "seeds": len(per_block),
    }
    # both intervals must exclude no difference: the bootstrap covers the shared problems, the t
    # interval the small number of blocks; one block has no interval over blocks at all
    out["significant"] = _excludes(out["ci95"], null) and _excludes(out["t_ci95"], null)
    return out


def paired_delta(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    rng: np.random.Generator,
    n: int = N_BOOT,
) -> dict[str, Any]:
    """Mean of a − b over blocks (rows) and held-out problems (columns, the same problems in
    every block), with the crossed bootstrap's interval and the t interval over blocks."""
    sizes = {len(row) for row in (*a, *b)}
    if len(sizes) != 1:
        raise ValueError(
            f"per-problem scores of {sorted(sizes)} problems: the runs scored different held-out "
            "sets, and a paired Δ needs one set; compare only runs of one evaluation"
        )
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)  # (B, H)
    nb, h = d.shape
    wb, wp = crossed_weights(rng, n, nb, h)
    boots = ((wb @ d) * wp).sum(1) / (nb * h)  # (n,)
    return {**verdict(float(d.mean()), boots, d.mean(1), log=False), "problems": h}


def seed_bootstrap(
    vals: Sequence[float], rng: np.random.Generator, n: int = N_BOOT
) -> dict[str, Any]:
    """One arm's level over its seeds: the mean and a bootstrap interval over seeds."""
    v = np.asarray(vals, dtype=np.float64)
    boots = v[rng.integers(0, len(v), (n, len(v)))].mean(1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"mean": float(v.mean()), "ci95": [float(lo), float(hi)], "seeds": len(v)}


# ---------------------------------------------------------------- curves


def isotonic_rows(y: np.ndarray) -> np.ndarray:
    """The non-decreasing least-squares fit of each row of `y` (n, m), by the min-max formula
    fit_i = max_{a ≤ i} min_{b ≥ i} mean(y[a..b]) (m is a handful of marks)."""
    n, m = y.shape
    cum = np.concatenate([np.zeros((n, 1)), np.cumsum(y, 1)], 1)
    a, b = np.arange(m)[:, None], np.arange(m)[None, :]
    span = np.where(b >= a, b - a + 1, 1)
    means = (cum[:, None, 1:] - cum[:, :-1, None]) / span  # (n, a, b)
    out = np.empty_like(y)
    for i in range(m):
        out[:, i] = means[:, : i + 1, i:].min(2).max(1)
    return out


def reach_rows(x: np.ndarray, fit: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Where each row of the non-decreasing `fit` (n, m) at rollouts `x` (m,) first reaches its
    `target` (n,), linearly between marks; NaN where it never does."""
    hit = fit >= target[:, None]
    i = hit.argmax(1)
    rows = np.arange(len(fit))
    j = np.maximum(i - 1, 0)
    y0, y1 = fit[rows, j], fit[rows, i]
    frac = np.divide(target - y0, y1 - y0, out=np.zeros_like(y0), where=y1 > y0)
    out = np.where(i == 0, x[0], x[j] + (x[i] - x[j]) * frac)
    return np.where(hit.any(1), out, np.nan)


@dataclass(frozen=True)
class Curve:
    """One run's greedy curve: rollouts sampled at each mark (m,), accuracy there (m,), and the
    per-problem scores (k, H) of the marks `rows` that recorded them (the start, the end)."""

    x: np.ndarray
    y: np.ndarray
    rows: tuple[int, ...]
    per_problem: np.ndarray

    def replicates(self, wp: np.ndarray) -> np.ndarray:
        """The curve under each replicate's problem draw `wp` (n, H): (n, m)."""
        if not self.rows:
            return np.broadcast_to(self.y, (len(wp), len(self.y))).copy()
        h = self.per_problem.shape[1]
        shift = (wp / h) @ self.per_problem.T - self.per_problem.mean(1)  # (n, k)
        known = self.x[list(self.rows)]
        interp = np.stack(
            [np.interp(self.x, known, e) for e in np.eye(len(self.rows))], 1
        )  # (m, k): each mark's shift from the marks with scores
        return self.y + shift @ interp.T


def run_curve(r: dict[str, Any], start: dict[str, Any]) -> Curve:
    """A finished run's greedy curve with the per-problem scores it recorded: its start's (from
    the start record; a constant, which no problem draw moves, where the record has none), any
    intermediate mark's, and its final's."""
    pts = r["curve"]
    final = np.asarray(r["final"]["per_problem_greedy"], dtype=np.float64)
    first = start.get("per_problem_greedy")
    if first is None or len(first) != len(final):
        first = np.full(len(final), pts[0]["greedy"])
    mid = [i for i in range(1, len(pts) - 1) if pts[i].get("per_problem_greedy") is not None]
    per = [first, *(pts[i]["per_problem_greedy"] for i in mid), final]
    return Curve(
        np.array([c["rollouts"] for c in pts], dtype=np.float64),
        np.array([c["greedy"] for c in pts], dtype=np.float64),
        (0, *mid, len(pts) - 1),
        np.asarray(per, dtype=np.float64),  # (marks with scores, H)
    )


def auc_weights(x: np.ndarray, budget: float) -> np.ndarray:
    """w (m,) with y @ w the mean of the piecewise-linear curve through (x, y) over [0, budget]
    (flat after its last mark): the area under it normalised by the budget."""
    w = np.zeros(len(x))
    dx = np.diff(x)
    w[:-1] += dx / 2
    w[1:] += dx / 2
    w[-1] += max(0.0, budget - x[-1])
    return w / budget


def curve_stats(
    arm: Sequence[Curve], uni: Sequence[Curve], wb: np.ndarray, wp: np.ndarray, budget: float
) -> dict[str, Any]:
    """`replicate_stats` with one problem draw per replicate (rows of wp) shared by every run."""
    ya = [c.replicates(wp) for c in arm]
    yu = [c.replicates(wp) for c in uni]
    return replicate_stats(arm, uni, ya, yu, wb, budget)


def replicate_stats(
    arm: Sequence[Curve],
    uni: Sequence[Curve],
    ya: Sequence[np.ndarray],
    yu: Sequence[np.ndarray],
    wb: np.ndarray,
    budget: float,
) -> dict[str, Any]:
    """Per replicate, from each block's curves under it (`ya`, `yu`: B x (n, m)) and the block
    draw counts `wb` (n, B): for every fraction of uniform's seed-mean gain, the log ratio of the
    arm's rollouts to uniform's per block and where each never reached it; the paired area
    under the gain curves per block; and the seed-mean gain itself."""
    start = np.stack([y[:, 0] for y in yu], 1)  # (n, B): both runs of a block share it
    gain = np.stack([y[:, -1] for y in yu], 1) - start
    g = (wb * gain).sum(1) / wb.sum(1)  # (n,): uniform's seed-mean gain in each replicate
    fa = [isotonic_rows(y) for y in ya]
    fu = [isotonic_rows(y) for y in yu]
    out: dict[str, Any] = {"gain": g, "fractions": []}
    for f in FRACTIONS:
        target = start + f * g[:, None]  # (n, B)
        ra, ru = _reach(arm, fa, target), _reach(uni, fu, target)
        log = _log_spent(arm, ra) - _log_spent(uni, ru)
        log[g <= 0] = 0.0  # no gain to reach: both reach it at once
        out["fractions"].append(
            {"log": log, "arm": ra, "uniform": ru, "arm_missed": np.isnan(ra),
             "uniform_missed": np.isnan(ru)}
        )  # fmt: skip
    auc = np.stack(
        [ya[i] @ auc_weights(arm[i].x, budget) - yu[i] @ auc_weights(uni[i].x, budget)
         for i in range(len(arm))], 1
    )  # fmt: skip
    out["auc"] = auc  # (n, B): the start cancels, both runs of a block share it
    return out


def _reach(curves: Sequence[Curve], fits: Sequence[np.ndarray], target: np.ndarray) -> np.ndarray:
    """(n, B): where each block's fit first reaches its target; NaN where it never does."""
    hits = [reach_rows(c.x, fits[i], target[:, i]) for i, c in enumerate(curves)]
    return np.stack(hits, 1)


def _log_spent(curves: Sequence[Curve], reach: np.ndarray) -> np.ndarray:
    """log rollouts to the target; a run that never reached it counts at its last rollouts, a
    lower bound (its fit may reach the target only past the budget)."""
    last = np.array([c.x[-1] for c in curves])
    return np.log(np.maximum(np.where(np.isnan(reach), last, reach), 1.0))


def compare_curves(
    arm: Sequence[Curve],
    uni: Sequence[Curve],
    labels: Sequence[str],
    rng: np.random.Generator,
    n: int = N_BOOT,
    budget: float | None = None,
) -> dict[str, Any]:
    """Arm against uniform over paired blocks (`labels`): rollouts to 1/3, 2/3 and all of
    uniform's seed-mean greedy gain as geometric-mean ratios, and the paired area under the
    gain curves per rollout (the mean gain over the budget), each with the crossed bootstrap's
    interval and the t interval over blocks."""
    nb = len(arm)
    h = arm[0].per_problem.shape[1] if arm[0].rows else 1
    budget = budget or max(float(c.x[-1]) for c in (*arm, *uni))
    point = curve_stats(arm, uni, np.ones((1, nb)), np.ones((1, h)), budget)
    wb, wp = crossed_weights(rng, n, nb, h)
    boot = curve_stats(arm, uni, wb, wp, budget)
    gain = float(point["gain"][0])
    targets = []
    for f, p, b in zip(FRACTIONS, point["fractions"], boot["fractions"], strict=True):
        entry: dict[str, Any] = {"fraction_of_uniform_gain": f, "ratio_to_uniform": None}
        if gain <= 0:  # uniform gained nothing on average: no target to reach
            targets.append({**entry, "not_reached_paired": [], "uniform_not_reached": []})
            continue
        per_block = p["log"][0]
        targets.append(
            {
                **entry,
                "rollouts_by_block": _by_block(labels, p["arm"][0]),
                "uniform_rollouts_by_block": _by_block(labels, p["uniform"][0]),
                "not_reached_paired": _missed(labels, p["arm_missed"][0]),
                "uniform_not_reached": _missed(labels, p["uniform_missed"][0]),
                "ratio_to_uniform": verdict(
                    float(per_block.mean()), (wb * b["log"]).sum(1) / nb, per_block, log=True
                ),
            }
        )
    auc = point["auc"][0]
    return {
        "target_gain": gain,
        "budget": budget,
        "targets": targets,
        "auc_gain_delta": verdict(
            float(auc.mean()), (wb * boot["auc"]).sum(1) / nb, auc, log=False
        ),
    }


def _by_block(labels: Sequence[str], vals: np.ndarray) -> dict[str, float | None]:
    return {s: None if np.isnan(v) else float(v) for s, v in zip(labels, vals, strict=True)}


def _missed(labels: Sequence[str], missed: np.ndarray) -> list[str]:
    return [s for s, m in zip(labels, missed, strict=True) if m]


# ---------------------------------------------------------------- synthetic campaigns

MARKS = np.array([0.0, 512, 1024, 1536, 2048])  # the real protocol's marks, in rollouts


def synthetic_campaign(
    rng: np.random.Generator, blocks: int, speed: float, problems: int = 200, n: int = 200
) -> dict[str, Any]:
    """`compare_curves` on one synthetic campaign of `blocks` paired runs sharing held-out
    problems: each problem has a difficulty and a learnability every run shares; each run learns
    at its own pace (lognormal around `speed` for the arm, 1 for uniform) and each mark scores
    every problem 0/1 from the run's pass rate there (every mark records per-problem scores)."""
    difficulty = rng.normal(-1.0, 1.5, problems)
    learnable = rng.gamma(2.0, 0.5, problems)
    start = (rng.random(problems) < 1 / (1 + np.exp(-difficulty))).astype(float)

    def run(pace: float) -> Curve:
        u = pace * np.exp(0.3 * rng.normal())
        z = difficulty[None] + learnable[None] * (1 - np.exp(-u * MARKS[:, None] / 1024))
        scores = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(float)
        scores[0] = start  # every run of the campaign starts from the same weights
        return Curve(MARKS, scores.mean(1), tuple(range(len(MARKS))), scores)

    arm = [run(speed) for _ in range(blocks)]
    uni = [run(1.0) for _ in range(blocks)]
    return compare_curves(arm, uni, [str(b) for b in range(blocks)], rng, n=n)


SPEEDS = (1.0, 1.5, 2.0)
BLOCKS = (4, 8, 16)
CAMPAIGNS_PER_CELL = 100


def calibration(campaigns: int = CAMPAIGNS_PER_CELL) -> dict[str, Any]:
    """Per arm speed and blocks: the share of campaigns whose ratio to two thirds of uniform's
    gain is called significantly below 1 (for speed 1: the false-positive rate), its interval's
    coverage of the true no-difference (speed 1 only), the median ratio, and the AUC delta's
    significant share."""
    cells = []
    for speed in SPEEDS:
        for blocks in BLOCKS:
            rng = np.random.default_rng(int(1000 * speed) + blocks)
            found = [synthetic_campaign(rng, blocks, speed) for _ in range(campaigns)]
            ratios = [f["targets"][1]["ratio_to_uniform"] for f in found]
            cells.append(
                {
                    "speed": speed,
                    "blocks": blocks,
                    "campaigns": campaigns,
                    "called_faster": float(
                        np.mean([r["significant"] and r["mean"] < 1 for r in ratios])
                    ),
                    "called_different": float(np.mean([r["significant"] for r in ratios])),
                    "ci_covers_1": float(
                        np.mean([r["ci95"][0] <= 1 <= r["ci95"][1] for r in ratios])
                    ),
                    "median_ratio": float(np.median([r["mean"] for r in ratios])),
                    "auc_significant": float(
                        np.mean([f["auc_gain_delta"]["significant"] for f in found])
                    ),
                }
            )
    return {"benchmark": "headline_stats", "target": "two thirds of uniform's gain",
            "problems": 200, "bootstrap": 200, "cells": cells}  # fmt: skip


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for speed in SPEEDS:
        rows = [c for c in result["cells"] if c["speed"] == speed]
        name = f"arm {speed:g}x as fast" + (" (false positives)" if speed == 1 else "")
        ax.plot([c["blocks"] for c in rows], [c["called_faster"] for c in rows], "o-", label=name)
    ax.axhline(0.05, color="k", lw=0.8, ls="--")
    ax.axhline(0.8, color="k", lw=0.8, ls=":")
    ax.set_xlabel("blocks (paired seeds)")
    ax.set_ylabel("share of campaigns called faster")
    ax.set_title("crossed bootstrap + t, synthetic campaigns")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    results = Path(__file__).parent / "results"
    result = calibration()
    (results / "headline_stats.json").write_text(json.dumps(result, indent=1))
    plot(result, results / "headline_stats.png")
    print(f"wrote {results / 'headline_stats.json'}")


if __name__ == "__main__":
    main()
