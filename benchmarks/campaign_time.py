"""How long the real headline campaign takes per step and in all, by the code each run ran.

Reads the committed run files of the real campaign (results/headline_runs/*.json: every step's
`seconds` and 1-minute `load_1m`, each run's `commits` and total `seconds`) and writes
results/campaign_time.json + PNG:

- per arm x code commit: steps, the median seconds per step over *quiet* steps (1-minute load
  at most QUIET_LOAD: the campaign alone keeps about 2 runnable threads on these 2 cores; steps
  taken while a test suite or a CI check shared the machine are counted but left out of the
  median), the median over all steps, the first step apart (it starts the engine), and what a
  run spends outside its steps (held-out evaluations at the marks, the warm start's load);
- the ratio of the oldest commit's quiet median to the newest one's, per arm with quiet steps at
  both (commits ordered by date where this clone has them);
- the projected wall time of the runs still to do (`--runs`, by default the driver's list,
  benchmarks/headline_runs.txt), two
  ways (`project`): at each arm's quiet step time (an arm with no quiet step at its time over
  every step), and as run (every arm at its time over every step, beside whatever else ran).
  Each run also pays one first step and its arm's time outside the steps. A rough estimate:
  quiet steps are few, and a run's steps differ in length as its prompts do.

Issue 48 asks for the projected campaign wall time after its faster update; the step time of the
product's night, not of one update, is what a campaign pays, so this reads it from the campaign.

    .venv/bin/python benchmarks/campaign_time.py          (seconds; no model needed)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
QUIET_LOAD = 2.6  # 1-minute load at or under which a step counts as taken on a quiet machine
STEPS_PER_RUN = 32  # 2,048 rollouts at 64 per step (headline.py's budget / batch)
RUN_LIST = ROOT / "benchmarks" / "headline_runs.txt"  # the driver's list, in its order


def run_list(path: Path = RUN_LIST) -> list[str]:
    """The campaign's runs (setting:arm:seed), as the driver reads them: one per line, `#`
    comments and blank lines skipped."""
    lines = (ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines())
    return [ln for ln in lines if ln]


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
        loads = [s.get("load_1m") for s in steps]  # a step without a load is not counted quiet
        known = [float(x) for x in loads if x is not None]
        rest = secs[1:]
        quiet = [
            t for t, ld in zip(rest, loads[1:], strict=True) if ld is not None and ld <= QUIET_LOAD
        ]
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
            "median_load_1m": statistics.median(known) if known else None,
            "run_s": float(run.get("seconds") or 0.0),
            "outside_steps_s": float(run.get("seconds") or 0.0) - sum(secs),
        })  # fmt: skip
    return rows


def by_arm_commit(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Step seconds pooled over the runs of one arm at one commit (runs that changed code
    mid-run left out): the median of the runs' quiet medians (None where no run had a quiet
    step), of their medians over every step, of their first steps, and of the time finished
    runs spent outside their steps."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["mixed"] or row["median_step_s"] is None:
            continue
        cell = out.setdefault(f"{row['setting']}:{row['arm']}@{row['commit']}", {
            "setting": row["setting"], "arm": row["arm"], "commit": row["commit"], "runs": [],
            "quiet": [], "all": [], "first": [], "outside": [], "quiet_steps": 0,
        })  # fmt: skip
        cell["runs"].append(row["run"])
        cell["quiet_steps"] += row["quiet_steps"]
        if row["quiet_median_step_s"] is not None:
            cell["quiet"].append(row["quiet_median_step_s"])
        cell["all"].append(row["median_step_s"])
        cell["first"].append(row["first_step_s"])
        if row["done"]:
            cell["outside"].append(row["outside_steps_s"])

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    for cell in out.values():
        cell["quiet_median_step_s"] = median(cell.pop("quiet"))
        cell["median_step_s"] = median(cell.pop("all"))
        cell["first_step_s"] = median(cell.pop("first"))
        cell["outside_steps_s"] = median(cell.pop("outside"))
    return out


def _pick(
    cells: dict[str, dict[str, Any]], order: list[str], setting: str, arm: str, key: str
) -> tuple[dict[str, Any] | None, str]:
    """The cell of `arm` with a `key` value at the newest commit that has one (a cold arm with
    no cold run reads its warm one), and how it was chosen."""
    for look in (setting, "warm"):
        for commit in order:
            cell = cells.get(f"{look}:{arm}@{commit}")
            if cell and cell[key] is not None:
                return cell, f"{look}:{arm}@{commit}"
    return None, ""


def project(
    rows: list[dict[str, Any]], cells: dict[str, dict[str, Any]], order: list[str], todo: list[str]
) -> dict[str, Any]:
    """Seconds left for the runs in `todo` that are not done, two ways. `quiet`: each run at its
    arm's quiet step time at the newest commit that has one, else at the arm's time over every
    step (taken under load: longer). `as_run`: every run at its arm's time over every step, as
    the campaign ran beside other work. An arm that has not run takes the slowest arm's. Each
    run also pays a first step (the engine's start: the median first step of all runs) and its
    arm's median time outside the steps (held-out evaluations)."""
    done = {r["run"]: r for r in rows}
    firsts = [r["first_step_s"] for r in rows if r["first_step_s"] is not None]
    first = statistics.median(firsts) if firsts else 0.0
    outside_any = [c["outside_steps_s"] for c in cells.values() if c["outside_steps_s"]]
    outside_default = statistics.median(outside_any) if outside_any else 0.0
    slowest = max(cells.values(), key=lambda c: c["median_step_s"])
    per_run = []
    for name in todo:
        setting, arm, _ = name.split(":")
        row = done.get(name)
        if row and row["done"]:
            continue
        left = STEPS_PER_RUN - (row["steps"] if row else 0)
        quiet, quiet_basis = _pick(cells, order, setting, arm, "quiet_median_step_s")
        loaded, loaded_basis = _pick(cells, order, setting, arm, "median_step_s")
        if loaded is None:
            loaded = slowest
            loaded_basis = f"no {arm} run yet: the slowest arm, {slowest['setting']}:" + (
                f"{slowest['arm']}@{slowest['commit']}"
            )
        if quiet is None:
            quiet_s, quiet_basis = loaded["median_step_s"], f"no quiet steps: {loaded_basis}"
        else:
            quiet_s = quiet["quiet_median_step_s"]
        outside = loaded["outside_steps_s"]
        outside = outside if outside is not None else outside_default
        per_run.append({
            "run": name, "steps_left": left,
            "quiet_seconds": first + (left - 1) * quiet_s + outside, "quiet_basis": quiet_basis,
            "as_run_seconds": first + (left - 1) * loaded["median_step_s"] + outside,
            "as_run_basis": loaded_basis,
        })  # fmt: skip
    quiet_total = sum(r["quiet_seconds"] for r in per_run)
    as_run_total = sum(r["as_run_seconds"] for r in per_run)
    return {
        "runs": per_run,
        "first_step_s": first,
        "quiet_hours": quiet_total / 3600,
        "as_run_hours": as_run_total / 3600,
        "quiet_measured_runs": sum(not r["quiet_basis"].startswith("no ") for r in per_run),
    }


def _commit_time(commit: str) -> int | None:
    """The commit's date (seconds), where this clone has the commit."""
    done = subprocess.run(
        ["git", "show", "-s", "--format=%ct", commit], capture_output=True, text=True, cwd=ROOT
    )
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def commit_order(runs: list[dict[str, Any]]) -> list[str]:
    """Commits newest first: by commit date where this clone has them; otherwise in the order
    the campaign's seed-major runs first met them (run files do not date their commits)."""
    seen: list[str] = []
    for run in sorted(runs, key=lambda r: (r["seed"], r["setting"] != "warm")):
        for c in run.get("commits") or []:
            if c[:7] not in seen:
                seen.append(c[:7])
    fallback = {c: i for i, c in enumerate(seen)}
    dated = {c: _commit_time(c) for c in seen}
    return sorted(seen, key=lambda c: (dated[c] or 0, fallback[c]), reverse=True)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cells = sorted(result["by_arm_commit"].values(), key=lambda c: (c["arm"], c["commit"]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels = [f"{c['setting']} {c['arm']}\n@{c['commit']}" for c in cells]
    x = np.arange(len(cells))
    quiet = [c["quiet_median_step_s"] or 0.0 for c in cells]
    ax1.bar(x - 0.2, quiet, 0.4, color="tab:blue", label=f"quiet steps (load ≤ {QUIET_LOAD})")
    ax1.bar(x + 0.2, [c["median_step_s"] for c in cells], 0.4, color="tab:gray", label="all steps")
    ax1.set_xticks(x, labels, fontsize=7)
    ax1.set_ylabel("median s / step")
    ax1.set_title("campaign step time by arm and code (0: no quiet step)")
    ax1.legend(fontsize=7)
    proj = result["projection"]
    runs = proj["runs"]
    y = np.arange(len(runs))
    ax2.barh(y - 0.2, [r["quiet_seconds"] / 3600 for r in runs], 0.4, color="tab:blue",
             label=f"quiet: {proj['quiet_hours']:.1f} h")  # fmt: skip
    ax2.barh(y + 0.2, [r["as_run_seconds"] / 3600 for r in runs], 0.4, color="tab:gray",
             label=f"as run: {proj['as_run_hours']:.1f} h")  # fmt: skip
    ax2.set_yticks(y, [r["run"] for r in runs], fontsize=7)
    ax2.invert_yaxis()
    ax2.set_xlabel("projected hours")
    ax2.set_title(f"{len(runs)} runs left")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--runs", default=None, help=f"setting:arm:seed ... (default: {RUN_LIST.name})")
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
        have = [c for c in have if mine[c]["quiet_median_step_s"] is not None]
        if len(have) >= 2:  # quiet steps at two commits: the code's effect at equal load
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
        "projection": project(rows, cells, order, args.runs.split() if args.runs else run_list()),
    }
    out = args.results / "campaign_time.json"
    out.write_text(json.dumps(result, indent=1))
    if not args.no_plot:
        plot(result, out.with_suffix(".png"))
    p = result["projection"]
    print(
        f"{len(rows)} runs read; {len(p['runs'])} left: {p['quiet_hours']:.1f} h at quiet step "
        f"times ({p['quiet_measured_runs']} measured quiet), {p['as_run_hours']:.1f} h as run -> "
        f"{out}"
    )
    for key, cell in sorted(cells.items()):
        q = cell["quiet_median_step_s"]
        print(
            f"  {key}: {'-' if q is None else f'{q:.1f}'} s/step quiet, "
            f"{cell['median_step_s']:.1f} over all steps, runs {cell['runs']}"
        )


if __name__ == "__main__":
    main()
