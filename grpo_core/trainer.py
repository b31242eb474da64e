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
−β·Σ_t(logπ_old − logπ_ref), and the loss then has no KL term; advantages
(`grpo_core.step_advantages`; a sample the verifier could not judge is a group of its own, so it
carries no advantage);
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
Replayed samples (`Sample.replayed`, drawn by another policy μ) train on the decoupled clipped
objective (`grpo_core.loss`): ratio to the step's start (the old log-probs), clipped, times
min(π_old/μ, `tis_cap`) on the policy-gradient and the KL term; refused with `tis_cap` = 0.

Safety: a non-finite reward, loss or gradient (checked before each `optimizer.step()`) refuses
the step: gradient discarded, parameters and optimiser state untouched, `skipped_steps` + 1. A
refused later iteration (`num_iterations` > 1) ends the step, keeping the earlier iterations'
updates (nothing is copied to undo them). Non-finite weights are never checkpointed.

Reference models (cfg.reference): `frozen` — a deep copy of the starting weights, no grad;
`none` — no KL term (β must be 0); `lora_base` — LoRA adapters (peft) are trained and the base
weights, seen with the adapters disabled, are the reference: no second copy in memory.

Exact resume: every random choice derives from (cfg.seed, step); a checkpoint is the trainer's
`TrainerState` (`state()`: weights, optimiser, schedules, counters), which `grpo_core.state`
writes and reads back into it (`load_state`); N steps + resume + N steps reproduce 2N straight
steps bitwise on CPU (tests/grpo_core/test_trainer.py). No process-wide torch settings here:
the caller runs `grpo_core.seeds.seed_torch(cfg.seed, cfg.deterministic)`; LoRA's initial draws
come from cfg.seed without touching the global generator.

Under `torchrun` (`grpo_core.distributed`) each rank trains on its slice of the step's rows with
the whole step's advantages and denominators, gradients summed; rank 0 alone reports and saves;
`SIEVE_PARALLEL=fsdp` also shards parameters and optimiser state (`grpo_core.fsdp`). One
optimiser step per step and iteration (no GRPO-paper mini-batches), like TRL's default.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

import copy
import dataclasses
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
from grpo_core.batch import Batch
from grpo_core.collect import plain as collect
from grpo_core.config import GRPOConfig
from grpo_core.kl import make_beta_schedule
from grpo_core.logp_policy import Policy, pad_id
from grpo_core.lora import with_lora
from grpo_core.optim import make_optimiser
from grpo_core.rewards import Component
from grpo_core.seeds import derive_seed, seeded
from grpo_core.state import TrainerState
from grpo_core.step_advantages import (
    empty_update_metrics,
    no_samples_metrics,
    score_metrics,
    step_advantages,
    step_token_advantages,
    update_metrics,
)
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
    Rollouts,
    Sample,
    Scores,
    StepOutput,
    TrainerError,
    TrainerHooks,
    WeightSync,
)
from grpo_core.update import StepInputs, backward, clip_and_step, fixed_inputs, step_metrics

__all__ = [
    "BatchSource", "Collected", "Collector", "Counters", "GroupSampler", "Hooks", "Item",
    "MetricsSink", "RewardFn", "Rollouts", "Sample", "Scores", "StepOutput", "Trainer",
    "TrainerError", "TrainerHooks", "TrainerState", "WeightSync", "collect",
]  # fmt: skip


