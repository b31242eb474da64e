"""How long the real headline campaign takes per step and in all, by the code each run ran.

Reads the committed run files of the real campaign (results/headline_runs/*.json: every step's
`seconds` and 1-minute `load_1m`, each run's `commits` and total `seconds`) and writes
results/campaign_time.json + PNG:

- per arm x code commit: steps, the median seconds per step over *quiet* steps (1-minute load
  at most QUIET_LOAD: the campaign alone keeps about 2 runnable threads on these 2 cores; steps
  taken while a test suite or a CI check shared the machine are counted but left out of the
  median), the median over all steps, the first step apart (it starts the engine), and what a
  run spends outside its steps (held-out evaluations at the marks, the warm start's load);
- the ratio of the newest commit's quiet median to the oldest one's, per arm that ran at both;
- the projected wall time of the runs still to do (`--runs`, the driver's list by default): each
  at its arm's quiet median at the newest commit that has one (else any commit, said per run)
  times the run's updates, plus the arm's measured time outside the steps, on a quiet machine.

Issue 48 asks for the projected campaign wall time after its faster update; the step time of the
product's night, not of one update, is what a campaign pays, so this reads it from the campaign.

    .venv/bin/python benchmarks/campaign_time.py          (seconds; no model needed)
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
QUIET_LOAD = 2.6  # 1-minute load at or under which a step counts as taken on a quiet machine
STEPS_PER_RUN = 32  # 2,048 rollouts at 64 per step (headline.py's budget / batch)
DEFAULT_RUNS = (
    [f"warm:{a}:{s}" for s in (1, 2, 3, 4) for a in ("uniform", "sieve", "mopps", "greso")]
    + [f"cold:{a}:{s}" for s in (1, 2) for a in ("uniform", "sieve")]
    + [f"warm:dapo:{s}" for s in (1, 2, 3, 4)]
)


def load_runs(folder: Path) -> list[dict[str, Any]]:
    runs = []
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        if "steps" in run and "arm" in run:
            runs.append(run)
    return runs


def commit_of(run: dict[str, Any]) -> str:
    """The commit a run's steps ran at: its last process's (a run resumed at new code counts
    at the code most of its steps were taken with only if it did not change; see `mixed`)."""
    commits = run.get("commits")
    return str(commits[-1])[:7] if commits else "unrecorded"


def run_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        steps = run["steps"]
        secs = [float(s["seconds"]) for s in steps]
        loads = [float(s.get("load_1m") or 0.0) for s in steps]
        rest = secs[1:]
        quiet = [t for t, ld in zip(rest, loads[1:], strict=True) if ld <= QUIET_LOAD]
        rows.append({
            "run": f"{run['setting']}:{run['arm']}:{run['seed']}",
            "setting": run["setting"],
            "arm": run["arm"],
            "seed": run["seed"],
            "commit": commit_of(run),
            "mixed": len(set(run.get("commits") or [])) > 1,
            "done": bool(run.get("done")),
            "steps": len(steps),
            "first_step_s": secs[0] if secs else None,
            "median_step_s": statistics.median(rest) if rest else None,
            "quiet_steps": len(quiet),
            "quiet_median_step_s": statistics.median(quiet) if quiet else None,
            "median_load_1m": statistics.median(loads) if loads else None,
            "run_s": float(run.get("seconds") or 0.0),
            "outside_steps_s": float(run.get("seconds") or 0.0) - sum(secs),
        })  # fmt: skip
    return rows


def by_arm_commit(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Quiet step seconds pooled over the runs of one arm at one commit (runs that changed code
    mid-run left out)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["mixed"] or row["quiet_median_step_s"] is None:
            continue
        cell = out.setdefault(f"{row['setting']}:{row['arm']}@{row['commit']}", {
            "setting": row["setting"], "arm": row["arm"], "commit": row["commit"],
            "runs": [], "quiet_medians": [], "outside": [],
        })  # fmt: skip
        cell["runs"].append(row["run"])
        cell["quiet_medians"].append(row["quiet_median_step_s"])
        if row["done"]:
            cell["outside"].append(row["outside_steps_s"])
    for cell in out.values():
        cell["quiet_median_step_s"] = statistics.median(cell.pop("quiet_medians"))
        outside = cell.pop("outside")
        cell["outside_steps_s"] = statistics.median(outside) if outside else None
    return out


def project(
    rows: list[dict[str, Any]], cells: dict[str, dict[str, Any]], order: list[str], todo: list[str]
) -> dict[str, Any]:
    """Seconds left for the runs in `todo` that are not done: the arm's quiet step time at the
    newest commit in `order` that has one, times the steps left, plus its time outside steps."""
    done = {r["run"]: r for r in rows}
    outside_any = [c["outside_steps_s"] for c in cells.values() if c["outside_steps_s"]]
    outside_default = statistics.median(outside_any) if outside_any else 0.0
    per_run = []
    for name in todo:
        setting, arm, _ = name.split(":")
        row = done.get(name)
        if row and row["done"]:
            continue
        left = STEPS_PER_RUN - (row["steps"] if row else 0)
        pick, basis = None, None
        for look in (setting, "warm"):  # a cold arm with no cold run yet reads its warm time
            for commit in order:
                cell = cells.get(f"{look}:{arm}@{commit}")
                if cell:
                    pick, basis = cell, f"{look}:{arm}@{commit}"
                    break
            if pick:
                break
        if pick is None:  # an arm that has not run: the slowest arm measured at the newest code
            newest = [c for c in cells.values() if c["commit"] == order[0]] or list(cells.values())
            pick = max(newest, key=lambda c: c["quiet_median_step_s"])
            basis = (
                f"no {arm} run yet: the slowest arm, {pick['setting']}:{pick['arm']}@"
                + pick["commit"]
            )
        outside = (
            pick["outside_steps_s"] if pick["outside_steps_s"] is not None else outside_default
        )
        seconds = left * pick["quiet_median_step_s"] + outside
        per_run.append({"run": name, "steps_left": left, "seconds": seconds, "basis": basis})
    total = sum(r["seconds"] for r in per_run)
    return {"runs": per_run, "seconds": total, "hours": total / 3600}


def commit_order(runs: list[dict[str, Any]]) -> list[str]:
    """Commits newest first, in the order the campaign's runs first met them (run files do not
    date their commits; a later run's last commit is the newer code)."""
    seen: list[str] = []
    for run in sorted(runs, key=lambda r: (r["seed"], r["setting"] != "warm")):
        for c in run.get("commits") or []:
            if c[:7] not in seen:
                seen.append(c[:7])
    return list(reversed(seen))


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = sorted(result["by_arm_commit"].values(), key=lambda c: (c["arm"], c["commit"]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{c['setting']} {c['arm']}\n@{c['commit']}" for c in cells]
    ax1.bar(range(len(cells)), [c["quiet_median_step_s"] for c in cells], color="tab:blue")
    ax1.set_xticks(range(len(cells)), labels, fontsize=7)
    ax1.set_ylabel(f"median s / step (load ≤ {QUIET_LOAD})")
    ax1.set_title("campaign step time by arm and code")
    runs = result["projection"]["runs"]
    ax2.barh(range(len(runs)), [r["seconds"] / 3600 for r in runs], color="tab:orange")
    ax2.set_yticks(range(len(runs)), [r["run"] for r in runs], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("projected hours (quiet machine)")
    ax2.set_title(f"runs left: {result['projection']['hours']:.1f} h in all")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--runs", default=" ".join(DEFAULT_RUNS), help="setting:arm:seed ...")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    runs = load_runs(args.results / "headline_runs")
    if not runs:
        raise SystemExit(f"no run files in {args.results / 'headline_runs'}")
    rows = run_rows(runs)
    cells = by_arm_commit(rows)
    order = commit_order(runs)
    speedup = {}
    for arm in sorted({c["arm"] for c in cells.values()}):
        mine = {
            c["commit"]: c for c in cells.values() if c["arm"] == arm and c["setting"] == "warm"
        }
        have = [c for c in order if c in mine]
        if len(have) >= 2:
            new, old = mine[have[0]], mine[have[-1]]
            speedup[arm] = {
                "old": old["commit"], "new": new["commit"],
                "old_over_new": old["quiet_median_step_s"] / new["quiet_median_step_s"],
            }  # fmt: skip
    result = {
        "benchmark": "campaign_time",
        "quiet_load": QUIET_LOAD,
        "steps_per_run": STEPS_PER_RUN,
        "commits_newest_first": order,
        "runs": rows,
        "by_arm_commit": cells,
        "speedup": speedup,
        "projection": project(rows, cells, order, args.runs.split()),
    }
    out = args.results / "campaign_time.json"
    out.write_text(json.dumps(result, indent=1))
    if not args.no_plot:
        plot(result, out.with_suffix(".png"))
    p = result["projection"]
    print(f"{len(rows)} runs read; {len(p['runs'])} left, {p['hours']:.1f} h projected -> {out}")
    for key, cell in sorted(cells.items()):
        print(f"  {key}: {cell['quiet_median_step_s']:.1f} s/step quiet over {cell['runs']}")


if __name__ == "__main__":
    main()
