"""Curation throughput (rollouts/s) on each task runner, at 1 and 2 local workers, side by side.

Runs the shipped curation flow (`flows.curate.run`, hf backend, the bootstrapped tiny policy)
once per setting on a fresh home: `local` (the chunks in the flow process, each committing
itself), and `dask` / `ray` with a local cluster of 1 and of 2 worker processes (one thread
each; chunks written as Parquet shards, merged by the flow). The cluster is started before the
clock starts (its start-up is reported apart); the flow's wall time includes Prefect, candidate
generation, selection and every commit. Ratios are throughput over the `local` run's.
Every setting must give the same ledger (rollout checksum), which the benchmark checks.

`paper_estimate()` prints what a nightly curation of 1 M prompts x G would take on one 8-GPU
node and on 4 nodes, from a cited vLLM throughput and this repo's measured scoring and ledger
rates, with its assumptions stated.

Run: `python benchmarks/scale.py [--model data/models/tiny] [--candidates 2000]` (needs
`sieve bootstrap` and `pip install '.[scale]'`), or `--quick` (a smoke run: few candidates,
writes `scale_quick.*` and never overwrites the full figures). Writes
benchmarks/results/scale.json and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
SETTINGS = [("local", 1), ("dask", 1), ("dask", 2), ("ray", 1), ("ray", 2)]
CHUNK = 64  # prompts per chunk: small enough that 2 workers both have chunks at these sizes


@contextmanager
def cluster(runner: str, workers: int) -> Iterator[dict[str, Any]]:
    """A started local cluster and the `scale` parameter that points the flow at it."""
    if runner == "local":
        yield {"runner": "local"}
    elif runner == "dask":
        from distributed import LocalCluster

        with LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local:
            yield {"runner": "dask", "runner_address": local.scheduler_address}
    else:
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, object_store_memory=200_000_000)
        try:
            yield {"runner": "ray"}  # the runner reuses the instance started here
        finally:
            ray.shutdown()


def run_one(model: str, candidates: int, runner: str, workers: int) -> dict[str, Any]:
    from flows.curate import CurateParams, ScaleConfig, run
    from pipeline.core.timing import TIMES, reset
    from pipeline.selection import CurateConfig
    from pipeline.store import Ledger

    cfg = CurateConfig(n_candidates=candidates, chunk_size=CHUNK)
    with tempfile.TemporaryDirectory() as home:
        started = time.perf_counter()
        with cluster(runner, workers) as scale:
            startup = time.perf_counter() - started
            params = CurateParams(model=model, home=home, config=cfg, scale=ScaleConfig(**scale))
            reset()
            start = time.perf_counter()
            summary = run(params)
            wall = time.perf_counter() - start
        with Ledger.open(home, read_only=True) as led:
            checksum = led.checksum("rollouts")
            tokens = int(led.sql("SELECT coalesce(sum(n_tokens), 0) AS t FROM rollouts")["t"][0])
    rollouts = sum(summary["rollouts_spent"].values())
    return {
        "runner": runner,
        "workers": workers,
        "cluster_startup_s": startup,
        "wall_s": wall,
        "rollouts": rollouts,
        "tokens": tokens,
        "rollouts_per_s": rollouts / wall,
        "rollouts_checksum": list(checksum),
        # in-process phases only (a distributed run samples and scores in its workers)
        "flow_process_phases_s": {k: TIMES.get(k, 0.0) for k in ("sampling", "scoring")},
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = [f"{r['runner']}\n{r['workers']} worker{'s' * (r['workers'] > 1)}" for r in runs]
    rates = [r["rollouts_per_s"] for r in runs]
    colors = {"local": "tab:gray", "dask": "tab:blue", "ray": "tab:orange"}
    fig, ax = plt.subplots(figsize=(8, 3.6))
    bars = ax.bar(labels, rates, color=[colors[r["runner"]] for r in runs])
    for bar, r in zip(bars, runs, strict=True):
        ax.annotate(
            f"{r['ratio_to_local']:.2f}x",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    ax.set_ylabel("rollouts / s")
    ax.set_ylim(0, max(rates) * 1.15)  # room for the ratio labels
    ax.set_title(
        f"curation throughput, tiny policy, {result['candidates']} candidates "
        f"({result['machine']['cpus']} CPUs; ratio to local)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------- paper estimate

# Cited throughput: Red Hat's MLPerf Inference v5.1 submission, Llama-3.1-8B (FP8) on vLLM
# 0.10.0: 5777 tokens/s per H100 in the Offline scenario.
# https://www.redhat.com/en/blog/efficient-and-reproducible-llm-inference-red-hat-mlperf-inference-v51-results
VLLM_TOKENS_PER_S_PER_H100 = 5777.0
# This repo's measured rates on 2 CPUs (benchmarks/results/ledger.json): Arrow ingest into the
# ledger, and the fast exact/numeric verifier path (math-verify is ~240x slower).
LEDGER_ROWS_PER_S = 3.8e6
VERIFY_ANSWERS_PER_S_PER_2_CPUS = 72_000.0


def paper_estimate(
    prompts: int = 1_000_000,
    group: int = 8,
    tokens_per_completion: int = 300,
    gpus_per_node: int = 8,
    cpus_per_node: int = 96,
    dp_efficiency: float = 0.9,
) -> dict[str, Any]:
    """Hours for one nightly screen of `prompts` x `group` on 1 and on 4 nodes (printed).

    Assumptions: one vLLM engine per GPU (data parallel, an 8B model fits one GPU), each at the
    cited Offline rate, scaled by `dp_efficiency` for stragglers and chunk tails; completions
    average `tokens_per_completion` output tokens (prompt prefill is folded into the cited
    rate, measured on longer inputs than these prompts); scoring runs on the node's CPUs
    beside sampling, at the fast verifier path's measured rate per 2 CPUs; one committer
    merges shards at the measured ledger ingest rate, overlapped with sampling (only the last
    chunks' commits are on the critical path). The refine stage (large G on the survivors)
    adds in proportion: with ~20 % survivors at G=32 it is another 0.8x of this screen.
    """
    rollouts = prompts * group
    tokens = rollouts * tokens_per_completion
    out: dict[str, Any] = {
        "assumptions": {
            "prompts": prompts,
            "group": group,
            "tokens_per_completion": tokens_per_completion,
            "vllm_tokens_per_s_per_gpu": VLLM_TOKENS_PER_S_PER_H100,
            "gpus_per_node": gpus_per_node,
            "dp_efficiency": dp_efficiency,
            "cpus_per_node": cpus_per_node,
        }
    }
    for nodes in (1, 4):
        sample_s = tokens / (VLLM_TOKENS_PER_S_PER_H100 * gpus_per_node * nodes * dp_efficiency)
        score_s = rollouts / (VERIFY_ANSWERS_PER_S_PER_2_CPUS * cpus_per_node * nodes / 2)
        commit_s = rollouts / LEDGER_ROWS_PER_S
        out[f"{nodes}_node"] = {
            "sampling_h": sample_s / 3600,
            "scoring_h_overlapped": score_s / 3600,
            "ledger_commit_h_total": commit_s / 3600,
            "estimate_h": max(sample_s, score_s) / 3600,
        }
    print(
        f"nightly screen of {prompts:,} prompts x G={group} (~{tokens / 1e9:.1f} B output tokens):"
    )
    for nodes in (1, 4):
        row = out[f"{nodes}_node"]
        score_s, commit_s = row["scoring_h_overlapped"] * 3600, row["ledger_commit_h_total"] * 3600
        print(
            f"  {nodes} node(s) x {gpus_per_node} GPUs: ~{row['estimate_h']:.1f} h "
            f"(sampling {row['sampling_h']:.1f} h; scoring {score_s:.0f} s overlapped; "
            f"ledger commits {commit_s:.0f} s in all)"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="data/models/tiny")
    parser.add_argument("--candidates", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 candidates")
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # each worker is one thread; so is local
    logging.getLogger("prefect").setLevel(logging.WARNING)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    candidates = 200 if args.quick else args.candidates
    runs = [run_one(args.model, candidates, runner, w) for runner, w in SETTINGS]
    base = runs[0]["rollouts_per_s"]
    for r in runs:
        r["ratio_to_local"] = r["rollouts_per_s"] / base
    same = all(r["rollouts_checksum"] == runs[0]["rollouts_checksum"] for r in runs)
    result = {
        "benchmark": "scale",
        "mode": "quick" if args.quick else "full",
        "model": args.model,
        "candidates": candidates,
        "chunk_size": CHUNK,
        "machine": {"cpus": os.cpu_count()},
        "same_ledger_everywhere": same,
        "runs": runs,
        "paper_estimate": paper_estimate(),
    }
    name = "scale_quick" if args.quick else "scale"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / f"{name}.png")
    print(json.dumps({k: v for k, v in result.items() if k != "paper_estimate"}, indent=2))
    if not same:
        raise SystemExit("the runners disagree on the ledger: see rollouts_checksum per run")


if __name__ == "__main__":
    main()
