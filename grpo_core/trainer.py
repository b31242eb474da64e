"""The GRPO training loop: batch of curriculum items → sample groups → score → advantages →
`num_iterations` clipped-surrogate updates with KL to the reference → metrics, checkpoints.

The trainer knows nothing about ledgers or problem generators. It receives four small things
(`grpo_core.types`):

- `batches(step) -> items`: the curriculum items (prompt, answer, group size) of optimiser step
  `step`. It must be a pure function of the step, which is what makes resume exact;
- a `GroupSampler` that samples completions from the *current* weights of the model being trained
  (the hf sampler is handed the same model object; a sampler with its own copy of the weights
  implements `WeightSync` and is pushed the model after each update and when `train()` starts);
- a `RewardFn` that scores completions (reward and correctness; `None` = verifier error);
- optional callbacks for metrics and checkpoints (the pipeline writes them to the ledger).

Per step, in order: sample with seed (cfg.seed, step); score; under `kl_in_reward` (β > 0) one
no-grad forward of the judged samples under the policy and the reference gives each reward its
−β·Σ_t(logπ_old − logπ_ref), and the loss then has no KL term; advantages (`grpo_core.scoring`; a
sample the verifier could not judge is a group of its own, so it carries no advantage);
uninformative groups are dropped *before* any forward pass; the rows become padded tensors on the
model's device, cut into micro-batches (`grpo_core.batch`); old log-probs are taken once when
`num_iterations` > 1; each iteration backpropagates the loss (`grpo_core.loss`) micro-batch by
micro-batch, each weighted by its share of the aggregation's denominator (so the split does not
change the gradient; `dr_grpo` divides by the constant `cfg.dr_grpo_tokens`), checks that the loss
and the gradient norm are finite, clips, steps.

Engine log-probs: when samples carry `logprobs`, the trainer's log-probs at the sampling weights
(the first forward's, or the old log-probs when `num_iterations` > 1) are compared with them
(`logprob_mismatch`) and each token's policy-gradient term is weighted by
min(exp(trainer − engine), `tis_cap`) (truncated IS, Yao et al. 2025); `tis_cap` = 0 only measures.

Safety: a non-finite reward, loss or gradient (checked before each `optimizer.step()`) refuses
the step: gradient discarded, parameters and optimiser state untouched, `skipped_steps` + 1. A
refused later iteration (`num_iterations` > 1) ends the step, keeping the earlier iterations'
updates (nothing is copied to undo them). Non-finite weights are never checkpointed.

Reference models (cfg.reference): `frozen` — a deep copy of the starting weights, no grad;
`none` — no KL term (β must be 0); `lora_base` — LoRA adapters (peft) are trained and the base
weights, seen with the adapters disabled, are the reference: no second copy in memory.

Exact resume: every random choice derives from (cfg.seed, step); the newest checkpoint holds
weights, optimiser, schedules and counters (`grpo_core.state`); N steps + resume + N steps
reproduce 2N straight steps bitwise on CPU (tests/grpo_core/test_trainer.py). No process-wide
torch settings here: the caller runs `grpo_core.seeds.seed_torch(cfg.seed, cfg.deterministic)`;
LoRA's initial draws come from cfg.seed without touching the global generator.

Under `torchrun` (`grpo_core.distributed`) each rank trains on its slice of the step's rows with
the whole step's advantages and denominators, gradients summed; rank 0 alone reports and saves;
`SIEVE_PARALLEL=fsdp` also shards parameters and optimiser state (`grpo_core.fsdp`). One
optimiser step per step and iteration (no GRPO-paper mini-batches), like TRL's default.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from grpo_core import checkpoint as ckpt
from grpo_core import distributed, fsdp
from grpo_core import state as ckpt_state
from grpo_core.batch import Batch, StepInputs, build_batch, denominators, part_rows, rows, share
from grpo_core.config import GRPOConfig
from grpo_core.kl import sequence_k1
from grpo_core.logprobs import completion_logp
from grpo_core.lora import with_lora
from grpo_core.loss import grpo_loss
from grpo_core.optim import make_optimiser
from grpo_core.rewards import Component
from grpo_core.scoring import (
    empty_update_metrics,
    no_samples_metrics,
    score_metrics,
    step_advantages,
    step_token_advantages,
    update_metrics,
)
from grpo_core.seeds import derive_seed, seeded
from grpo_core.types import (
    BatchSource,
    Collected,
    Collector,
    Counters,
    GroupSampler,
    Hooks,
    Item,
    MetricsSink,
    RewardFn,
    Sample,
    Scores,
    StepOutput,
    TrainerError,
    TrainerHooks,
    WeightSync,
)

__all__ = [
    "BatchSource", "Collected", "Collector", "Counters", "GroupSampler", "Hooks", "Item",
    "MetricsSink", "RewardFn", "Sample", "Scores", "StepOutput", "Trainer", "TrainerError",
    "TrainerHooks", "WeightSync", "collect",
]  # fmt: skip


def collect(trainer: Trainer, step: int) -> Collected:
    """The plain strategy: the batch source's items, each sampled with its own G."""
    items = list(trainer.batches(step))
    if not items:
        raise TrainerError(f"the batch source returned no items for step {step}")
    groups, scores, ts, tr = trainer.sample_and_score(items, trainer.step_seed(step))
    return Collected(items, groups, scores, sum(len(g) for g in groups), ts, tr)


