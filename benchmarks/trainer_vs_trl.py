"""Seconds per GRPO step: Sieve's trainer vs TRL's `GRPOTrainer`, same model, prompts, G, tokens.

Both train the same starting policy (the bootstrapped tiny model by default) for the same number
of steps on the same prompts (train-split problems from the levels where that policy is neither
hopeless nor perfect), 16 prompts × G = 4 = 64 completions per step, at most 16 new tokens,
temperature 1, the same learning rate, clip ε and β, one update per batch, rewards from Sieve's
verifiers (TRL gets them through `pipeline.integrations.trl.reward_function`). Then both final
models are evaluated on the same held-out problems of those levels: pass@1 as the mean over 8
samples at temperature 1, and greedy.

Time per step: the gaps between consecutive step ends (TRL: `on_step_end`; Sieve: its metrics
callback), after the first WARMUP steps on both sides (the first steps of a CPU run pay for
kernel selection on new tensor shapes); mean and median are reported, and Sieve's own split of a
step into sampling, scoring and update. TRL is a benchmark-only dependency (`pip install .[trl]`).

Each seed draws its own training problems and seeds both trainers; the held-out problems are the
same for every seed (HELDOUT_PER_LEVEL per level). The JSON keeps every seed's numbers and their
mean; the held-out gain is compared on the seed mean.

Like for like (`like_sieve`, recorded in the JSON as `like_for_like`): TRL 1.16 fixes its group
std to Bessel's correction (ddof 1, `trl.trainer.utils.nanstd`) plus 1e-4 and has no knob for
either, so Sieve's side takes `std_ddof = 1`, `adv_eps = 1e-4` (`TRL_LIKE_SIEVE`); TRL gets
`scale_rewards="group"`, the loss type of Sieve's aggregation (`dapo` = token mean), Sieve's clip
ε low/high, truncation masking, grad clip and one iteration. What no setting aligns is listed in
`LIKE_FOR_LIKE_GAPS` (denominators: Sieve drops uninformative groups before the update, TRL
keeps them in its token count and its KL term). TRL's vLLM colocate mode needs vLLM in TRL's venv
(it is in .venv-vllm, TRL in .venv), so TRL generates with HF `generate`.

Roofline (benchmarks/roofline.py; `roofline` per arm and run): fp32 and bf16 matmul peaks at the
start and the end of each arm, the update's FLOP/s as a share of peak, sampling tokens/s as a
share of the compute bound and, with `--standalone`, of the sampler alone on the same prompts.

Run: `python benchmarks/trainer_vs_trl.py [--model data/models/tiny] [--steps 40] [--prompts 16]
[--group-size 4] [--lr 1e-4] [--levels JSON] [--seeds 0,1,2] [--standalone] [--out NAME]`
→ benchmarks/results/trainer_vs_trl.json + .png (≈ 10-20 min per seed on 2 quiet cores)
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import polars as pl
import torch
from roofline import ModelShape, SieveStepLog, TRLStepLog, arm_roofline, measure_peaks, share

RESULTS = Path(os.environ.get("SIEVE_TRAINER_VS_TRL_RESULTS", Path(__file__).parent / "results"))
# the default bootstrapped policy's middle levels (held-out sampled pass@1 0.15-0.7)
LEVELS: dict[str, list[int]] = {"arith": [3, 4]}
PROMPTS, G, MAX_NEW = 16, 4, 16  # defaults; --prompts / --group-size
WARMUP = 5  # steps left out of the timing on both sides (first-shape kernel selection)
HELDOUT_PER_LEVEL = 100
# TRL's advantage std (Bessel's correction, + 1e-4), which TRL cannot change: Sieve takes it
TRL_LIKE_SIEVE: dict[str, Any] = {"std_ddof": 1, "adv_eps": 1e-4}
TRL_LOSS = {"token_mean": "dapo", "seq_mean": "grpo", "dr_grpo": "dr_grpo"}
LIKE_FOR_LIKE_GAPS = [
    "denominator: Sieve drops uninformative groups (max - min reward <= tol) before the update, "
    "so its token mean is over informative groups' tokens; TRL's dapo divides by every "
    "completion token of the generation batch (zero-advantage rows included)",
    "KL: Sieve's uninformative groups carry no KL term either; TRL's KL covers every row",
    # (the LM head is no longer a gap: since issue 48 Sieve, like TRL, computes logits at the
    # completion positions only, grpo_core.logprobs.head_support)
    "sampling: TRL generates with HF generate (no vLLM in its venv); Sieve's arm as configured",
]


def like_sieve(cfg: Any) -> dict[str, Any]:
    """`trl.GRPOConfig` settings that give TRL Sieve's update for `cfg` where TRL has a knob."""
    return {
        "scale_rewards": "group" if cfg.estimator == "grpo" else "none",
        "loss_type": TRL_LOSS[cfg.aggregation],
        "epsilon": cfg.clip_eps_low,
        "epsilon_high": cfg.clip_eps_high,
        "mask_truncated_completions": cfg.mask_truncated,
        "num_iterations": cfg.num_iterations,
        "importance_sampling_level": "token",
        "top_entropy_quantile": 1.0,
        "max_grad_norm": cfg.max_grad_norm,
        "weight_decay": cfg.weight_decay,
    }


