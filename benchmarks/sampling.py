"""Sampling throughput of the `hf` backend: grouped sampling vs a one-completion-at-a-time loop.

For G in (4, 8, 32): the same prompts (held-out problems of every family), G completions each,
temperature 1, 12 new tokens, through `HFSampler.sample` (prompts encoded once, expanded to G
rows, length-sorted micro-batches, KV cache) and through a plain loop that calls
`model.generate` once per completion. Two random-init models: the tiny policy (~0.9 M
parameters) and a larger Llama (~10 M) so the trend with model size is visible. Random weights
rarely emit <eos>, so almost every completion runs to the token limit in both arms. Each arm
makes one small untimed warm-up call first.

135 M model (issue 15): SmolLM2-135M-Instruct (a plain fp32 HF folder, default /tmp/smol-hf),
chat-template prompts (`render_chat`, questions from `generate_mix`), 32 prompts x G=8 x 128
new tokens (`--smol-size`; the case once measured at 15.9 GB), temperature 1, three arms, each
in its own process: `hf-old` (the hf path before issue 15: `generate(output_logits=True)`,
every step's full-vocab logits stacked and log-softmaxed at the end; kept here only, as
`StackedLogitsSampler`), `hf-new` (`HFSampler`, log-probs gathered step by step) and `vllm`
(the vLLM CPU engine from the separate venv .venv-vllm, VLLM_CPU_KVCACHE_SPACE=1 GiB, engine
seeded, no per-request seeds). Each arm's peak memory is polled from its process tree (RSS
summed over the processes; PSS too, which counts shared pages once); an arm past RSS_CAP is
killed and recorded as such. Completions stop at <eos>. tokens/s excludes loading and warm-up.

Run: `python benchmarks/sampling.py [--prompts 24] [--only grouping|135m]`
Writes benchmarks/results/sampling.json and sampling.png (`--only` merges its section into the
existing JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import torch

from grpo_core.seeds import derive_seed
from pipeline.jobs.analysis.evaluate import heldout_set
from pipeline.policy.model import TinySize, create_tiny_model, load_policy
from pipeline.policy.prompts import render_chat
from pipeline.problems import generate_mix
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.hf import HFSampler, _decoding

RESULTS = Path(__file__).parent / "results"
MODELS = {
    "tiny (0.9M)": TinySize(),
    "larger (10M)": TinySize(
        hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6
    ),
}
GROUPS = (4, 8, 32)
NEW_TOKENS = 12
SMOL = Path("/tmp/smol-hf")
ARMS = ("hf-old", "hf-new", "vllm")
# One compute thread per arm: vLLM's CPU auto-binding on 2 cores keeps one for its scheduler and
# gives one to compute; and on this shared 2-core machine torch with 2 threads ran a forward 15x
# slower than with 1 while another process kept a core busy (OpenMP threads waiting on each other).
THREADS = 1
RSS_CAP = 18 * 2**30  # bytes; the machine has 24 GB and others share it
MARK = "ARM-RESULT "  # the child's result line (vLLM prints to stdout too)
ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"


def prompts(count: int) -> list[str]:
    problems = heldout_set(4)
    picked = problems.sample(n=count, seed=0, shuffle=True)
    return [f"{q}=" for q in picked["question"]]


@torch.no_grad()
def loop_baseline(folder: Path, texts: list[str], g: int) -> tuple[int, int, float]:
    """One `generate` call per completion: (completions, new tokens, seconds)."""
    model, tokenizer = load_policy(folder)
    warm = tokenizer(texts[0], return_tensors="pt")["input_ids"]
    model.generate(warm, max_new_tokens=2, pad_token_id=tokenizer.pad_token_id)  # not timed
    torch.manual_seed(0)
    tokens, start = 0, time.perf_counter()
    for text in texts:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        for _ in range(g):
            out = model.generate(
                ids,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=NEW_TOKENS,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            tokens += out.shape[1] - ids.shape[1]
    return len(texts) * g, tokens, time.perf_counter() - start


def grouped(folder: Path, texts: list[str], g: int) -> tuple[int, int, float]:
    sampler = HFSampler(folder, device="cpu")
    params = SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=0)
    sampler.sample(texts[:2], 2, SamplingParams(1.0, max_new_tokens=2))  # warm-up, not timed
    start = time.perf_counter()
    groups = sampler.sample(texts, g, params)
    seconds = time.perf_counter() - start
    return sum(len(x) for x in groups), sum(c.n_tokens for x in groups for c in x), seconds


def measure(folder: Path, texts: list[str]) -> list[dict]:
    rows = []
    for g in GROUPS:
        for arm, fn in (("grouped", grouped), ("loop", loop_baseline)):
            completions, tokens, seconds = fn(folder, texts, g)
            rows.append(
                {
                    "G": g,
                    "arm": arm,
                    "completions": completions,
                    "new_tokens": tokens,
                    "seconds": seconds,
                    "completions_per_s": completions / seconds,
                    "tokens_per_s": tokens / seconds,
                }
            )
            print(json.dumps({"model_G_arm": [folder.name, g, arm], **rows[-1]}), flush=True)
    return rows


def speedups(rows: list[dict]) -> dict[str, float]:
    by = {(r["G"], r["arm"]): r["completions_per_s"] for r in rows}
    return {f"G={g}": by[(g, "grouped")] / by[(g, "loop")] for g in GROUPS}


class StackedLogitsSampler(HFSampler):
    """The hf path before issue 15, for comparison only: all steps' logits kept, then stacked.

    Its prefill is today's (`_shared_prefill` keeps only the last position's logits, a few
    hundred MB less than before), so its peak is if anything a little under the old one's."""

    def __init__(self, path: Path):
        super().__init__(path, device="cpu", logit_budget=1 << 62)  # no per-step cap then

    @torch.no_grad()
    def _generate(
        self, prompts: list[list[int]], n: int, params: SamplingParams, index: int
    ) -> list[Completion]:
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)  # (P, T) left-padded
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt)
            mask[row, width - len(prompt) :] = 1
        cache = self._shared_prefill(ids, mask, n)
        ids, mask = ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
        torch.manual_seed(derive_seed(params.seed, "micro-batch", index))
        out = self.model.generate(  # type: ignore[operator]
            input_ids=ids,
            attention_mask=mask,
            **cache,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=pad,
            return_dict_in_generate=True,
            output_logits=True,
            **_decoding(params),
        )
        new = out.sequences[:, width:]  # (P*n, L)
        logits = torch.stack(out.logits, dim=1).float()  # (P*n, L, V)
        token_lp = torch.log_softmax(logits, -1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        return self._completions(new, token_lp, params)


def smol_prompts(folder: Path, count: int) -> list[str]:
    tokenizer = load_policy(folder)[1]
    questions = generate_mix(None, count, seed=0)["question"]
    return [render_chat(q, tokenizer) for q in questions]


def hf_child(spec: dict, old: bool) -> dict:
    torch.set_num_threads(spec["threads"])
    start = time.perf_counter()
    sampler = StackedLogitsSampler(spec["model"]) if old else HFSampler(spec["model"], device="cpu")
    loaded = time.perf_counter()
    sampler.sample(
        spec["texts"][:2], 2, SamplingParams(1.0, max_new_tokens=2)
    )  # warm-up, not timed
    params = SamplingParams(temperature=1.0, max_new_tokens=spec["new_tokens"], seed=0)
    begin = time.perf_counter()
    groups = sampler.sample(spec["texts"], spec["G"], params)
    seconds = time.perf_counter() - begin
    tokens = sum(c.n_tokens for g in groups for c in g)
    return {"load_s": loaded - start, "seconds": seconds, "new_tokens": tokens}


def vllm_child(spec: dict) -> dict:
    """The vLLM CPU engine (run under .venv-vllm); token counts include a final <eos>."""
    import vllm

    start = time.perf_counter()
    llm = vllm.LLM(model=spec["vllm_model"], dtype="float32", max_model_len=2048, seed=0)
    loaded = time.perf_counter()
    llm.generate(spec["texts"][:2], vllm.SamplingParams(n=2, max_tokens=2), use_tqdm=False)
    params = vllm.SamplingParams(
        n=spec["G"], temperature=1.0, max_tokens=spec["new_tokens"], logprobs=0
    )
    begin = time.perf_counter()
    outs = llm.generate(spec["texts"], params, use_tqdm=False)
    seconds = time.perf_counter() - begin
    tokens = sum(len(o.token_ids) for r in outs for o in r.outputs)
    return {"load_s": loaded - start, "seconds": seconds, "new_tokens": tokens}


def vllm_view(folder: Path, into: Path) -> Path:
    """The model folder without its `quantization_config` (a GGUF note vLLM refuses)."""
    into.mkdir()
    for f in folder.iterdir():
        if f.name != "config.json":
            (into / f.name).symlink_to(f.resolve())
    config = json.loads((folder / "config.json").read_text())
    config.pop("quantization_config", None)
    (into / "config.json").write_text(json.dumps(config))
    return into


def tree_memory(proc: psutil.Process) -> tuple[int, int]:
    """(RSS, PSS) summed over a process and its descendants, in bytes."""
    rss = pss = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            info = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
    return rss, pss


def run_arm(arm: str, spec_path: Path) -> dict:
    """Run one arm in a child process; poll its tree's memory; kill it past RSS_CAP."""
    if arm == "vllm" and not VLLM_PYTHON.exists():
        return {"arm": arm, "skipped": f"{VLLM_PYTHON} is missing", "killed": False}
    python = str(VLLM_PYTHON) if arm == "vllm" else sys.executable
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [python, __file__, "--child", arm, "--spec", str(spec_path)]
    log = spec_path.with_name(f"{arm}.log").open("w+")  # vLLM logs to both streams: no pipes
    child = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc, peak_rss, peak_pss, killed = psutil.Process(child.pid), 0, 0, False
    while child.poll() is None:
        rss, pss = tree_memory(proc)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        if rss > RSS_CAP:
            for p in [*proc.children(recursive=True), proc]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
            killed = True
        time.sleep(0.2)
    log.seek(0)
    text = log.read()
    found = [json.loads(x[len(MARK) :]) for x in text.splitlines() if x.startswith(MARK)]
    row = found[-1] if found else {"failed": child.returncode, "log_tail": text[-2000:]}
    row.update(arm=arm, peak_rss_gb=peak_rss / 1e9, peak_pss_gb=peak_pss / 1e9, killed=killed)
    if "seconds" in row:
        row["tokens_per_s"] = row["new_tokens"] / row["seconds"]
    return row


def measure_smol(folder: Path, shape: dict, arms: list[str]) -> dict:
    texts = smol_prompts(folder, shape["prompts"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = {**shape, "model": str(folder), "texts": texts, "threads": THREADS}
        spec["vllm_model"] = str(vllm_view(folder, Path(tmp) / "vllm-model"))
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        for arm in arms:
            rows.append(run_arm(arm, Path(tmp) / "spec.json"))
            print(json.dumps(rows[-1]), flush=True)
    return {
        "model": folder.name,
        **shape,
        "threads": THREADS,
        "rss_cap_gb": RSS_CAP / 1e9,
        "rows": rows,
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    smol = result.get("smol_135m")
    fig, axes = plt.subplots(2 if smol else 1, 2, figsize=(11, 8 if smol else 4), squeeze=False)
    for ax, (name, entry) in zip(axes[0], result["models"].items(), strict=True):
        for arm, color in (("grouped", "tab:green"), ("loop", "tab:gray")):
            rates = [r["completions_per_s"] for r in entry["rows"] if r["arm"] == arm]
            ax.plot(GROUPS, rates, marker="o", color=color, label=arm)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(GROUPS, [str(g) for g in GROUPS])
        ax.set_xlabel("G (completions per prompt)")
        ax.set_ylabel("completions / s (log)")
        ups = ", ".join(f"{k}: {v:.1f}x" for k, v in entry["speedup"].items())
        ax.set_title(f"hf backend, {NEW_TOKENS} new tokens: {name}\n{ups}", fontsize=9)
        ax.legend()
    if smol:
        plot_smol(axes[1], smol)
    fig.suptitle(f"Sampling on {result['machine']['cpus']} CPU cores")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_smol(axes: list, smol: dict) -> None:
    """Bars per arm: tokens/s, and peak RSS (an arm killed at the cap is marked)."""
    rows = smol["rows"]
    names = [r["arm"] for r in rows]
    shape = f"{smol['model']}: {smol['prompts']} prompts x G={smol['G']} x {smol['new_tokens']}"
    for ax, key, label in (
        (axes[0], "tokens_per_s", "new tokens / s"),
        (axes[1], "peak_rss_gb", "peak RSS of the process tree (GB)"),
    ):
        values = [r.get(key, 0.0) for r in rows]
        bars = ax.bar(names, values, color=["tab:gray", "tab:green", "tab:blue"][: len(rows)])
        notes = [_bar_note(r, v) for r, v in zip(rows, values, strict=True)]
        ax.bar_label(bars, notes, fontsize=8)
        ax.set_ylabel(label)
        ax.set_title(f"{shape} new tokens, {smol['threads']} compute thread(s)", fontsize=9)


def _bar_note(row: dict, value: float) -> str:
    if row["killed"]:
        return "killed at cap"
    return "skipped" if "skipped" in row else "failed" if "failed" in row else f"{value:.1f}"


def grouping_section(texts: list[str]) -> dict:
    models = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, size in MODELS.items():
            folder = Path(tmp) / name.split()[0]
            create_tiny_model(folder, seed=0, size=size)
            model, _ = load_policy(folder)
            rows = measure(folder, texts)
            models[name] = {
                "parameters": sum(p.numel() for p in model.parameters()),
                "rows": rows,
                "speedup": speedups(rows),
            }
    return models


def child_main(arm: str, spec_path: Path) -> None:
    spec = json.loads(spec_path.read_text())
    row = vllm_child(spec) if arm == "vllm" else hf_child(spec, old=arm == "hf-old")
    print(MARK + json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--only", choices=["grouping", "135m"])
    parser.add_argument("--smol", type=Path, default=SMOL, help="SmolLM2-135M-Instruct folder")
    parser.add_argument("--arms", default=",".join(ARMS), help="135m arms, comma-separated")
    parser.add_argument("--smol-size", default="32,8,128", help="135m: prompts,G,new tokens")
    parser.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)  # one arm, internal
    parser.add_argument("--spec", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child_main(args.child, args.spec)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "sampling.json"
    result: dict = json.loads(out.read_text()) if args.only and out.exists() else {}
    result.update(
        benchmark="sampling",
        machine={"cpus": len(os.sched_getaffinity(0)), "torch": torch.__version__},
    )
    if args.only != "135m":
        texts = prompts(args.prompts)
        result.update(prompts=len(texts), new_tokens=NEW_TOKENS, models=grouping_section(texts))
    if args.only != "grouping" and not args.smol.is_dir():
        print(f"135m section skipped: no model folder at {args.smol} (--smol)", flush=True)
    elif args.only != "grouping":
        values = map(int, args.smol_size.split(","))
        size = dict(zip(("prompts", "G", "new_tokens"), values, strict=True))
        result["smol_135m"] = measure_smol(args.smol, size, args.arms.split(","))
    out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, RESULTS / "sampling.png")
    print(json.dumps({k: v["speedup"] for k, v in result["models"].items()}, indent=2))


if __name__ == "__main__":
    main()