class Trainer:
    """GRPO on a policy held in memory; see the module docstring for the step."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        sampler: GroupSampler,
        reward_fn: RewardFn,
        batches: BatchSource,
        cfg: GRPOConfig,
        checkpoint_dir: Path | None = None,
        *,
        hooks: TrainerHooks | None = None,
        crash_point: Callable[[str], None] = lambda name: None,
        collector: Collector | None = None,
    ):
        self.cfg = cfg
        self.tokenizer, self.sampler, self.reward_fn = tokenizer, sampler, reward_fn
        self.batches, self.checkpoint_dir = batches, checkpoint_dir
        self.hooks: TrainerHooks = hooks if hooks is not None else Hooks()
        self.dist = distributed.setup()  # one process: Dist(), every collective a no-op
        self.hooks = distributed.rank_hooks(self.dist, self.hooks)  # rank 0 reports alone
        self.collector, self.crash_point = collector, crash_point
        with seeded(cfg.seed, next(model.parameters()).device):  # LoRA's initial draws
            self.model = with_lora(model, cfg)  # an owner that wrapped it already keeps its object
        distributed.broadcast_params(self.dist, self.model)  # every rank starts from rank 0's
        self.ref_model: torch.nn.Module | None = None
        if cfg.reference == "frozen":
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.fsdp = fsdp.wrap(self) if fsdp.enabled(self.dist) else None  # shards in place
        cfg = self.cfg  # fsdp turns prefix sharing off
        self.model.eval()  # no dropout: sampling and scoring see the same function
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer, self.scheduler = make_optimiser(self.params, cfg, self.hooks.warn)
        self.beta_schedule = cfg.make_beta_schedule()
        repetition = Component("repetition", cfg.repetition_coef, cfg.repetition_start_step)
        self.components = [Component("reward", 1.0, 0), repetition]
        self.counters = Counters()
        self.step = 0  # the next step to run
        self.pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
        self.device = next(self.model.parameters()).device

    # ---------------------------------------------------------------- public API

    def train(self, max_steps: int | None = None) -> list[dict[str, float]]:
        """Run steps until cfg.total_steps (or `max_steps` more); checkpoint on schedule."""
        end = self.cfg.total_steps
        if max_steps is not None:
            end = min(end, self.step + max_steps)
        history = []
        every = self.cfg.checkpoint_every
        self._sync_weights()  # a resumed run's engine samples from the restored weights
        while self.step < end:
            out = self.run_step(self.step)
            history.append(out.metrics)
            self.step += 1
            self.hooks.on_metrics(self.step - 1, out.metrics)
            self.crash_point("train.after_step")
            if self.checkpoint_dir is not None and every and self.step % every == 0:
                self.save_checkpoint()
        if self.checkpoint_dir is not None and not _saved(self.checkpoint_dir, self.step):
            self.save_checkpoint()
        return history

    def run_step(self, step: int) -> StepOutput:
        c = distributed.collect(self, step, collect)  # the collector's, or the plain one
        flat = [s for g in c.groups for s in g]
        self.counters.rollouts += c.rollouts
        group = torch.tensor([i for i, g in enumerate(c.groups) for _ in g], dtype=torch.long)
        t2 = time.perf_counter()
        out, m = self._update(step, c.items, flat, group, c.scores)
        m.update(time_sample=c.time_sample, time_score=c.time_score, **c.metrics)
        m.update(
            time_update=time.perf_counter() - t2,
            skipped_steps=float(self.counters.skipped_steps),
            rollouts=float(c.rollouts),
            rollouts_total=float(self.counters.rollouts),
            lr=float(self.scheduler.get_last_lr()[0]),
        )
        with warnings.catch_warnings():  # an empty or skipped step has no optimiser.step()
            warnings.simplefilter("ignore", UserWarning)
            self.scheduler.step()
        out.metrics = m
        return out

    def sample_and_score(
        self, items: Sequence[Item], seed: int, sizes: Sequence[int] | None = None
    ) -> tuple[list[list[Sample]], Scores, float, float]:
        """Groups for `items` (G from each item unless `sizes`), their scores, and timings."""
        t0 = time.perf_counter()
        groups = self.sampler.sample_groups(
            [it.prompt for it in items],
            list(sizes) if sizes is not None else [it.group_size for it in items],
            temperature=self.cfg.temperature,
            max_new_tokens=self.cfg.max_new_tokens,
            seed=seed,
        )
        t1 = time.perf_counter()
        groups, scores = self.score_groups(items, groups)
        return groups, scores, t1 - t0, time.perf_counter() - t1

    def score_groups(
        self, items: Sequence[Item], groups: list[list[Sample]]
    ) -> tuple[list[list[Sample]], Scores]:
        """Score groups[i] against items[i] (also stored groups a collector replays)."""
        owners = [items[i] for i, g in enumerate(groups) for _ in g]
        return distributed.lockstep_scores(
            self, groups, lambda: self.reward_fn(owners, [s for g in groups for s in g])
        )  # under fsdp lockstep: rank 0's, on every rank

    def step_seed(self, step: int, round_: int = 0) -> int:
        """The sampling seed of (step, round): a pure function, so resume is exact."""
        return derive_seed(self.cfg.seed, "step", step, round_)

    # ---------------------------------------------------------------- scoring

    def _update(
        self, step: int, items: list[Item], flat: list[Sample], group: Tensor, scores: Scores
    ) -> tuple[StepOutput, dict[str, float]]:
        if not flat:  # a collector that found nothing worth training on
            return self._empty(no_samples_metrics(self.beta_schedule.value(step)))
        m = score_metrics(flat, scores, self.beta_schedule.value(step))
        known = torch.tensor([r is not None for r in scores.rewards])  # (N,)
        raw = torch.tensor(  # float64: spreads near the tolerance agree with the ledger's
            [math.nan if r is None else float(r) for r in scores.rewards], dtype=torch.float64
        )
        if not bool(torch.isfinite(raw[known]).all()):
            return self._skip(m, "non-finite reward")
        kl = self._reward_kl(step, items, flat, group, known)  # (N,) or None
        adv, informative = step_advantages(
            self.cfg, self.components, step, flat, group, known, raw, kl_penalty=kl
        )
        m["zero_var_share"] = 1.0 - len(torch.unique(group[informative])) / len(items)
        m["adv_std"] = float(adv[informative].std(correction=0)) if informative.any() else 0.0
        adv, informative, step_m = step_token_advantages(
            self.cfg, self.tokenizer, flat, group, known, scores.steps, adv, informative
        )  # "outcome+steps": (N, T) token advantages; "outcome": unchanged
        m.update(step_m)
        truncated = torch.tensor([s.truncated for s in flat])  # (N,)
        rows = informative & ~truncated if self.cfg.mask_truncated else informative
        if not bool(rows.any()):
            return self._empty({**m, **empty_update_metrics()})
        keep = rows.nonzero().squeeze(1).tolist()
        batch = self._tensors(
            [items[int(group[i])] for i in keep], [flat[i] for i in keep], adv[rows]
        )
        return self._optimise(step, batch, m)

    def _reward_kl(
        self, step: int, items: list[Item], flat: list[Sample], group: Tensor, known: Tensor
    ) -> Tensor | None:
        """`kl_in_reward`: (N,) β·Σ_t(logπ_old − logπ_ref) of each judged sample (0 for the
        unjudged), no grad, micro-batch by micro-batch; None when off or β = 0 (a no-op)."""
        cfg, beta = self.cfg, self.beta_schedule.value(step)
        if not cfg.kl_in_reward or beta == 0.0 or not bool(known.any()):
            return None
        idx = known.nonzero().squeeze(1)  # (J,)
        judged = [flat[i] for i in idx.tolist()]
        b = self._tensors(
            [items[int(group[i])] for i in idx.tolist()], judged, torch.zeros(len(judged))
        )
        out = torch.zeros(len(flat), dtype=torch.float64)  # (N,)
        with torch.no_grad():
            for sel in part_rows(b, cfg.micro_batch_size, cfg.micro_batch_tokens, cfg.share_prefix):
                part = rows(b, sel, cut_prompts=cfg.micro_batch_tokens > 0)
                k1 = sequence_k1(self._logp(part)[0], self._ref_logp(part), part.comp_mask)  # (b,)
                out[idx[sel.cpu()]] = beta * k1.double().cpu()
        return out

    def _tensors(self, items: list[Item], samples: list[Sample], adv: Tensor) -> Batch:
        """Row i = items[i]'s prompt + samples[i], as padded tensors on the model's device."""
        return build_batch(self.tokenizer, items, samples, adv, self.pad_id, self.device)

    # ---------------------------------------------------------------- the update

    def _optimise(
        self, step: int, batch: Batch, m: dict[str, float]
    ) -> tuple[StepOutput, dict[str, float]]:
        cfg = self.cfg
        ctx = self._step_inputs(step, batch)
        done: list[dict[str, float]] = []  # the metrics of the iterations that stepped
        for _ in range(cfg.num_iterations):
            it_metrics = self._iteration(ctx)
            if isinstance(it_metrics, str) and not done:
                return self._skip(m, it_metrics)
            if isinstance(it_metrics, str):  # the earlier iterations' updates stay
                self.counters.skipped_steps += 1
                self.hooks.warn(f"iteration {len(done) + 1} refused: {it_metrics}; earlier kept")
                break
            done.append(it_metrics)
        sums = {k: sum(d[k] for d in done) / len(done) for k in done[0]}
        self.optimizer.zero_grad(set_to_none=True)
        self.beta_schedule.update(sums.get("kl_ref", 0.0))
        self._sync_weights()
        tis = distributed.tis_metrics(self.dist, ctx)  # over every rank's micro-batches
        m.update(update_metrics(sums, int(batch.adv.shape[0])), **tis)
        return StepOutput(), m

    def _step_inputs(self, step: int, batch: Batch) -> StepInputs:
        """Micro-batches, and the log-probs that stay fixed over the step's iterations."""
        cfg = self.cfg
        parts, real = distributed.local_parts(self.dist, batch, cfg)  # this rank's micro-batches
        with torch.no_grad():
            old = [self._logp(p)[0] for p in parts] if cfg.num_iterations > 1 else None
            ref = [self._ref_logp(p) for p in parts] if cfg.reference != "none" else None
        totals = denominators(batch, cfg.mask_truncated)
        beta = 0.0 if cfg.kl_in_reward else self.beta_schedule.value(step)  # KL in the reward
        return StepInputs(parts, totals, old, ref, beta, cfg.dr_grpo_tokens, real)

    def _iteration(self, ctx: StepInputs) -> dict[str, float] | str:
        """One optimiser update over every micro-batch: its metrics, or why it was refused."""
        cfg = self.cfg
        it_metrics = self._backward(ctx)
        it_metrics = distributed.reduce_iteration(self.dist, self.params, it_metrics)
        if isinstance(it_metrics, str):
            return it_metrics
        norm = fsdp.local_float(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
        if not math.isfinite(norm):
            return "non-finite gradient"
        self.optimizer.step()
        it_metrics["grad_norm"] = norm
        return it_metrics

    def _backward(self, ctx: StepInputs) -> dict[str, float] | str:
        """The whole batch's gradient, accumulated over micro-batches, and the loss metrics."""
        self.optimizer.zero_grad(set_to_none=True)
        it_metrics: dict[str, float] = {}
        refused = ""
        for j, part in enumerate(ctx.parts):
            logp, entropy = self._logp(part, entropy=True)
            old = ctx.old[j] if ctx.old is not None else logp.detach()
            loss, lm = self._loss(part, j, ctx, logp, old, entropy)
            if not math.isfinite(float(loss.detach())):
                refused = "non-finite loss"
                if self.fsdp is None:
                    return refused
            real = j < ctx.real  # fsdp's padding micro-batches weigh nothing
            weight = share(part, ctx.totals, self.cfg.aggregation, self.cfg.mask_truncated)
            (loss * (weight if real else 0.0)).backward()  # under fsdp: a collective
            for k, v in lm.items():
                it_metrics[k] = it_metrics.get(k, 0.0) + (v * weight if real else 0.0)
        return refused or it_metrics

    def _loss(
        self, part: Batch, j: int, ctx: StepInputs, logp: Tensor, old: Tensor, ent: Tensor | None
    ) -> tuple[Tensor, dict[str, float]]:
        cfg = self.cfg
        return grpo_loss(
            logp,
            old,
            part.adv,
            part.comp_mask,
            torch.ones_like(part.adv, dtype=torch.bool),
            eps_low=cfg.clip_eps_low,
            eps_high=cfg.clip_eps_high,
            aggregation=cfg.aggregation,
            max_tokens=ctx.max_tokens,
            ref_logp=ctx.ref[j] if ctx.ref is not None else None,
            beta=ctx.beta,
            kl_estimator=cfg.kl_estimator,
            truncated=part.truncated if cfg.mask_truncated else None,
            entropy=ent,
            token_weight=ctx.is_weights(j, part, old, cfg.tis_cap),
        )

    def _empty(self, m: dict[str, float]) -> tuple[StepOutput, dict[str, float]]:
        self.counters.empty_steps += 1
        return StepOutput(), m

    def _skip(self, m: dict[str, float], why: str) -> tuple[StepOutput, dict[str, float]]:
        self.optimizer.zero_grad(set_to_none=True)
        self.counters.skipped_steps += 1
        self.hooks.warn(f"step skipped: {why}; parameters left unchanged")
        m.setdefault("zero_var_share", math.nan)
        m.setdefault("adv_std", math.nan)
        return StepOutput(skipped=True), {**m, **empty_update_metrics(math.nan)}

    def _sync_weights(self) -> None:
        if self.fsdp is not None:
            fsdp.push_weights(self)  # every rank gathers; rank 0's sampler gets the whole weights
        elif isinstance(self.sampler, WeightSync):
            self.sampler.sync_weights(self.model)

    # ---------------------------------------------------------------- log-probs

    def _logp(
        self, b: Batch, entropy: bool = False, model: torch.nn.Module | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs (B, Tc) of the completion tokens under `model` (default: the policy) and,
        if asked, their entropy (B, Tc)."""
        cfg, m = self.cfg, self.model if model is None else model
        return completion_logp(m, b, cfg.share_prefix, cfg.autocast, cfg.temperature, entropy)

    def _ref_logp(self, b: Batch) -> Tensor:
        if self.ref_model is not None:
            return self._logp(b, model=self.ref_model)[0]
        with self.model.disable_adapter():  # type: ignore[operator]
            return self._logp(b)[0]

    # ---------------------------------------------------------------- checkpoints

    def save_checkpoint(self) -> Path:
        """Write checkpoint `self.step` (`grpo_core.state`); refused for non-finite weights."""
        elsewhere = ckpt.step_dir(self.checkpoint_dir or Path(), self.step)  # other ranks' value
        optim = fsdp.gather_for_save(self) if self.fsdp is not None else None  # collective
        path = distributed.on_main(self.dist, lambda: ckpt_state.save(self, optim), elsewhere)
        self.hooks.on_checkpoint(self.step, path)
        return path

    def resume(self, path: Path | None = None) -> int:
        """Restore the newest valid checkpoint (or `path`); returns the step it continues at."""
        return ckpt_state.resume(self, path)


def _saved(root: Path, step: int) -> bool:
    return ckpt.step_dir(root, step).is_dir()