def like_for_like(cfg: Any) -> dict[str, Any]:
    """What the JSON records of the alignment."""
    sieve = {k: getattr(cfg, k) for k in ("std_ddof", "adv_eps", "aggregation", "kl_estimator")}
    return {"sieve": sieve, "trl": like_sieve(cfg), "trl_std_ddof": 1, "trl_adv_eps": 1e-4,
            "trl_use_vllm": False, "gaps": LIKE_FOR_LIKE_GAPS}  # fmt: skip


def problems(levels: dict[str, list[int]], seed: int, n: int) -> pl.DataFrame:
    from pipeline.problems import generate_mix

    return generate_mix(levels, n * 2, seed).filter(pl.col("split") == "train").head(n)


def heldout_problems(levels: dict[str, list[int]], per_level: int) -> pl.DataFrame:
    from pipeline.jobs.analysis.evaluate import heldout_set

    return pl.concat(
        [heldout_set(per_level, [f]).filter(pl.col("level").is_in(lv)) for f, lv in levels.items()]
    )


def heldout(model: Any, tokenizer: Any, probs: pl.DataFrame) -> dict[str, float]:
    """Held-out pass@1 (greedy; mean of 8 samples at T = 1) on `probs`."""
    from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, overall
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.sampling.hf import HFSampler
    from pipeline.store import Ledger

    sampler = HFSampler(model=model, tokenizer=tokenizer, model_name="bench")
    prompts_of = {q: f"{q}=" for q in probs["question"]}
    with Ledger.memory() as ledger:
        sampling = SamplingConfig(temperature=1.0, max_new_tokens=MAX_NEW)
        cfg = EvalConfig(samples=8, sampling=sampling)
        table = evaluate(sampler, ledger, "bench", prompts_of, cfg, probs)
    return {k: overall(table, k) for k in ("greedy", "sampled")}


