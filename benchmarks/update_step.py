"""One GRPO update on a real model, before and after issue 48's update-path changes, each tree in
a fresh process: wall time, peak memory, micro-batches and padding, and that the gradient is
the same.

Trees: `grpo_core` at `--base` (default `BASE`, main before issue 48, unpacked with `git archive`)
and the working tree. Each child loads the model in float32, builds one fixed step: `--prompts`
chat-like prompts × `--group` completions of random tokens whose lengths follow the real runs'
skew (benchmarks/results/real_train.json: most completions a sentence or two, one per group
cut at `max_new_tokens`), every group informative; the update is data/configs/real_train.toml's
(frozen reference, β 0.05, clip-higher 0.28, temperature 0.6, prefix sharing, micro-batches of
4,096 tokens; torch's deterministic algorithms on, as the train flow sets them, unless
`--no-deterministic`). It runs one warm-up update, then `--repeats` timed ones (`time_update`:
reference forward, policy forward + backward, clip, AdamW). Reported per tree: median and best
update seconds, peak RSS above the pre-update mark (`resource.getrusage`), micro-batches, padded
and real tokens fed to the policy, the update's useful GFLOP (benchmarks/roofline.py's
`update_flops` with the LM head at completion positions only, TRL's convention, for both trees:
the old tree's full-row head counts as waste) over its median seconds as GFLOP/s and as a share
of the fp32 matmul peak (`matmul_peak`, measured before and after the children; the better one),
and a gradient fingerprint of the warm-up update (each
parameter's gradient norm and its dot with a fixed random vector); `grad_max_rel_diff` compares
the trees' fingerprints (expected ≲ 1e-5: float32 summation order only). `--profile` adds the
working tree's top operators by self CPU time (`torch.profiler`) over one more update.

Run in a quiet window (about 5 minutes on 2 cores for SmolLM2-135M; a few GB per child):
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/update_step.py --model data/models/smollm2-135m
(`sieve models add smollm2-135m` fetches it into `<sieve home>/models/`, `data/` by default).
Smoke test on the built-in tiny policy (seconds; written to /tmp, not to results/):
    nice -n 19 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/update_step.py --tiny \\
        --out /tmp/update_step_tiny.json --repeats 1 --max-new-tokens 96
Results: `benchmarks/results/update_step.json` (default `--out`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BASE = "dd0c529"  # main before issue 48's update-path commits

# The child: one tree's updates; argv: tree, model folder, JSON settings. Prints one JSON line.
CHILD = r"""
import json, resource, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from grpo_core.config import GRPOConfig
from grpo_core.seeds import seed_torch
from grpo_core.trainer import Hooks, Item, Sample, Scores, Trainer

opt = json.loads(sys.argv[3])
seed_torch(0, opt["deterministic"])  # as the train flow does (GRPOConfig.deterministic)
tok = AutoTokenizer.from_pretrained(sys.argv[2])
model = AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32).eval()
vocab, budget = int(model.config.vocab_size), opt["max_new_tokens"]
gen = torch.Generator().manual_seed(opt["seed"])


def length(r):  # one per group at the budget; the rest a sentence or two (10..80 tokens)
    return budget if r == 0 else int(torch.randint(10, min(80, budget) + 1, (1,), generator=gen))


rows = [[tuple(torch.randint(3, vocab, (length(r),), generator=gen).tolist())
         for r in range(opt["group"])] for _ in range(opt["prompts"])]


class FixedSampler:
    def sample_groups(self, prompts, sizes, *, temperature, max_new_tokens, seed):
        return [[Sample(t, "", truncated=len(t) >= budget) for t in rows[i]]
                for i in range(len(sizes))]


def reward(items, samples):
    values = [float(i % 2) for i in range(len(samples))]  # every group informative
    return Scores(values, [bool(v) for v in values])


items = [Item(f"Question {i}: what is {i} plus {7 * i + 3}? Think step by step, then give the "
              f"final answer in \\boxed{{}}.", "", opt["group"]) for i in range(opt["prompts"])]
cfg = GRPOConfig(reference="frozen", beta_schedule="fixed", beta=0.05, clip_eps_high=0.28,
                 temperature=0.6, micro_batch_tokens=opt["tokens"], checkpoint_every=0,
                 max_new_tokens=budget, total_steps=100, deterministic=opt["deterministic"])
trainer = Trainer(model, tok, FixedSampler(), reward, lambda step: items, cfg,
                  hooks=Hooks(warning=lambda m: None))
fed = {}
real_inputs = trainer._step_inputs


def step_inputs(step, batch):
    ctx = real_inputs(step, batch)
    fed["prompt_lens"] = batch.prompt_attn.sum(-1)[batch.owner].tolist()  # per row
    fed["completion_lens"] = batch.comp_mask.sum(-1).tolist()
    fed["owner"] = batch.owner.tolist()
    fed["parts"] = len(ctx.parts)
    fed["padded_tokens"] = sum(p.prompt_ids.numel() + p.comp_ids.numel() for p in ctx.parts)
    fed["real_tokens"] = int(batch.comp_mask.sum() + batch.prompt_attn.sum())
    return ctx


