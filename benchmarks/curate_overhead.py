"""Overhead of `sieve curate` over bare sampling of the same rollouts, with its breakdown.

Runs the curation flow (Prefect, ephemeral API) with the hf backend on the bootstrapped tiny
policy until it has stored at least `--rollouts` rollouts (screen + refine), then samples
exactly the same prompts with the same group sizes, chunking and backend with nothing else
around it. Reports the wall-time ratio and where the curation's time went: sampling, scoring,
ledger writes, stats (timed inside `pipeline.jobs.curate.curation`) and the rest (Prefect
orchestration, candidate generation, selection, start-up of the flow).

Run: `python benchmarks/curate_overhead.py [--model data/models/tiny] [--candidates 6000]`
(needs `sieve bootstrap` first). Writes benchmarks/results/curate_overhead.json and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def run_curate(model: str, home: str, candidates: int) -> tuple[float, dict, dict[str, float]]:
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    logging.getLogger("prefect").setLevel(logging.WARNING)
    from flows.curate import CurateParams, run
    from pipeline.core.timing import TIMES, reset
    from pipeline.selection import CurateConfig

    params = CurateParams(model=model, home=home, config=CurateConfig(n_candidates=candidates))
    reset()
    start = time.perf_counter()
    summary = run(params)
    return time.perf_counter() - start, summary, dict(TIMES)


def bare_sampling(model: str, home: str, chunk_size: int) -> tuple[float, int]:
    """Sample the curation's own prompts and group sizes again, with nothing around it."""
    from pipeline.jobs.curate.curation import chunk_seed, policy_for
    from pipeline.sampling.base import SamplingParams
    from pipeline.store import Ledger

    with Ledger.open(home, read_only=True) as ledger:
        plan = ledger.sql(
            "SELECT s.run_id, s.group_size, r.problem_id, p.question "
            "FROM (SELECT DISTINCT run_id, problem_id FROM rollouts) r "
            "JOIN sampling_runs s USING (run_id) JOIN problems p USING (problem_id) "
            "ORDER BY s.run_id, r.problem_id"
        )
    policy = policy_for(model)
    start, total = time.perf_counter(), 0
    for (run_id, g), part in plan.group_by(["run_id", "group_size"], maintain_order=True):
        questions = part["question"].to_list()
        for index, s in enumerate(range(0, len(questions), chunk_size)):
            params = SamplingParams(
                1.0, max_new_tokens=policy.max_new_tokens, seed=chunk_seed(0, str(run_id), index)
            )
            groups = policy.sampler.sample(
                policy.render(questions[s : s + chunk_size]), int(g), params
            )
            total += sum(len(x) for x in groups)
    return time.perf_counter() - start, total


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    parts = result["breakdown_s"]
    left = 0.0
    colors = ["tab:green", "tab:blue", "tab:orange", "tab:purple", "tab:gray"]
    for (name, seconds), color in zip(parts.items(), colors, strict=False):
        ax.barh(["sieve curate"], [seconds], left=left, color=color, label=name)
        left += seconds
    ax.barh(["bare sampling"], [result["bare_sampling_s"]], color="tab:green")
    ax.set_xlabel("seconds")
    ax.set_title(
        f"{result['rollouts']:,} rollouts: overhead ratio {result['overhead_ratio']:.2f} "
        "(curate / bare sampling)"
    )
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="data/models/tiny")
    parser.add_argument("--candidates", type=int, default=6000)
    args = parser.parse_args()
    from pipeline.selection import CurateConfig

    with tempfile.TemporaryDirectory() as home:
        curate_s, summary, phases = run_curate(args.model, home, args.candidates)
        bare_s, bare_rollouts = bare_sampling(args.model, home, CurateConfig().chunk_size)
    rollouts = sum(summary["rollouts_spent"].values())
    timed = ("sampling", "scoring", "ledger_writes", "stats")
    breakdown = {k: phases.get(k, 0.0) for k in timed}
    breakdown["prefect + generation + selection"] = curate_s - sum(breakdown.values())
    result = {
        "benchmark": "curate_overhead",
        "model": args.model,
        "candidates": args.candidates,
        "rollouts": rollouts,
        "bare_rollouts": bare_rollouts,
        "curate_s": curate_s,
        "bare_sampling_s": bare_s,
        "overhead_ratio": curate_s / bare_s,
        "breakdown_s": breakdown,
        "curriculum": {"kept": summary["kept"], "rejected": summary["rejected"]},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "curate_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "curate_overhead.png")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