def step_times(stamps: list[float]) -> dict[str, float]:
    """Mean and median seconds per step after the first WARMUP steps (kernel warm-up)."""
    gaps = [b - a for a, b in itertools.pairwise(stamps)][WARMUP:]
    return {
        "seconds_per_step": sum(gaps) / len(gaps),
        "median_seconds_per_step": sorted(gaps)[len(gaps) // 2],
        "timed_steps": len(gaps),
    }


def run_sieve(
    model_dir: Path, data: pl.DataFrame, held: pl.DataFrame, steps: int, lr: float, beta: float,
    prompts: int = PROMPTS, g: int = G, seed: int = 0,
) -> dict:  # fmt: skip
    from grpo_core.seeds import seed_torch
    from grpo_core.trainer import Hooks, Trainer
    from pipeline.jobs.train.curriculum_batches import raw_verifier_reward
    from pipeline.policy.model import load_policy
    from pipeline.sampling.group_sampler import HFGroupSampler
    from pipeline.sampling.hf import HFSampler

    model, tok = load_policy(model_dir)
    batch = step_items(data, prompts, g)
    cfg = sieve_config(steps, lr, beta, seed)
    sampler = HFGroupSampler(HFSampler(model=model, tokenizer=tok))
    peaks = measure_peaks()
    seed_torch(cfg.seed, cfg.deterministic)  # the trainer sets no process-wide torch state
    trainer = Trainer(
        model, tok, sampler, raw_verifier_reward, batch, cfg, hooks=Hooks(warning=lambda m: None)
    )
    log, roof_steps, stamps = SieveStepLog(ModelShape.of(model), tok, cfg), [], []
    log.watch(sampler, trainer)

    def on_metrics(step: int, m: dict[str, float]) -> None:
        stamps.append(time.perf_counter())
        roof_steps.append(log.step(m))

    trainer.hooks = Hooks(metrics=on_metrics)
    history = trainer.train()[WARMUP + 1 :]
    measure_peaks(peaks)
    split = {
        k: statistics.fmean(h[f"time_{k}"] for h in history) for k in ("sample", "score", "update")
    }
    roof = arm_roofline(ModelShape.of(model), roof_steps[WARMUP + 1 :], peaks, "float32", "float32")
    return {**step_times(stamps), "split_seconds": split, "roofline": roof,
            "heldout": heldout(trainer.model, tok, held)}  # fmt: skip


def sieve_config(steps: int, lr: float, beta: float, seed: int) -> Any:
    """Sieve's GRPOConfig for this comparison (TRL's gets `like_sieve` of it)."""
    from grpo_core.config import GRPOConfig

    return GRPOConfig(
        lr=lr, total_steps=steps, max_new_tokens=MAX_NEW, beta=beta, beta_schedule="fixed",
        checkpoint_every=0, aggregation="token_mean", seed=seed, **TRL_LIKE_SIEVE,
    )  # fmt: skip


def step_items(data: pl.DataFrame, prompts: int, g: int) -> Any:
    """step -> the step's Items, `prompts` consecutive rows of `data` (cycled)."""
    from grpo_core.trainer import Item

    items = [
        Item(f"{q}=", a, g, verifier=v)
        for q, a, v in zip(data["question"], data["answer"], data["verifier"], strict=True)
    ]

    def batch(step: int) -> list[Item]:
        start = (step * prompts) % len(items)
        return [items[(start + i) % len(items)] for i in range(prompts)]

    return batch


def standalone(model_dir: Path, data: pl.DataFrame, steps: int, prompts: int, g: int) -> dict:
    """The Sieve arm's sampler alone on the same steps' prompts (no updates): tokens/s after
    WARMUP steps, the reference for `share_of_standalone`."""
    from pipeline.policy.model import load_policy
    from pipeline.sampling.group_sampler import HFGroupSampler
    from pipeline.sampling.hf import HFSampler

    model, tok = load_policy(model_dir)
    sampler, batch, rates = HFGroupSampler(HFSampler(model=model, tokenizer=tok)), step_items(
        data, prompts, g
    ), []  # fmt: skip
    for step in range(steps):
        items = batch(step)
        began = time.perf_counter()
        groups = sampler.sample_groups(
            [it.prompt for it in items], [g] * len(items), temperature=1.0,
            max_new_tokens=MAX_NEW, seed=step,
        )  # fmt: skip
        tokens = sum(len(s.token_ids) for grp in groups for s in grp)
        rates.append((tokens, time.perf_counter() - began))
    timed = rates[WARMUP + 1 :]  # as step_times: the first WARMUP + 1 steps left out
    return {"tokens_per_s": sum(t for t, _ in timed) / sum(s for _, s in timed),
            "timed_steps": len(timed)}  # fmt: skip


def run_trl(
    model_dir: Path, data: pl.DataFrame, held: pl.DataFrame, steps: int, lr: float, beta: float,
    prompts: int = PROMPTS, g: int = G, seed: int = 0,
) -> dict:  # fmt: skip
    import datasets
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    from pipeline.integrations.trl import reward_function, stop_ids

    cfg = sieve_config(steps, lr, beta, seed)
    log: TRLStepLog | None = None
    roof_steps: list[dict[str, Any]] = []

    class Stamps(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.began = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter())
            assert log is not None
            roof_steps.append(log.step(self.times[-1] - self.began))

    rows = data.select(
        pl.format("{}=", "question").alias("prompt"), "answer", "verifier"
    ).to_dicts()
    ds = datasets.Dataset.from_list(rows)
    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    out = RESULTS / "_trl_tmp"
    args = trl.GRPOConfig(
        output_dir=str(out), use_cpu=True, report_to=[], max_steps=steps, logging_steps=1,
        per_device_train_batch_size=prompts * g, num_generations=g,
        max_completion_length=MAX_NEW, temperature=1.0, learning_rate=lr, beta=beta,
        save_strategy="no", gradient_checkpointing=False, shuffle_dataset=False, seed=seed,
        lr_scheduler_type="constant", warmup_steps=0, **like_sieve(cfg),
    )  # fmt: skip
    stamps = Stamps()
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=[reward_function(name="sieve", stop_token_ids=stop_ids(tok))],
        args=args,
        train_dataset=ds,
        callbacks=[stamps],
    )
    log = TRLStepLog(ModelShape.of(model), reference=beta != 0.0)
    log.watch(trainer)
    peaks = measure_peaks()
    trainer.train()
    measure_peaks(peaks)
    # TRL's update under bf16=False here: fp32, as Sieve's
    roof = arm_roofline(ModelShape.of(model), roof_steps[WARMUP + 1 :], peaks, "float32", "float32")
    return {**step_times(stamps.times), "roofline": roof,
            "heldout": heldout(trainer.model, tok, held)}  # fmt: skip


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4))
    names = ["sieve", "trl"]
    colours = ["tab:green", "tab:gray"]
    runs = result["runs"]
    mean = result["mean"]
    a.bar(names, [mean[n]["seconds_per_step"] for n in names], color=colours)
    for i, n in enumerate(names):
        a.scatter([i] * len(runs), [r[n]["seconds_per_step"] for r in runs], color="black", s=8)
    a.set_ylabel(
        f"seconds per step ({result['prompts_per_step'] * result['group_size']} completions)"
    )
    a.set_title(f"speed: Sieve {result['speedup']:.1f}x faster per step")
    start = result["start"]["sampled"]
    b.bar(names, [100 * (mean[n]["heldout_sampled"] - start) for n in names], color=colours)
    for i, n in enumerate(names):
        gains = [100 * (r[n]["heldout"]["sampled"] - start) for r in runs]
        b.scatter([i] * len(runs), gains, color="black", s=8)
    b.axhline(0, color="black", lw=0.5)
    b.set_ylabel("held-out pass@1 gain (points, mean of 8 samples)")
    b.set_title(f"after {result['steps']} steps, {len(runs)} seeds (dots)")
    roofline_panel(c, {n: mean[n] for n in names})
    fig.tight_layout()
    fig.savefig(path, dpi=120)