trainer._step_inputs = step_inputs
fingerprint = []
real_step = trainer.optimizer.step


def first_step(*args, **kw):
    if not fingerprint:
        for i, p in enumerate(trainer.params):
            g = p.grad.detach().reshape(-1)
            r = torch.randn(g.numel(), generator=torch.Generator().manual_seed(i))
            fingerprint.append((float(g.norm()), float(g @ r)))
    return real_step(*args, **kw)


trainer.optimizer.step = first_step
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
warm = trainer.run_step(0).metrics
times = [trainer.run_step(s).metrics["time_update"] for s in range(1, opt["repeats"] + 1)]
out = {"update_s_median": statistics.median(times), "update_s_best": min(times),
       "update_s": times, "warmup_s": warm["time_update"], "loss": warm["loss"],
       "grad_norm": warm["grad_norm"], "fingerprint": fingerprint, **fed,
       "peak_rss_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}
if opt["profile"]:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.run_step(opt["repeats"] + 1)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20)
    out["profile_top_ops"] = table.splitlines()
sys.path.insert(0, opt["benchmarks"])  # benchmarks/roofline.py of the working tree (both runs)
from roofline import ModelShape, update_flops
shape = ModelShape.of(model)
useful = update_flops(shape, fed["prompt_lens"], fed["completion_lens"], groups=fed["owner"],
                      reference=True, head_on_completions_only=True)
out["useful_gflop"] = useful / 1e9  # the update's work with the LM head at completions only
out["achieved_gflops"] = useful / 1e9 / out["update_s_median"]
print(json.dumps(out))
"""


def run_child(tree: Path, model: Path, settings: dict[str, Any]) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(model), json.dumps(settings)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if res.returncode:
        raise SystemExit(f"child for {tree} failed:\n{res.stderr.strip()[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def max_rel_diff(a: list[list[float]], b: list[list[float]]) -> float:
    """Largest relative difference of the two fingerprints (norms and projections)."""
    worst = 0.0
    for (na, pa), (nb, pb) in zip(a, b, strict=True):
        worst = max(worst, abs(na - nb) / max(abs(nb), 1e-12))
        worst = max(worst, abs(pa - pb) / max(nb * 1e-3, abs(pb), 1e-12))
    return worst


def tiny_model(into: Path) -> Path:
    from pipeline.policy.model import create_tiny_model

    create_tiny_model(into / "tiny")
    return into / "tiny"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="a causal-LM folder (SmolLM2-135M for the issue)")
    ap.add_argument("--tiny", action="store_true", help="the built-in tiny policy (smoke test)")
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=4096, help="micro_batch_tokens")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-deterministic", action="store_true", help="GRPOConfig.deterministic off")
    ap.add_argument("--out", type=Path, default=RESULTS / "update_step.json")
    args = ap.parse_args()
    if args.tiny == (args.model is not None):
        raise SystemExit("give exactly one of --model DIR and --tiny")
    settings = {
        "prompts": args.prompts, "group": args.group, "max_new_tokens": args.max_new_tokens,
        "tokens": args.tokens, "repeats": args.repeats, "seed": 0, "profile": False,
        "deterministic": not args.no_deterministic,
    }  # fmt: skip
    settings["benchmarks"] = str(ROOT / "benchmarks")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from roofline import matmul_peak
    from trainer_hotpaths import base_tree  # grpo_core at a commit, by `git archive`

    peaks = [matmul_peak("float32")]  # the fp32 matmul peak before and after both children
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp)) if args.tiny else args.model
        assert model is not None
        trees = {"before": base_tree(args.base, Path(tmp)), "after": ROOT}
        result: dict[str, Any] = {
            "model": str(model) if not args.tiny else "tiny",
            "base": args.base,
            "settings": settings,
            "machine": {"python": platform.python_version(), "cpu": platform.processor()},
        }
        for name, tree in trees.items():
            opts = {**settings, "profile": args.profile and name == "after"}
            load = os.getloadavg()[0]  # the machine's 1-minute load as the child starts
            result[name] = {**run_child(tree, model, opts), "load_1m_before": load}
            long = ("fingerprint", "profile_top_ops", "prompt_lens", "completion_lens", "owner")
            brief = {k: v for k, v in result[name].items() if k not in long}
            print(name, json.dumps(brief), flush=True)
    peaks.append(matmul_peak("float32"))
    result["fp32_peak_gflops"] = [pk.gflops for pk in peaks]
    peak = max(pk.gflops for pk in peaks)
    before, after = result["before"], result["after"]
    for side in (before, after):
        side["share_of_peak"] = side["achieved_gflops"] / peak
    result["speedup"] = before["update_s_median"] / after["update_s_median"]
    result["padded_tokens_ratio"] = after["padded_tokens"] / before["padded_tokens"]
    result["grad_max_rel_diff"] = max_rel_diff(after["fingerprint"], before["fingerprint"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    keys = ("speedup", "padded_tokens_ratio", "grad_max_rel_diff", "fp32_peak_gflops")
    print(json.dumps({k: result[k] for k in keys}))


if __name__ == "__main__":
    main()
