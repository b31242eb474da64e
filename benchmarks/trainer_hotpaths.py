"""The trainer's hot paths before and after issue 29 point 4, side by side.

1. `split`: the prefix-sharing micro-batch split (`grpo_core.batch.shared_parts`) at 512 ..
   8,192 rows, against the greedy loop it replaced (`old_shared_parts` below, a copy of the code
   at `BASE`, which re-measured every candidate part from scratch: O(B²) with one part). Rows
   come in groups of 8 sharing a prompt (20..120 prompt tokens, 16..512 completion tokens), cut
   with no token budget (the whole batch, one part: the worst case before) and with a budget of
   16,384 tokens. Goal: the new split's time grows ≤ 20× from 512 to 8,192 rows (16× the rows).
   Times are the best of several calls in thread CPU time (`time.thread_time`).
2. `memory`: the peak resident memory of one GRPO update on SmolLM2-135M (fp32, CPU, prefix
   sharing, one micro-batch), in a fresh process per tree: the tree at `BASE` (full float32
   log-softmax of the (B, Tc, V) logits plus a second full pass for the entropy) and the working
   tree (selective log-softmax, `grpo_core.logprobs`). Peaks are the process's RSS high-water
   mark (`resource.getrusage`; `tracemalloc` does not see torch's allocations) minus the mark
   before the update (model, AdamW moments and inputs in place, nothing run): once just before
   `optimizer.step()` (the forward and backward passes, where the logits live) and once after
   the whole update (AdamW's step adds its own parameter-sized temporaries). Reference "none",
   β = 0: no second model. The model folder comes from `sieve models add smollm2-135m`.

Results: `benchmarks/results/trainer_hotpaths.json` + `.png`.

Run: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trainer_hotpaths.py [--model DIR]
[--base COMMIT] [--shape P G T] [--skip-memory] [--plot-only]` (about 4 minutes on one core; the
split alone ~40 s).
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_core.batch import Batch, shared_parts  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
BASE = "75f1ad4"  # main before issue 29 point 4
ROWS = (512, 1024, 2048, 4096, 8192)
BUDGETS = (0, 16384)
GROUP = 8


def old_shared_parts(b: Batch, size: int, tokens: int) -> list[torch.Tensor]:
    """`shared_parts` as it was at BASE (the reference copy)."""
    assert b.prompt_attn is not None and b.owner is not None
    n = int(b.ids.shape[0])
    prompt_len = b.prompt_attn.sum(dim=1).tolist()  # (P,)
    owner = b.owner.tolist()  # (B,)
    comp_len = b.comp_mask.sum(dim=1).clamp(min=1).tolist()  # (B,)
    bounds, start = [0], 0
    for i in range(1, n):
        used = set(owner[start : i + 1])
        tp = max(prompt_len[o] for o in used)
        cost = len(used) * tp + (i + 1 - start) * max(comp_len[start : i + 1])
        if i - start >= size or (tokens and cost > tokens):
            bounds.append(i)
            start = i
    bounds.append(n)
    return [torch.arange(s, e, device=b.ids.device) for s, e in itertools.pairwise(bounds)]


def split_batch(n: int, seed: int = 0) -> Batch:
    """n rows in groups of GROUP; only the fields the split reads are real."""
    g = torch.Generator().manual_seed(seed)
    p = n // GROUP
    prompt_len = torch.randint(20, 121, (p,), generator=g)  # (P,)
    comp_len = torch.randint(16, 513, (n,), generator=g)  # (B,)
    tp = int(prompt_len.max())
    prompt_attn = (torch.arange(tp)[None, :] >= tp - prompt_len[:, None]).long()  # (P, Tp)
    comp_mask = torch.arange(int(comp_len.max()))[None, :] < comp_len[:, None]  # (B, Tc)
    ids = torch.zeros(n, 1, dtype=torch.long)
    owner = torch.arange(p).repeat_interleave(GROUP)  # (B,)
    return Batch(
        ids, ids, ids[:, 0], comp_mask, torch.zeros(n), torch.zeros(n, dtype=torch.bool),
        prompt_attn=prompt_attn, owner=owner,
    )  # fmt: skip


def best_of(fn: Any, repeats: int) -> float:
    """The fastest of `repeats` calls, in CPU seconds of this thread: on a shared machine a
    longer call is more often preempted, which wall time would count against it."""
    times = []
    for _ in range(repeats):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return min(times)


def run_split() -> list[dict[str, Any]]:
    out = []
    for tokens, n in itertools.product(BUDGETS, ROWS):
        b = split_batch(n)
        new = [p.tolist() for p in shared_parts(b, n, tokens)]
        assert new == [p.tolist() for p in old_shared_parts(b, n, tokens)], (n, tokens)
        old_reps = 3 if n <= 2048 else 1
        row = {
            "rows": n,
            "tokens": tokens,
            "parts": len(new),
            "old_s": best_of(lambda b=b, t=tokens, n=n: old_shared_parts(b, n, t), old_reps),
            "new_s": best_of(lambda b=b, t=tokens, n=n: shared_parts(b, n, t), 20),
        }
        row["speedup"] = row["old_s"] / row["new_s"]
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def growth(rows: list[dict[str, Any]], key: str, tokens: int) -> float:
    by_n = {r["rows"]: r[key] for r in rows if r["tokens"] == tokens}
    return by_n[ROWS[-1]] / by_n[ROWS[0]]


# The child: one GRPO update on the model, in the tree on sys.path[0]; prints JSON.
CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Hooks, Item, Sample, Scores, Trainer

prompts, group, length = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(sys.argv[2])
model = AutoModelForCausalLM.from_pretrained(sys.argv[2], dtype=torch.float32).eval()
vocab = int(model.config.vocab_size)


class FixedSampler:
    def sample_groups(self, prompts, sizes, *, temperature, max_new_tokens, seed):
        g = torch.Generator().manual_seed(seed)
        return [[Sample(tuple(torch.randint(100, vocab, (length,), generator=g).tolist()), "",
                        truncated=False) for _ in range(n)] for n in sizes]


def reward(items, samples):
    values = [float(i % 2) for i in range(len(samples))]  # every group informative
    return Scores(values, [bool(v) for v in values])


items = [Item(f"Question {i}: what is {i} plus {7 * i + 3}? Think step by step.", "", group)
         for i in range(prompts)]
cfg = GRPOConfig(reference="none", beta=0.0, beta_schedule="fixed", checkpoint_every=0,
                 max_new_tokens=length, mask_truncated=False, total_steps=1)
trainer = Trainer(model, tok, FixedSampler(), reward, lambda step: items, cfg,
                  hooks=Hooks(warning=lambda m: None))
for p in trainer.params:  # Adam's moments exist before the mark (they are not the update's)
    trainer.optimizer.state[p]["exp_avg"] = torch.zeros_like(p)
    trainer.optimizer.state[p]["exp_avg_sq"] = torch.zeros_like(p)
    trainer.optimizer.state[p]["step"] = torch.tensor(0.0)
marks = {}
real_step = trainer.optimizer.step


def marked_step(*args, **kw):  # the high-water mark of the forward and backward passes
    marks["fb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return real_step(*args, **kw)


trainer.optimizer.step = marked_step
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
m = trainer.run_step(0).metrics
seconds = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rss_before_mib": before / 1024, "rss_peak_mib": after / 1024,
                  "update_peak_mib": (after - before) / 1024, "seconds": seconds,
                  "forward_backward_peak_mib": (marks["fb"] - before) / 1024,
                  "loss": m["loss"], "entropy": m["entropy"], "grad_norm": m["grad_norm"],
                  "vocab": vocab}))
"""