ROOF_GOALS = (("update_share_of_peak", "update / matmul peak", 0.50),
              ("sampling_share_of_compute_bound", "sampling / compute bound", 0.25),
              ("sampling_share_of_standalone", "sampling / standalone", 0.90))  # fmt: skip


def roofline_panel(
    ax: Any, means: dict[str, dict[str, Any]], title: str = "roofline shares (seed mean)"
) -> None:
    """Grouped bars per arm: update share of matmul peak, sampling share of the compute bound
    and of the standalone sampler, each with its goal (issue 29) as a black dash; a missing
    share is drawn as 0 and named in the legend."""
    width = 0.8 / len(ROOF_GOALS)
    for j, (key, label, goal) in enumerate(ROOF_GOALS):
        values = [means[n].get(key) for n in means]
        missing = " (not measured)" if any(v is None for v in values) else ""
        xs = [i + (j - 1) * width for i in range(len(means))]
        ax.bar(xs, [100 * (v or 0.0) for v in values], width, label=f"{label}{missing}")
        ax.hlines([100 * goal] * len(xs), [x - width / 2 for x in xs],
                  [x + width / 2 for x in xs], colors="black", linestyles="dashed")  # fmt: skip
    ax.set_xticks(range(len(means)), list(means))
    ax.set_ylim(0, 130)  # room for the legend above the 90 % goal
    ax.set_ylabel("% of the bound (same machine, same run)")
    ax.set_title(f"{title}; dashes: goals")
    ax.legend(fontsize=7)


def seed_mean(runs: list[dict], name: str) -> dict[str, Any]:
    keys = ("seconds_per_step", "median_seconds_per_step")
    out: dict[str, Any] = {k: statistics.fmean(r[name][k] for r in runs) for k in keys}
    for k in ("greedy", "sampled"):
        out[f"heldout_{k}"] = statistics.fmean(r[name]["heldout"][k] for r in runs)
    return {**out, **roofline_mean([r[name]["roofline"] for r in runs])}


