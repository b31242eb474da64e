"""Forecast before you spend: difficulty models scored on the groups the committed headline runs
already recorded (no new rollouts). pipeline/selection/forecast.py holds the models and the
replay; this script feeds it the runs and writes the scores.

What it measures. Every finished run of `results/headline_runs/` (SmolLM2, warm and cold) and
`results/headline_tiny_runs/` (the tiny policy, cold) that kept its groups (`state.observations`:
problem, cell, k correct of n, update, in the order observed) is replayed in order; before each
update's groups every model forecasts each group's pass rate and P(informative) (0 < k < n) from
the groups of earlier updates of the same run only, as the selection saw them. Only the posterior
arms keep their groups (`sieve`, `sieve_screen`, `sieve_learning`); the other arms' files keep
per-step counts, not per-group outcomes, and are listed under `skipped`. Their committed state
was saved at the last evaluation mark, so the groups cover each run's first three quarters of
steps (`span`). The groups are the ones the sieve arm chose: the models are scored where the
product's selection looked, not on a uniform draw.

Settings: `real warm`, `real cold`, `tiny cold` (sieve), `tiny cold screen` (sieve_screen: also
its 4-sample screens), `... learning` (sieve_learning, once runs of it have finished). Models
(all see the same groups, in the same order, on the same clock):
- `posterior`: the product's model (`prompt_posterior`, default `PosteriorConfig`), P exact;
- `posterior at mean`: the same Beta, P(informative) read at its mean, as the runs recorded
  before the trainer's `predicted_informative` metric became the predictive (the replay is
  checked against the recorded numbers, whichever the run kept);
- `mopps`: the MoPPS-style arm's `BetaPosterior` (its defaults);
- `static (tuned)`: the product's model with a prior strength, a forgetting clock and cell
  settings chosen from GRID (no drift);
- `learning`: the same grid with drift and cell shifts (`LearningConfig.drift`, `cell_shift`);
- `learning + start prior`: `learning` (its grid, its own choice) plus, per cell, what the
  start weights were measured to pass at step 0, from the start file the run names (`start`):
  the train-split cell measurement (`cells`, 16 prompts x 8 samples) where the start has one
  (warm), else the held-out evaluation's sampled accuracy per cell (`by_level`, problems x
  `samples`); both were recorded before any arm ran;
- `learning (chosen on tiny)` (real settings only): `learning` with the settings best on all
  tiny runs, a transfer check.

Settings are chosen by leave-one-run-out within a family (real: the 7 real runs, warm and cold
together; tiny: its 10 runs): a run is forecast with the grid point of least Brier score
(informative) over the family's other runs, never on its own groups. GRID's axes, and the fixed
fields (`strength_groups`, `ridge`, `memory`), were set while developing on all runs.

Scores per setting and model, pooled over its runs: Brier and log loss of P(informative), Brier
and mean absolute error of the pass rate, calibration per quarter of the replayed span (|mean
predicted − realised informative share|, with the realised share's binomial standard error),
a reliability table (10 bins of predicted P), Brier per run, and the Brier difference to
`posterior` with a 95 % bootstrap interval that resamples runs and, within each, its updates.

Run: `.venv/bin/python benchmarks/forecast.py [--quick]` (`--quick`: one run per setting, one
grid point per model, → `forecast_quick.*`). Writes benchmarks/results/forecast.json and
forecast.png.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # headline.py's start prior

from pipeline.selection.forecast import (
    LearningConfig,
    LearningModel,
    MoppsPosterior,
    ProductPosterior,
    Stream,
    informative_probability,
    quarters,
    reliability,
    replay,
    scores,
)

RESULTS = Path(__file__).parent / "results"
FAMILIES = {"real": RESULTS / "headline_runs", "tiny": RESULTS / "headline_tiny_runs"}
# the arms that keep their groups
SETTING_OF = {"sieve": "", "sieve_screen": " screen", "sieve_learning": " learning"}
STRENGTHS = (0.5, 1.0, 2.0, None)  # None: matched online
CLOCKS = {"update": (0.9, 1.0), "group": (1.0, 0.7), "both": (0.9, 0.7)}  # (decay, forget)
CELLS = {"product": (8.0, 0.9), "slow": (2.0, 0.97)}  # (cell_strength, cell_decay)
QUICK = {"static (tuned)": (0.5, "update", "slow"), "learning": (1.0, "both", "slow")}
PLOTTED = ("posterior", "mopps", "static (tuned)", "learning", "learning + start prior")


def grid(drift: bool, quick: bool = False) -> list[LearningConfig]:
    axes = [QUICK["learning" if drift else "static (tuned)"]] if quick else None
    points = axes or list(itertools.product(STRENGTHS, CLOCKS, CELLS))
    return [
        LearningConfig(
            strength=s,
            decay=CLOCKS[c][0],
            forget=CLOCKS[c][1],
            cell_strength=CELLS[e][0],
            cell_decay=CELLS[e][1],
            drift=drift,
            cell_shift=drift,
        )
        for s, c, e in points
    ]


def label(cfg: LearningConfig) -> str:
    s = "matched" if cfg.strength is None else f"{cfg.strength:g}"
    clock = next(k for k, v in CLOCKS.items() if v == (cfg.decay, cfg.forget))
    cells = next(k for k, v in CELLS.items() if v == (cfg.cell_strength, cfg.cell_decay))
    return f"s={s} clock={clock} cells={cells}"


# ---------------------------------------------------------------- the runs


@dataclass
class Run:
    name: str
    arm: str
    family: str
    setting: str
    stream: Stream
    prior: dict[str, tuple[float, float]]
    prior_source: str
    steps: list[dict[str, Any]]
    group_size: int


def start_prior(folder: Path, p: dict[str, Any]) -> tuple[dict[str, tuple[float, float]], str]:
    """Per cell (k, n) the start weights were measured to pass before any arm ran: the prior
    the `sieve_learning` arm starts from (headline.py's `start_prior`)."""
    from headline import start_prior as measured

    path = folder / f"start_{p['setting']}_{p['start']}.json"
    start = json.loads(path.read_text())
    prior = measured(start, p["setup"]["cell_samples"], p["setup"]["samples"])
    source = "cells" if start.get("cells") else "by_level sampled"
    return dict(prior.cells) if prior else {}, f"{path.name}: {source}"


def load_runs(quick: bool) -> tuple[list[Run], list[dict[str, str]]]:
    runs: list[Run] = []
    skipped = []
    for family, folder in FAMILIES.items():
        for path in sorted(folder.glob("*_s*.json")):
            if path.name.startswith("start_"):
                continue
            p = json.loads(path.read_text())
            arm = p["arm"]
            why = (
                "not finished (done is false)"
                if not p["done"]
                else f"arm {arm} keeps per-step counts, not its groups"
                if not p["state"].get("observations")
                else None
            )
            if why:
                skipped.append({"run": f"{family}/{path.stem}", "reason": why})
                continue
            setting = f"{family} {p['setting']}{SETTING_OF[arm]}"
            if quick and any(r.setting == setting for r in runs):
                continue
            prior, source = start_prior(folder, p)
            stream = Stream.from_rows(p["state"]["observations"])
            runs.append(
                Run(
                    f"{family}/{path.stem}",
                    arm,
                    family,
                    setting,
                    stream,
                    prior,
                    source,
                    p["steps"],
                    p["setup"]["group_size"],
                )
            )
    return runs, skipped


# ---------------------------------------------------------------- forecasts


def forecast(run: Run, model: Any) -> dict[str, np.ndarray]:
    a, b = replay(run.stream, model)
    return {"p_inf": informative_probability(a, b, run.stream.n), "p_hat": a / (a + b)}


def sq_error(run: Run, f: dict[str, np.ndarray]) -> np.ndarray:
    return (f["p_inf"] - run.stream.informative) ** 2


def tuned(
    runs: list[Run], cfgs: list[LearningConfig], prior: bool = False
) -> tuple[list[list[dict[str, np.ndarray]]], np.ndarray]:
    """Every grid point's forecasts of every run, and their Brier sums (configs, runs)."""
    out, sse = [], np.zeros((len(cfgs), len(runs)))
    for i, cfg in enumerate(cfgs):
        row = []
        for j, run in enumerate(runs):
            f = forecast(run, LearningModel(cfg, run.prior if prior else None))
            sse[i, j] = sq_error(run, f).sum()
            row.append(f)
        out.append(row)
        print(f"  {label(cfg)}: {sse[i].sum() / sum(len(r.stream) for r in runs):.4f}", flush=True)
    return out, sse


def leave_one_out(runs: list[Run], sse: np.ndarray) -> list[int]:
    """Per run, the grid point of least Brier sum over the other runs of its family."""
    groups = np.array([len(r.stream) for r in runs], dtype=np.float64)
    fam = np.array([r.family for r in runs])
    picks = []
    for j, run in enumerate(runs):
        others = (fam == run.family) & (np.arange(len(runs)) != j)
        if not others.any():  # a family of one run (--quick): its own fit is all there is
            others = fam == run.family
        picks.append(int(np.argmin(sse[:, others].sum(axis=1) / groups[others].sum())))
    return picks


def recorded_check(run: Run, post: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """The replayed posterior against the forecast the run recorded per step: at its mean
    (`predicted_informative`, runs recorded before the predictive was) or the predictive itself
    (`expected_informative`, the static model's `sieve` arm only: the replay is that model);
    and the recorded forecast's calibration per quarter over all the run's steps."""
    recorded = [s.get("predicted_informative") for s in run.steps]
    plug = post["plug_in"]
    if any(x is None for x in recorded):
        recorded, plug = [s.get("expected_informative") for s in run.steps], post["p_inf"]
        if run.arm != "sieve" or any(x is None for x in recorded):
            return None
    u = run.stream.update
    gaps = [abs(float(plug[u == t].mean()) - recorded[t]) for t in np.unique(u)]
    q = np.minimum(4 * np.arange(len(run.steps)) // len(run.steps), 3)
    share = [s["informative"] / s["groups"] if s["groups"] else np.nan for s in run.steps]
    return {
        "steps": len(run.steps),
        "steps_replayed": len(gaps),
        "max_abs_difference": float(max(gaps)),
        "quarters": [
            {
                "predicted": float(np.nanmean(np.array(recorded)[q == i])),
                "realised": float(np.nanmean(np.array(share)[q == i])),
            }
            for i in range(4)
        ],
    }


def bootstrap_difference(
    runs: list[Run], mine: list[np.ndarray], base: list[np.ndarray], draws: int = 2000
) -> list[float]:
    """95 % interval of the pooled Brier difference (mine − base), resampling runs and, within
    each, its updates (every group of a drawn update comes with it)."""
    rng = np.random.default_rng(0)
    per = []
    for run, a, b in zip(runs, mine, base, strict=True):
        _, inv = np.unique(run.stream.update, return_inverse=True)
        per.append((np.bincount(inv, a - b), np.bincount(inv)))
    out = []
    for _ in range(draws):
        num = den = 0.0
        for j in rng.integers(0, len(per), len(per)):
            d, c = per[j]
            pick = rng.integers(0, len(d), len(d))
            num, den = num + d[pick].sum(), den + c[pick].sum()
        out.append(num / den)
    return [float(np.percentile(out, 2.5)), float(np.percentile(out, 97.5))]


def summarise(
    runs: list[Run], models: dict[str, list[dict[str, np.ndarray]]], chosen: dict[str, list[str]]
) -> dict[str, Any]:
    """Per setting, per model: the pooled scores, quarters, reliability, runs, difference."""
    out: dict[str, Any] = {}
    for setting in dict.fromkeys(r.setting for r in runs):
        idx = [j for j, r in enumerate(runs) if r.setting == setting]
        rs = [runs[j] for j in idx]
        k = np.concatenate([r.stream.k for r in rs])
        n = np.concatenate([r.stream.n for r in rs])
        q = np.concatenate([quarters(r.stream.update) for r in rs])
        y = ((k > 0) & (k < n)).astype(np.float64)
        base = [sq_error(runs[j], models["posterior"][j]) for j in idx]
        mopps = [sq_error(runs[j], models["mopps"][j]) for j in idx]
        entry: dict[str, Any] = {
            "runs": [r.name for r in rs],
            "groups": len(k),
            "span": [
                f"updates {int(r.stream.update.min())}-{int(r.stream.update.max())} of "
                f"{len(r.steps)} steps"
                for r in rs
            ],
            "start_prior": sorted({r.prior_source for r in rs}),
            "models": {},
        }
        for name, fs in models.items():
            if fs[idx[0]] is None:
                continue
            p_inf = np.concatenate([fs[j]["p_inf"] for j in idx])
            p_hat = np.concatenate([fs[j]["p_hat"] for j in idx])
            sc = scores(p_inf, p_hat, k, n, q)
            mine = [sq_error(runs[j], fs[j]) for j in idx]
            sc["quarters"] = sc.pop("parts")
            sc["max_quarter_error"] = max(x["error"] for x in sc["quarters"])
            sc["brier_per_run"] = [float(m.mean()) for m in mine]
            for other, ref in (("posterior", base), ("mopps", mopps)):
                if name != other:
                    sc[f"brier_minus_{other}"] = {
                        "diff": float(np.concatenate(mine).mean() - np.concatenate(ref).mean()),
                        "ci95": bootstrap_difference(rs, mine, ref),
                    }
            sc["reliability"] = reliability(p_inf, y)
            if name in chosen:
                sc["settings_per_run"] = [chosen[name][j] for j in idx]
            entry["models"][name] = sc
        out[setting] = entry
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = result["settings"]
    fig, axes = plt.subplots(2, len(settings), figsize=(4.2 * len(settings), 7.6), squeeze=False)
    colour = dict(
        zip(PLOTTED, ["tab:blue", "tab:purple", "tab:gray", "tab:orange", "tab:green"], strict=True)
    )
    for col, (setting, entry) in enumerate(settings.items()):
        top, bottom = axes[0][col], axes[1][col]
        top.plot([0, 1], [0, 1], color="k", lw=0.8, ls=":")
        for name in PLOTTED:
            m = entry["models"].get(name)
            if m is None:
                continue
            rel = [b for b in m["reliability"] if b["groups"] >= 10]  # a handful is noise
            top.plot(
                [b["predicted"] for b in rel],
                [b["realised"] for b in rel],
                "o-",
                ms=3,
                color=colour[name],
                label=f"{name} (Brier {m['brier']:.3f})",
            )
            bottom.plot(
                range(1, 5),
                [x["error"] for x in m["quarters"]],
                "o-",
                ms=3,
                color=colour[name],
                label=name,
            )
        top.set_title(f"{setting}: {entry['groups']} groups, {len(entry['runs'])} runs")
        top.set_xlabel("predicted P(informative) (bins of ≥ 10 groups)")
        top.set_ylabel("realised informative share")
        top.legend(fontsize=7)
        bottom.axhline(0.05, color="k", ls="--", lw=1, label="goal 0.05")
        bottom.set_xticks(range(1, 5))
        bottom.set_xlabel("quarter of the replayed span")
        bottom.set_ylabel("|predicted − realised| informative share")
        bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def product_forecasts(runs: list[Run]) -> list[dict[str, np.ndarray]]:
    """The product's posterior per run: P(informative) exact, and at the mean (as recorded)."""
    out = []
    for run in runs:
        a, b = replay(run.stream, ProductPosterior())
        m, g = a / (a + b), run.stream.n
        out.append(
            {
                "p_inf": informative_probability(a, b, g),
                "p_hat": m,
                "plug_in": 1.0 - m**g - (1.0 - m) ** g,
            }
        )
    return out


def tuned_models(runs: list[Run], quick: bool) -> tuple[dict[str, list[Any]], dict[str, list[str]]]:
    """The grid's models, each run forecast with the grid point chosen on the other runs."""
    models: dict[str, list[Any]] = {}
    chosen: dict[str, list[str]] = {}
    for name, drift, prior in (
        ("static (tuned)", False, False),
        ("learning", True, False),
        ("learning + start prior", True, True),
    ):
        cfgs = grid(drift, quick)
        print(f"{name}: {len(cfgs)} grid points", flush=True)
        fs, sse = tuned(runs, cfgs, prior)
        picks = leave_one_out(runs, sse)
        models[name] = [fs[i][j] for j, i in enumerate(picks)]
        chosen[name] = [label(cfgs[i]) for i in picks]
        if name == "learning":
            tiny = np.array([r.family == "tiny" for r in runs])
            best = int(np.argmin(sse[:, tiny].sum(axis=1))) if tiny.any() else 0
            models["learning (chosen on tiny)"] = [
                fs[best][j] if r.family == "real" else None for j, r in enumerate(runs)
            ]
            chosen["learning (chosen on tiny)"] = [label(cfgs[best])] * len(runs)
    return models, chosen


def recorded_by_setting(runs: list[Run], post: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """`recorded_check` per run, and per setting the recorded forecast's calibration per quarter
    of all the runs' steps (means over the runs; each run has as many steps)."""
    per = {r.name: (r.setting, recorded_check(r, f)) for r, f in zip(runs, post, strict=True)}
    out: dict[str, Any] = {"runs": {k: v for k, (_, v) in per.items() if v is not None}}
    for setting in dict.fromkeys(s for s, v in per.values() if v is not None):
        got = [v for s, v in per.values() if s == setting and v is not None]
        qs = []
        for i in range(4):
            pred = float(np.mean([g["quarters"][i]["predicted"] for g in got]))
            real = float(np.mean([g["quarters"][i]["realised"] for g in got]))
            qs.append({"predicted": pred, "realised": real, "error": abs(pred - real)})
        out[setting] = {"runs": len(got), "quarters": qs}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run per setting, one grid point")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    began = time.perf_counter()
    runs, skipped = load_runs(args.quick)
    post = product_forecasts(runs)
    models: dict[str, list[Any]] = {
        "posterior": post,
        "posterior at mean": [{"p_inf": f["plug_in"], "p_hat": f["p_hat"]} for f in post],
        "mopps": [forecast(r, MoppsPosterior()) for r in runs],
    }
    tuned_fs, chosen = tuned_models(runs, args.quick)
    models.update(tuned_fs)
    result: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "protocol": {
            "clock": "a group at update u is forecast from the groups of updates < u",
            "settings_chosen_by": "leave one run out within a family (real: 7 runs; tiny: 10), "
            "least Brier (informative) over the other runs",
            "grid": {
                "strength": ["matched" if s is None else s for s in STRENGTHS],
                "clock (decay per update, forget per group)": CLOCKS,
                "cells (cell_strength, cell_decay)": CELLS,
            },
            "fixed": {
                f.name: getattr(LearningConfig(), f.name)
                for f in fields(LearningConfig)
                if f.name in ("strength_groups", "ridge", "memory", "cap", "floor")
            },
            "interval": "95 % bootstrap over runs and, within each, updates (2000 draws)",
            "quarter_se": "binomial standard error of the realised share (groups independent)",
        },
        "skipped": skipped,
        "settings": summarise(runs, models, chosen),
        "recorded_check": recorded_by_setting(runs, post),
    }
    result["seconds"] = round(time.perf_counter() - began, 1)
    name = "forecast_quick" if args.quick else "forecast"
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.results / f"{name}.png")
    for setting, entry in result["settings"].items():
        print(setting)
        for m, sc in entry["models"].items():
            qs = " ".join(f"{x['error']:.2f}" for x in sc["quarters"])
            print(
                f"  {m:28s} Brier {sc['brier']:.4f}  log loss {sc['log_loss']:.3f}  "
                f"rate MAE {sc['rate_mae']:.3f}  quarters {qs}"
            )


if __name__ == "__main__":
    main()