def base_tree(commit: str, into: Path) -> Path:
    """grpo_core at `commit`, unpacked with `git archive` (no worktree, no checkout)."""
    tar = into / "base.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(tar), commit, "grpo_core"],
                   check=True)  # fmt: skip
    with tarfile.open(tar) as t:
        t.extractall(into / "tree", filter="data")
    return into / "tree"


def run_memory(model: Path, base: str, shape: tuple[int, int, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"prompts": shape[0], "group": shape[1], "completion_tokens": shape[2]}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": base_tree(base, Path(tmp)), "after": ROOT}
        for name, tree in trees.items():
            args = [str(tree), str(model), *map(str, shape)]
            res = subprocess.run([sys.executable, "-c", CHILD, *args],
                                 capture_output=True, text=True, check=False)  # fmt: skip
            if res.returncode:
                raise SystemExit(f"{name} child failed: {res.stderr.strip().splitlines()[-1]}")
            out[name] = json.loads(res.stdout.strip().splitlines()[-1])
            print(name, json.dumps(out[name]), flush=True)
    for key in ("update_peak_mib", "forward_backward_peak_mib"):
        out[key.replace("_mib", "_ratio")] = out["after"][key] / out["before"][key]
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mem = result.get("memory")
    fig, axes = plt.subplots(1, 2 if mem else 1, figsize=(11 if mem else 6, 4), squeeze=False)
    ax = axes[0][0]
    for tokens, style in zip(BUDGETS, ("-", "--"), strict=True):
        rows = [r for r in result["split"] if r["tokens"] == tokens]
        label = f"budget {tokens}" if tokens else "no budget"
        ax.plot([r["rows"] for r in rows], [r["old_s"] * 1e3 for r in rows], "o" + style,
                color="tab:red", label=f"before ({label})")  # fmt: skip
        ax.plot([r["rows"] for r in rows], [r["new_s"] * 1e3 for r in rows], "o" + style,
                color="tab:blue", label=f"after ({label})")  # fmt: skip
    ax.set(
        xscale="log", yscale="log", xlabel="rows", ylabel="ms (thread CPU)", title="shared_parts"
    )
    ax.set_xticks(ROWS, [str(r) for r in ROWS])
    ax.tick_params(axis="x", which="minor", labelbottom=False)
    ax.legend(fontsize=8)
    if mem:
        ax = axes[0][1]
        names = ["before", "after"]
        x = torch.arange(2).tolist()
        for k, (key, label) in enumerate(
            (
                ("forward_backward_peak_mib", "forward + backward"),
                ("update_peak_mib", "+ AdamW step"),
            )
        ):
            vals = [mem[n][key] for n in names]
            ax.bar([i + 0.4 * k for i in x], vals, width=0.38, label=label)
        ax.set_xticks([i + 0.2 for i in x], names)
        ax.legend(fontsize=8)
        ax.set(ylabel="MiB above the pre-update mark",
               title=f"one update, SmolLM2-135M ({mem['prompts']}x{mem['group']} rows, "
               f"{mem['completion_tokens']} tokens)")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="default: <home>/models/smollm2-135m")
    ap.add_argument("--base", default=BASE)
    ap.add_argument("--shape", type=int, nargs=3, default=(4, 8, 64),
                    metavar=("PROMPTS", "GROUP", "TOKENS"))  # fmt: skip
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure from the JSON")
    args = ap.parse_args()
    if args.plot_only:
        plot(
            json.loads((RESULTS / "trainer_hotpaths.json").read_text()),
            RESULTS / "trainer_hotpaths.png",
        )
        return
    result: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "cpu": platform.processor()},
        "base": args.base,
        "split": run_split(),
    }  # fmt: skip
    result["split_growth"] = {
        f"{key}_tokens{t}": growth(result["split"], f"{key}_s", t)
        for key in ("old", "new")
        for t in BUDGETS
    }
    if not args.skip_memory:
        if args.model is None:
            from pipeline.policy.folders import models_dir

            args.model = models_dir(None) / "smollm2-135m"
        if not (args.model / "config.json").is_file():
            raise SystemExit(f"no model at {args.model}: `sieve models add smollm2-135m`")
        result["memory"] = run_memory(args.model, args.base, tuple(args.shape))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "trainer_hotpaths.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "trainer_hotpaths.png")
    print(json.dumps(result["split_growth"]))


if __name__ == "__main__":
    main()