ROOF_KEYS = (
    ("update", "share_of_peak"), ("update", "achieved_gflops"), ("sampling", "tokens_per_s"),
    ("sampling", "share_of_compute_bound"), ("sampling", "share_of_standalone"),
)  # fmt: skip


def roofline_mean(roofs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seed means of the roofline shares (None where a run lacks the number)."""
    out: dict[str, float | None] = {}
    for part, key in ROOF_KEYS:
        values = [r[part][key] for r in roofs]
        ok = all(v is not None for v in values) and values
        out[f"{part}_{key}"] = statistics.fmean(values) if ok else None
    return out


def with_standalone(roof: dict[str, Any], tokens_per_s: float | None) -> dict[str, Any]:
    sampling = {**roof["sampling"], "standalone_tokens_per_s": tokens_per_s}
    sampling["share_of_standalone"] = share(sampling["tokens_per_s"], tokens_per_s)
    return {**roof, "sampling": sampling}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=Path("data/models/tiny"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--beta", type=float, default=0.02)
    ap.add_argument("--levels", default=json.dumps(LEVELS), help="JSON family -> levels to train")
    ap.add_argument("--out", default="trainer_vs_trl", help="results file name (no suffix)")
    ap.add_argument("--prompts", type=int, default=PROMPTS, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=G, help="completions per prompt")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    ap.add_argument(
        "--standalone", action="store_true", help="time the sampler alone first (each seed)"
    )
    args = ap.parse_args()
    levels = {f: list(v) for f, v in json.loads(args.levels).items()}
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    if not seeds:
        raise SystemExit("--seeds: give at least one seed")
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"no model at {args.model}: run `sieve bootstrap` first")
    held = heldout_problems(levels, HELDOUT_PER_LEVEL)
    from pipeline.policy.model import load_policy, read_meta

    start_model, tok = load_policy(args.model)
    start = heldout(start_model, tok, held)
    shape = (args.prompts, args.group_size)
    runs = []
    for seed in seeds:
        data = problems(levels, seed, max(400, args.prompts * args.steps))
        common = (args.model, data, held, args.steps, args.lr, args.beta, *shape)
        alone = standalone(args.model, data, args.steps, *shape) if args.standalone else None
        sieve = run_sieve(*common, seed=seed)
        trl_res = run_trl(*common, seed=seed)
        rate = alone["tokens_per_s"] if alone else None
        for res in (sieve, trl_res):
            res["roofline"] = with_standalone(res["roofline"], rate)
        speedup = trl_res["seconds_per_step"] / sieve["seconds_per_step"]
        runs.append(
            {"seed": seed, "standalone": alone, "sieve": sieve, "trl": trl_res, "speedup": speedup}
        )
        print(json.dumps(runs[-1]), flush=True)
    mean = {n: seed_mean(runs, n) for n in ("sieve", "trl")}
    result = {
        "benchmark": "trainer_vs_trl",
        "machine": {
            "cpus": torch.get_num_threads(),
            "platform": platform.platform(),
            "torch": torch.__version__,
        },
        "model": str(args.model),
        "model_revision": read_meta(args.model).get("model_revision"),
        "steps": args.steps,
        "prompts_per_step": args.prompts,
        "group_size": args.group_size,
        "max_new_tokens": MAX_NEW,
        "lr": args.lr,
        "beta": args.beta,
        "like_for_like": like_for_like(sieve_config(args.steps, args.lr, args.beta, seeds[0])),
        "levels": levels,
        "heldout_problems": held.height,
        "seeds": seeds,
        "start": start,
        "runs": runs,
        "mean": mean,
        "speedup": mean["trl"]["seconds_per_step"] / mean["sieve"]["seconds_per_step"],
        "speedup_median": mean["trl"]["median_seconds_per_step"]
        / mean["sieve"]["median_seconds_per_step"],
        "sieve_split_seconds": {
            k: statistics.fmean(r["sieve"]["split_seconds"][k] for r in runs)
            for k in ("sample", "score", "update")
        },
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=1))
    plot(result, RESULTS / f"{args.out}.png")
    keys = ("start", "mean", "speedup", "speedup_median", "sieve_split_seconds")
    print(json.dumps({k: result[k] for k in keys}, indent=1))


if __name__ == "__main__":
    main()