class Trainer:
    """GRPO on a policy held in memory; see the module docstring for the step. Collectors see
    it as `Rollouts`; checkpoints see the `TrainerState` it hands out (`state`, `load_state`)."""

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
        self.dist = distributed.setup()  # one process: Dist(), every collective a no-op
        self.hooks = distributed.rank_hooks(self.dist, Hooks() if hooks is None else hooks)
        self.collector, self.crash_point = collector, crash_point
        with seeded(cfg.seed, next(model.parameters()).device):  # LoRA's initial draws
            self.model = with_lora(model, cfg)  # an owner that wrapped it already keeps its object
        distributed.broadcast_params(self.dist, self.model)  # every rank starts from rank 0's
        self.ref_model: torch.nn.Module | None = None
        if cfg.reference == "frozen":
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.fsdp: fsdp.FsdpState | None = None
        if fsdp.enabled(self.dist):  # shards in place, turns prefix sharing off
            self.fsdp, self.cfg = fsdp.wrap(
                self.dist, cfg, self.model, self.ref_model, sampler, self.hooks.warn
            )
        cfg = self.cfg
        self.model.eval()  # no dropout: sampling and scoring see the same function
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer, self.scheduler = make_optimiser(self.params, cfg, self.hooks.warn)
        self.beta_schedule = make_beta_schedule(cfg)
        repetition = Component("repetition", cfg.repetition_coef, cfg.repetition_start_step)
        self.components = [Component("reward", 1.0, 0), repetition]
        self.counters = Counters()
        self.step = 0  # the next step to run
        self.schedule_offset = 0  # updates before step 0 that the β/reward schedules count
        self.pad_id = pad_id(tokenizer)
        self.device = next(self.model.parameters()).device
        self.policy = Policy(self.model, self.ref_model, cfg, tokenizer, self.pad_id, self.device)
        self.lockstep = self.fsdp is not None and self.fsdp.lockstep  # every rank collects

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
        if self.checkpoint_dir is not None and not ckpt.saved(self.checkpoint_dir, self.step):
            self.save_checkpoint()
        return history

    def run_step(self, step: int) -> StepOutput:
        c = distributed.collect(self.dist, self, step, self.collector, self.lockstep)
        flat = [s for g in c.groups for s in g]
        self.counters.rollouts += c.rollouts
        group = torch.tensor([i for i, g in enumerate(c.groups) for _ in g], dtype=torch.long)
        t2 = time.perf_counter()
        out, m = self._update(step, c.items, flat, group, c.scores)
        lr = float(self.scheduler.get_last_lr()[0])
        out.metrics = step_metrics(m, c, self.counters, lr, time.perf_counter() - t2)
        with warnings.catch_warnings():  # an empty or skipped step has no optimiser.step()
            warnings.simplefilter("ignore", UserWarning)
            self.scheduler.step()
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
            self.dist,
            self.lockstep,
            groups,
            lambda: self.reward_fn(owners, [s for g in groups for s in g]),
        )  # under fsdp lockstep: rank 0's, on every rank

    def step_seed(self, step: int, round_: int = 0) -> int:
        """The sampling seed of (step, round): a pure function, so resume is exact."""
        return derive_seed(self.cfg.seed, "step", step, round_)

    # ---------------------------------------------------------------- scoring

    def _update(
        self, step: int, items: list[Item], flat: list[Sample], group: Tensor, scores: Scores
    ) -> tuple[StepOutput, dict[str, float]]:
        at = step + self.schedule_offset  # where the schedules are (a carried run continues)
        if not flat:  # a collector that found nothing worth training on
            return self._empty(no_samples_metrics(self.beta_schedule.value(at)))
        m = score_metrics(flat, scores, self.beta_schedule.value(at))
        known = torch.tensor([r is not None for r in scores.rewards])  # (N,)
        raw = torch.tensor(  # float64: spreads near the tolerance agree with the ledger's
            [math.nan if r is None else float(r) for r in scores.rewards], dtype=torch.float64
        )
        if not bool(torch.isfinite(raw[known]).all()):
            return self._skip(m, "non-finite reward")
        kl = self.policy.reward_kl(self.beta_schedule.value(at), items, flat, group, known)
        adv, informative = step_advantages(
            self.cfg, self.components, at, flat, group, known, raw, kl_penalty=kl
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

    def _tensors(self, items: list[Item], samples: list[Sample], adv: Tensor) -> Batch:
        """Row i = items[i]'s prompt + samples[i], as padded tensors on the model's device."""
        return self.policy.tensors(items, samples, adv)

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
        parts, real = distributed.local_parts(self.dist, batch, self.cfg)  # this rank's parts
        at = step + self.schedule_offset
        beta = 0.0 if self.cfg.kl_in_reward else self.beta_schedule.value(at)
        return fixed_inputs(self.cfg, self.policy, batch, parts, real, beta)

    def _iteration(self, ctx: StepInputs) -> dict[str, float] | str:
        """One optimiser update over every micro-batch: its metrics, or why it was refused."""
        it_metrics = distributed.reduce_iteration(self.dist, self.params, self._backward(ctx))
        return clip_and_step(self.cfg, self.params, self.optimizer, it_metrics)

    def _backward(self, ctx: StepInputs) -> dict[str, float] | str:
        """The whole batch's gradient, accumulated over micro-batches, and the loss metrics."""
        return backward(self.cfg, ctx, self.optimizer, self.policy, self.fsdp is not None)

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
            fsdp.push_weights(self.fsdp, self.model, self.sampler)  # rank 0's gets whole weights
        elif isinstance(self.sampler, WeightSync):
            self.sampler.sync_weights(self.model)

    def _logp(self, b: Batch, entropy: bool = False) -> tuple[Tensor, Tensor | None]:
        """Log-probs (B, Tc) of the completion tokens under the policy; entropy if asked."""
        return self.policy.logp(b, entropy)

    # ---------------------------------------------------------------- checkpoints

    def state(self) -> TrainerState:
        """The training state a checkpoint holds: model, optimiser and schedules by reference,
        step and counters copied, and where the whole weights are (fsdp: rank 0's host copy)."""
        whole = self.model if self.fsdp is None else self.fsdp.host
        return TrainerState(
            self.step, dataclasses.replace(self.counters), self.cfg, self.model, self.optimizer,
            self.scheduler, self.beta_schedule, whole, sharded=self.fsdp is not None,
        )  # fmt: skip

    def load_state(self, st: TrainerState) -> None:
        """Take back a state this trainer handed out (resume filled its objects in place): its
        step and counters become the trainer's."""
        if st.model is not self.model or st.optimizer is not self.optimizer:
            raise TrainerError("load_state takes a state this trainer handed out (state())")
        self.step, self.counters = st.step, dataclasses.replace(st.counters)

    def save_checkpoint(self) -> Path:
        """Write checkpoint `self.step` (`grpo_core.state`); refused for non-finite weights."""
        st, root = self.state(), self.checkpoint_dir
        elsewhere = ckpt.step_dir(root or Path(), self.step)  # other ranks' value
        optim = fsdp.gather_for_save(self.fsdp, self.model, self.optimizer) if self.fsdp else None
        path = distributed.on_main(
            self.dist,
            lambda: ckpt_state.save(st, root, self.tokenizer, self.hooks, self.crash_point, optim),
            elsewhere,
        )
        self.hooks.on_checkpoint(self.step, path)
        return path

    def carry(
        self,
        path: Path,
        offset: int,
        reference: dict[str, Tensor] | None = None,
    ) -> bool:
        """Continue, as a new run, the run that wrote checkpoint `path` (whose weights this
        trainer's model already holds): its AdamW moments, lr schedule and β schedule state,
        the schedules `offset` updates in (the updates of the lineage before step 0), and the
        KL reference set to `reference` (the lineage's first weights; None keeps this run's
        start). Step numbering, sampling seeds and the batch source stay this run's own. Returns
        False, changing nothing, when `path` kept no optimiser state (only a run's newest
        checkpoint does)."""
        if not ckpt_state.carry(self.state(), path):
            return False
        self.schedule_offset = int(offset)
        if reference is not None:
            if self.ref_model is None:
                raise TrainerError(f"reference={self.cfg.reference!r} keeps no frozen copy")
            self.ref_model.load_state_dict(reference)
        return True

    def resume(self, path: Path | None = None) -> int:
        """Restore the newest valid checkpoint (or `path`); returns the step it continues at."""
        st = ckpt_state.resume(self.state(), self.checkpoint_dir, path, self.hooks.warn)
        self.load_state(st)
        return self.step
