"""Sandboxed code executions per second, serial and from a thread pool, against bare Python.

Workload: generated `code` problems (all five levels) judged with their own reference solutions
through `pipeline.scoring.verify(..., verifier="code")`, so every execution is the real path:
extraction, a fresh bubblewrap sandbox (prlimit wrapper, namespaces, seccomp), the harness
running 8 hidden tests, and the parent comparing JSON results. The baselines on the same
machine: a bare `python -I -S -c pass` subprocess (the floor of any process-per-check design) and
the same harness and payload without bwrap or prlimit (so the difference is the sandbox itself).
The pool is a `ThreadPoolExecutor` whose threads each launch one sandbox at a time.

Run: `python benchmarks/sandbox.py [--runs 200] [--workers 1,2,4,8]`
Writes benchmarks/results/sandbox.json and sandbox.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.problems import generate
from pipeline.problems.code import reference_solution
from pipeline.scoring import verify
from pipeline.scoring.code import HARNESS, decode_spec
from pipeline.scoring.sandbox import cgroup_status, seccomp_filter

RESULTS = Path(__file__).parent / "results"
PYTHON = os.path.realpath(sys.executable)


def workload(n: int) -> list[tuple[str, str]]:
    """n (reference solution, test spec) pairs over all code levels."""
    frame = generate("code", [1, 2, 3, 4, 5], n, seed=0)
    rows = frame.select("params", "answer").iter_rows()
    return [(reference_solution(json.loads(params)), answer) for params, answer in rows]


def bare_python(_: tuple[str, str]) -> bool:
    return subprocess.run([PYTHON, "-I", "-S", "-c", "pass"], check=False).returncode == 0


def bare_harness(item: tuple[str, str]) -> bool:
    """The harness and payload the verifier sends, run without any sandbox."""
    source, answer = item
    spec = decode_spec(answer)
    request = {
        "code": source,
        "function": spec.function,
        "args": [json.dumps(a) for a in spec.args],
    }
    read_fd, write_fd = os.pipe()
    proc = subprocess.run(
        [PYTHON, "-I", "-S", "-B", "-c", HARNESS, str(write_fd)],
        input=json.dumps(request).encode(),
        pass_fds=(write_fd,),
        capture_output=True,
        check=False,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as channel:
        return proc.returncode == 0 and channel.read().startswith(b"S\nR ")


def sandboxed(item: tuple[str, str]) -> bool:
    verdict = verify(item[0], item[1], "code", timeout=10.0)
    return verdict.correct is True


def measure(
    name: str, fn: Callable[[tuple[str, str]], bool], items: list[tuple[str, str]], workers: int
) -> dict[str, Any]:
    """Executions per second and per-execution latency of `fn` over items with `workers`."""
    latencies: list[float] = []

    def timed(item: tuple[str, str]) -> bool:
        start = time.perf_counter()
        ok = fn(item)
        latencies.append(time.perf_counter() - start)
        return ok

    fn(items[0])  # warm caches (page cache, imports) outside the clock
    start = time.perf_counter()
    if workers == 1:
        oks = [timed(item) for item in items]
    else:
        with ThreadPoolExecutor(workers) as pool:
            oks = list(pool.map(timed, items))
    wall = time.perf_counter() - start
    lat = np.array(latencies) * 1e3
    row = {"mode": name, "workers": workers, "runs": len(items), "ok_share": float(np.mean(oks))}
    row |= {"exec_per_s": len(items) / wall, "latency_ms_p50": float(np.percentile(lat, 50))}
    row |= {"latency_ms_p95": float(np.percentile(lat, 95)), "latency_ms_mean": float(lat.mean())}
    print(f"{name:>10} x{workers}: {row['exec_per_s']:6.1f}/s  p50 {row['latency_ms_p50']:.1f} ms")
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for mode, marker in (("bare python", "s"), ("harness", "^"), ("sandboxed", "o")):
        mine = [r for r in rows if r["mode"] == mode]
        x = [r["workers"] for r in mine]
        axes[0].plot(x, [r["exec_per_s"] for r in mine], marker=marker, label=mode)
        axes[1].plot(x, [r["latency_ms_p50"] for r in mine], marker=marker, label=f"{mode} p50")
    axes[0].axhline(15, color="grey", linestyle=":", label="target 15/s")
    axes[0].set(xlabel="threads launching processes", ylabel="executions / s")
    axes[0].set_title(f"throughput on {os.cpu_count()} CPUs")
    axes[1].set(xlabel="threads launching processes", ylabel="latency per execution (ms)")
    axes[1].set_title("latency (p50)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=200, help="executions per configuration")
    parser.add_argument("--workers", default="1,2,4,8", help="thread-pool sizes to try")
    args = parser.parse_args()
    items = workload(args.runs)
    sizes = [int(w) for w in args.workers.split(",")]
    rows = []
    for name, fn in (("bare python", bare_python), ("harness", bare_harness)):
        rows += [measure(name, fn, items, w) for w in sizes]
    rows += [measure("sandboxed", sandboxed, items, w) for w in sizes]
    serial = {r["mode"]: r for r in rows if r["workers"] == 1}
    best = max((r for r in rows if r["mode"] == "sandboxed"), key=lambda r: r["exec_per_s"])
    overhead = serial["sandboxed"]["latency_ms_mean"] - serial["bare python"]["latency_ms_mean"]
    sandbox_only = serial["sandboxed"]["latency_ms_mean"] - serial["harness"]["latency_ms_mean"]
    result = {
        "benchmark": "sandbox",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "python": platform.python_version(),
        "bwrap": subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout,
        "layers": {"seccomp": seccomp_filter() is not None, "cgroup": cgroup_status()[1]},
        "workload": f"{len(items)} generated code problems, levels 1-5, reference solutions",
        "rows": rows,
        "summary": {
            "serial_exec_per_s": serial["sandboxed"]["exec_per_s"],
            "pool_exec_per_s": best["exec_per_s"],
            "pool_workers": best["workers"],
            "serial_overhead_vs_bare_python_ms": overhead,
            "serial_overhead_of_sandbox_alone_ms": sandbox_only,
            "slowdown_vs_bare_python": serial["bare python"]["exec_per_s"]
            / serial["sandboxed"]["exec_per_s"],
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sandbox.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(rows, RESULTS / "sandbox.png")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
