"""The README's paths in the README's order on one fresh clone, timed (issue 47 point 1).

Clones this repository's HEAD into an empty folder (no venv, no model, no ledger, no Prefect
state) and runs, one after the other in that clone, the commands a newcomer follows:

    make demo        # the main job on the embedded default (creates .venv)
    make demo-real   # the real model (creates .venv-vllm, adds SmolLM2-135M, one night)
    make test        # the suite
    make test        # again: it must pass twice in a row on the same clone

Each command's wall time, exit status, the machine's 1-minute load before and after it, and
its last lines (pytest's summary for the tests) are recorded; a command that fails stops the
sequence (what ran is still written). Output: results/fresh_clone.json and .png (wall time per
command). Run it on a quiet machine: other work on the 2 cores slows every step.

    python benchmarks/fresh_clone.py [--clone DIR] [--keep]

Test: tests/test_fresh_clone.py checks the summary reader on a canned log.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
COMMANDS = ["make demo", "make demo-real", "make test", "make test"]
PYTEST_SUMMARY = re.compile(r"=+ (?P<body>.*\b(passed|failed|error)\b.*) in [\d.]+s")


def pytest_counts(log: str) -> dict[str, int]:
    """The counts of pytest's last summary line in `log` (passed, failed, skipped, ...)."""
    found = None
    for line in log.splitlines():
        m = PYTEST_SUMMARY.search(line)
        if m:
            found = m["body"]
    if found is None:
        return {}
    return {k: int(n) for n, k in re.findall(r"(\d+) (\w+)", found)}


def run(cmd: str, clone: Path, logs: Path, index: int) -> dict[str, Any]:
    log = logs / f"{index}-{cmd.replace(' ', '-')}.log"
    load = os.getloadavg()[0]
    began = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.call(cmd, shell=True, cwd=clone, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - began
    text = log.read_text(errors="replace")
    return {
        "command": cmd,
        "exit": code,
        "seconds": round(seconds, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "pytest": pytest_counts(text) if "test" in cmd else None,
        "tail": text.splitlines()[-6:],
    }


def commit_of(folder: Path) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True)
    return out.stdout.strip()


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = result["steps"]
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = [f"{i + 1}. {s['command']}" for i, s in enumerate(steps)]
    colours = ["tab:green" if s["exit"] == 0 else "tab:red" for s in steps]
    ax.barh(labels[::-1], [s["seconds"] / 60 for s in steps][::-1], color=colours[::-1])
    ax.set_xlabel("minutes (wall)")
    ax.set_title(f"fresh clone of {result['commit'][:8]}: the README's order")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone", type=Path, help="where to clone (default a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the clone afterwards")
    ap.add_argument("--results", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    clone = args.clone or Path(tempfile.mkdtemp(prefix="sieve-fresh-")) / "sieve"
    if clone.exists():
        raise SystemExit(f"{clone} exists: give a new folder")
    subprocess.check_call(["git", "clone", "-q", str(ROOT), str(clone)])
    logs = clone.parent / "logs"
    logs.mkdir(exist_ok=True)
    result: dict[str, Any] = {
        "commit": commit_of(clone),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "steps": [],
    }
    for i, cmd in enumerate(COMMANDS):
        step = run(cmd, clone, logs, i)
        result["steps"].append(step)
        print(f"{cmd}: exit {step['exit']} in {step['seconds'] / 60:.1f} min", flush=True)
        if step["exit"] != 0:
            break
    result["all_passed"] = len(result["steps"]) == len(COMMANDS) and all(
        s["exit"] == 0 for s in result["steps"]
    )
    result["total_seconds"] = round(sum(s["seconds"] for s in result["steps"]), 1)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "fresh_clone.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.results / "fresh_clone.png")
    print(f"logs in {logs}", flush=True)
    if not args.keep and args.clone is None:
        shutil.rmtree(clone.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
