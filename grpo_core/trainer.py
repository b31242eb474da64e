"""The GRPO training loop: batch of curriculum items → sample groups → score → advantages →
`num_iterations` clipped-surrogate updates with KL to the reference → metrics, checkpoints.

The trainer knows nothing about ledgers or problem generators. It receives four small things:

- `batches(step) -> items`: the curriculum items (prompt, answer, group size) of optimiser step
  `step`. It must be a pure function of the step, which is what makes resume exact;
- a `GroupSampler` that samples completions from the *current* weights of the model being trained
  (the hf sampler is handed the same model object), returning completion token ids;
- a `RewardFn` that scores completions (reward and correctness; `None` = verifier error);
- optional callbacks for metrics and checkpoints (the pipeline writes them to the ledger).

Per step, in order: sample with seed (cfg.seed, step); score; reward components are combined
(`grpo_core.rewards`), a sample whose reward is `None` is put in a group of its own so it carries
no advantage and is out of the loss; advantages per group (`grpo_core.advantages`) with the
length penalty after normalisation; uninformative groups are dropped *before* any forward pass
(they would contribute nothing); old log-probs are taken once when `num_iterations` > 1; each
iteration computes the loss (`grpo_core.loss`), backpropagates over micro-batches (each weighted by
its share of the aggregation's denominator, so micro-batching does not change the gradient),
checks that the loss and the gradient norm are finite, clips the norm and steps the optimiser.

Safety: a non-finite reward (NaN / inf from the reward function), loss or gradient skips the
rest of the step — the gradient is discarded, the parameters stay as they were, the event is
counted in `skipped_steps`, and a checkpoint is never written from non-finite weights.

Reference models (cfg.reference): `frozen` — a deep copy of the starting weights, no grad;
`none` — no KL term (β must be 0); `lora_base` — LoRA adapters (peft) are trained and the base
weights, seen with the adapters disabled, are the reference: no second copy in memory.

Exact resume: every random choice is derived from (cfg.seed, step) — the batch, the sampling
seed — and checkpoints hold the weights, optimiser, lr scheduler and β-schedule state and the
counters; with `deterministic` set, N steps + resume + N steps reproduce 2N straight steps
bitwise on CPU (tests/grpo_core/test_trainer.py).

Departure from the GRPO paper: one optimiser step per training step per iteration (no separate
"mini-batches" of the rollout batch); TRL's default does the same with gradient accumulation.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from grpo_core import checkpoint as ckpt
from grpo_core.advantages import advantages, length_penalty
from grpo_core.config import GRPOConfig
from grpo_core.loss import grpo_loss
from grpo_core.rewards import Component, combine, repetition_penalty

# Fields that change the model's parameter set: a checkpoint written under other values of
# these cannot be resumed with this config.
MODEL_FIELDS = ("reference", "lora_rank", "lora_alpha")
# Update micro-batches group rows of similar length (less padding): a new bucket starts when a
# row is this many times longer than the bucket's shortest and the bucket has this many rows.
BUCKET_STRETCH = 1.25
BUCKET_MIN_ROWS = 32


@dataclass(frozen=True)
class Item:
    """One curriculum prompt: rendered prompt text, what the reward function checks, its G."""

    prompt: str
    answer: str
    group_size: int
    key: str = ""  # e.g. problem_id; only for logging
    weight: float = 1.0
    verifier: str = ""  # passed through to the reward function


@dataclass(frozen=True)
class Sample:
    """One completion: its token ids (with the end-of-sequence token if it stopped there)."""

    token_ids: tuple[int, ...]
    text: str
    truncated: bool  # cut by max_new_tokens


class GroupSampler(Protocol):
    def sample_groups(
        self,
        prompts: Sequence[str],
        sizes: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        """For prompt i, sizes[i] completions sampled from the current weights."""
        ...


@dataclass(frozen=True)
class Scores:
    rewards: list[float | None]  # None: the verifier could not judge this sample
    correct: list[bool | None]


class RewardFn(Protocol):
    def __call__(self, items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        """Score samples[i] against items[i] (items are repeated per sample)."""
        ...


BatchSource = Callable[[int], Sequence[Item]]
MetricsSink = Callable[[int, dict[str, float]], None]


class TrainerError(ValueError):
    """Bad trainer input; the message is one line saying what to fix."""


@dataclass
class Counters:
    skipped_steps: int = 0  # steps whose update was discarded (non-finite reward/loss/grad)
    empty_steps: int = 0  # steps where every group was uninformative (nothing to learn from)
    rollouts: int = 0  # completions sampled so far


@dataclass
class _Batch:
    """The informative rows of one step, as padded tensors."""

    ids: Tensor  # (B, L) prompt + completion, right-padded
    attn: Tensor  # (B, L)
    starts: Tensor  # (B,) index in the shifted logits of each completion's first token
    comp_mask: Tensor  # (B, Tc)
    adv: Tensor  # (B,)
    truncated: Tensor  # (B,) bool
    # each distinct prompt once (prefix sharing): left-padded prompts, and which prompt a row has
    prompt_ids: Tensor | None = None  # (P, Tp)
    prompt_attn: Tensor | None = None  # (P, Tp)
    owner: Tensor | None = None  # (B,) row -> prompt
    comp_ids: Tensor | None = None  # (B, Tc) completion tokens, right-padded


@dataclass
class Collected:
    """What a step trains on: items, their groups (aligned), flat scores, rollouts spent."""

    items: list[Item]
    groups: list[list[Sample]]
    scores: Scores
    rollouts: int  # every completion sampled for this step, including ones not trained on
    time_sample: float = 0.0
    time_score: float = 0.0


Collector = Callable[["Trainer", int], Collected]


def collect(trainer: Trainer, step: int) -> Collected:
    """The plain strategy: the batch source's items, each sampled with its own G."""
    items = list(trainer.batches(step))
    if not items:
        raise TrainerError(f"the batch source returned no items for step {step}")
    groups, scores, ts, tr = trainer.sample_and_score(items, trainer.step_seed(step))
    return Collected(items, groups, scores, sum(len(g) for g in groups), ts, tr)


@dataclass
class StepOutput:
    metrics: dict[str, float] = field(default_factory=dict)
    skipped: bool = False


def _finite(x: float) -> bool:
    return math.isfinite(x)


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
        on_metrics: MetricsSink | None = None,
        on_checkpoint: Callable[[int, Path], None] | None = None,
        write_extra: Callable[[Path, torch.nn.Module], None] | None = None,
        crash_point: Callable[[str], None] = lambda name: None,
        warn: Callable[[str], None] = print,
        collector: Collector | None = None,
    ):
        self.cfg = cfg
        self.tokenizer, self.sampler, self.reward_fn = tokenizer, sampler, reward_fn
        self.batches, self.checkpoint_dir = batches, checkpoint_dir
        self.on_metrics, self.on_checkpoint = on_metrics, on_checkpoint
        self.write_extra = write_extra
        self.collector = collector
        self.crash_point, self.warn = crash_point, warn
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        torch.manual_seed(cfg.seed)
        self.model = model
        self.ref_model: torch.nn.Module | None = None
        if cfg.reference == "frozen":
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        elif cfg.reference == "lora_base":
            self.model = _with_lora(model, cfg)
        self.model.eval()  # no dropout: sampling and scoring see the same function
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        warmup = cfg.lr_warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        self.beta_schedule = cfg.make_beta_schedule()
        self.components = [
            Component("reward", 1.0, 0),
            Component("repetition", cfg.repetition_coef, cfg.repetition_start_step),
        ]
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
        while self.step < end:
            out = self.run_step(self.step)
            history.append(out.metrics)
            self.step += 1
            if self.on_metrics is not None:
                self.on_metrics(self.step - 1, out.metrics)
            self.crash_point("train.after_step")
            if self.checkpoint_dir is not None and every and self.step % every == 0:
                self.save_checkpoint()
        if self.checkpoint_dir is not None and not _saved(self.checkpoint_dir, self.step):
            self.save_checkpoint()
        return history

    def run_step(self, step: int) -> StepOutput:
        c = self.collector(self, step) if self.collector is not None else collect(self, step)
        flat = [s for g in c.groups for s in g]
        self.counters.rollouts += c.rollouts
        group = torch.tensor([i for i, g in enumerate(c.groups) for _ in g], dtype=torch.long)
        t2 = time.perf_counter()
        out, m = self._update(step, c.items, flat, group, c.scores)
        m.update(time_sample=c.time_sample, time_score=c.time_score)
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
        owners = [items[i] for i, g in enumerate(groups) for _ in g]
        scores = self.reward_fn(owners, [s for g in groups for s in g])
        return groups, scores, t1 - t0, time.perf_counter() - t1

    def step_seed(self, step: int, round_: int = 0) -> int:
        """The sampling seed of (step, round): a pure function, so resume is exact."""
        return self.cfg.seed * 1_000_003 + step + round_ * 7_919_000

    # ---------------------------------------------------------------- the update

    def _update(
        self,
        step: int,
        items: list[Item],
        flat: list[Sample],
        group: Tensor,
        scores: Scores,
    ) -> tuple[StepOutput, dict[str, float]]:
        cfg = self.cfg
        n = len(flat)
        if n == 0:  # a collector that found nothing worth training on
            self.counters.empty_steps += 1
            m0 = {"zero_var_share": 1.0, "adv_std": 0.0, "beta": self.beta_schedule.value(step)}
            nan = {k: math.nan for k in ("reward_mean", "reward_std", "pass_rate")}
            zero = {k: 0.0 for k in ("completion_len", "truncated_share", "verifier_errors")}
            return StepOutput(), {**m0, **nan, **zero, **_empty_update_metrics()}
        known = torch.tensor([r is not None for r in scores.rewards])  # (N,)
        raw = torch.tensor([math.nan if r is None else float(r) for r in scores.rewards])
        lengths = torch.tensor([len(s.token_ids) for s in flat], dtype=torch.float64)  # (N,)
        truncated = torch.tensor([s.truncated for s in flat])  # (N,)
        correct = [c for c in scores.correct if c is not None]
        m: dict[str, float] = {
            "reward_mean": float(raw[known].mean()) if known.any() else math.nan,
            "reward_std": float(raw[known].std(correction=0)) if known.any() else math.nan,
            "pass_rate": sum(correct) / len(correct) if correct else math.nan,
            "completion_len": float(lengths.mean()),
            "truncated_share": float(truncated.float().mean()),
            "verifier_errors": float(n - int(known.sum())),
            "beta": self.beta_schedule.value(step),
        }
        if not bool(torch.isfinite(raw[known]).all()):
            return self._skip(m, "non-finite reward")
        # a sample the verifier could not judge gets a group of its own: no advantage, no loss
        gid = torch.where(known, group, group.max() + 1 + torch.arange(n))  # (N,)
        values = {
            "reward": torch.where(known, raw, torch.zeros_like(raw)).double(),
            "repetition": repetition_penalty([s.token_ids for s in flat], cfg.repetition_ngram),
        }
        reward = combine(values, self.components, gid, step, cfg.reward_clip)  # (N,)
        adv, informative = advantages(
            reward, gid, cfg.estimator, cfg.std_ddof, cfg.adv_eps, cfg.zero_var_tol
        )
        adv = length_penalty(
            adv, lengths, gid, cfg.length_penalty_coef, informative, cfg.std_ddof, cfg.adv_eps
        )
        n_groups = len(items)
        informative_groups = len(torch.unique(group[informative]))
        m["zero_var_share"] = 1.0 - informative_groups / n_groups
        m["adv_std"] = float(adv[informative].std(correction=0)) if informative.any() else 0.0
        rows = informative & ~truncated if cfg.mask_truncated else informative
        if not bool(rows.any()):
            self.counters.empty_steps += 1
            return StepOutput(), {**m, **_empty_update_metrics()}
        keep = rows.nonzero().squeeze(1).tolist()
        batch = self._tensors(
            [items[int(group[i])] for i in keep], [flat[i] for i in keep], adv[rows]
        )
        return self._optimise(step, batch, m)

    def _optimise(
        self, step: int, batch: _Batch, m: dict[str, float]
    ) -> tuple[StepOutput, dict[str, float]]:
        cfg = self.cfg
        beta = self.beta_schedule.value(step)
        parts = self._micro(batch)
        with torch.no_grad():
            old = [self._logp(p)[0] for p in parts] if cfg.num_iterations > 1 else None
            ref = [self._ref_logp(p) for p in parts] if self._has_ref() else None
        totals = self._denominators(batch)
        sums: dict[str, float] = {}
        for _ in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            it_metrics: dict[str, float] = {}
            for j, part in enumerate(parts):
                logp, logits = self._logp(part)
                loss, lm = grpo_loss(
                    logp,
                    old[j] if old is not None else logp.detach(),
                    part.adv,
                    part.comp_mask,
                    torch.ones_like(part.adv, dtype=torch.bool),
                    eps_low=cfg.clip_eps_low,
                    eps_high=cfg.clip_eps_high,
                    aggregation=cfg.aggregation,
                    max_tokens=int(batch.comp_mask.shape[1]),
                    ref_logp=ref[j] if ref is not None else None,
                    beta=beta,
                    kl_estimator=cfg.kl_estimator,
                    truncated=part.truncated if cfg.mask_truncated else None,
                    logits=logits,
                )
                share = self._share(part, totals)
                if not _finite(float(loss.detach())):
                    return self._skip(m, "non-finite loss")
                (loss * share).backward()
                for k, v in lm.items():
                    it_metrics[k] = it_metrics.get(k, 0.0) + v * share
            params = [p for p in self.model.parameters() if p.requires_grad]
            norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
            if not _finite(norm):
                return self._skip(m, "non-finite gradient")
            self.optimizer.step()
            it_metrics["grad_norm"] = norm
            for k, v in it_metrics.items():
                sums[k] = sums.get(k, 0.0) + v / cfg.num_iterations
        self.optimizer.zero_grad(set_to_none=True)
        kl = sums.get("kl_ref", 0.0)
        self.beta_schedule.update(kl)
        m.update(
            loss=sums["loss"],
            kl=kl,
            clip_low_frac=sums["clip_frac_low"],
            clip_high_frac=sums["clip_frac_high"],
            entropy=sums.get("entropy", math.nan),
            grad_norm=sums["grad_norm"],
            trained_samples=float(batch.adv.shape[0]),
        )
        return StepOutput(), m

    def _skip(self, m: dict[str, float], why: str) -> tuple[StepOutput, dict[str, float]]:
        self.optimizer.zero_grad(set_to_none=True)
        self.counters.skipped_steps += 1
        self.warn(f"step skipped: {why}; parameters left unchanged")
        m.setdefault("zero_var_share", math.nan)
        m.setdefault("adv_std", math.nan)
        return StepOutput(skipped=True), {**m, **_empty_update_metrics(math.nan)}

    # ---------------------------------------------------------------- tensors

    def _tensors(self, items: list[Item], samples: list[Sample], adv: Tensor) -> _Batch:
        index: dict[str, int] = {}
        owners = [index.setdefault(it.prompt, len(index)) for it in items]
        encoded = [list(self.tokenizer(p)["input_ids"]) for p in index]
        comps = [list(s.token_ids) for s in samples]
        pad = self.pad_id
        ids, attn = _padded([encoded[o] + c for o, c in zip(owners, comps, strict=True)], pad)
        comp_ids, comp_mask = _padded(comps, pad, min_width=1)  # (B, Tc), right-padded
        # left-padded: every prompt ends at column Tp - 1
        prompt_ids, prompt_attn = _padded(encoded, pad, left=True)  # (P, Tp)
        owner = torch.tensor(owners, dtype=torch.long)  # (B,)
        starts = prompt_attn.sum(dim=1)[owner] - 1  # logits at position t predict token t + 1
        truncated = torch.tensor([s.truncated for s in samples])
        dev = self.device
        return _Batch(
            ids.to(dev),
            attn.to(dev),
            starts.to(dev),
            comp_mask.bool().to(dev),
            adv.float().to(dev),
            truncated.to(dev),
            prompt_ids.to(dev),
            prompt_attn.to(dev),
            owner.to(dev),
            comp_ids.to(dev),
        )

    def _logp(self, b: _Batch) -> tuple[Tensor, Tensor]:
        """Log-probs (B, Tc) of the completion tokens and their logits (B, Tc, V)."""
        if self.cfg.share_prefix:
            return _shared_prefix_logp(self.model, b)
        logits = self.model(input_ids=b.ids, attention_mask=b.attn).logits  # (B, L, V)
        return _gather_completion(logits, b)

    def _ref_logp(self, b: _Batch) -> Tensor:
        if self.ref_model is not None:
            return self._logp_with(self.ref_model, b)
        with self.model.disable_adapter():  # type: ignore[operator]
            return self._logp_with(self.model, b)

    def _logp_with(self, model: torch.nn.Module, b: _Batch) -> Tensor:
        if self.cfg.share_prefix:
            return _shared_prefix_logp(model, b)[0]
        return _gather_completion(model(input_ids=b.ids, attention_mask=b.attn).logits, b)[0]

    def _has_ref(self) -> bool:
        return self.cfg.reference != "none"

    def _micro(self, b: _Batch) -> list[_Batch]:
        """The batch as micro-batches; see `_micro_shared` and `_micro_bucketed`."""
        if self.cfg.share_prefix:
            return self._micro_shared(b)
        return self._micro_bucketed(b)

    def _micro_shared(self, b: _Batch) -> list[_Batch]:
        """Whole groups together (rows come grouped by prompt), up to `micro_batch_size` rows."""
        n = int(b.ids.shape[0])
        size = self.cfg.micro_batch_size or n
        return [self._rows(b, torch.arange(s, min(s + size, n))) for s in range(0, n, size)]

    def _micro_bucketed(self, b: _Batch) -> list[_Batch]:
        """The batch as micro-batches of rows of similar length, each cut to its own width.

        Rows are sorted by length and split where a bucket's longest row would exceed
        `BUCKET_STRETCH` × its shortest (and the bucket holds at least `BUCKET_MIN_ROWS`), or at
        `micro_batch_size` rows. The loss is a share-weighted sum over micro-batches, so the
        split changes no gradient, only how much padding is computed.
        """
        n = int(b.ids.shape[0])
        size = self.cfg.micro_batch_size or n
        lengths = b.attn.sum(dim=1)  # (B,)
        order = torch.argsort(lengths, stable=True)
        sorted_len = lengths[order].tolist()
        parts, start = [], 0
        for i in range(1, n + 1):
            full = i - start >= size
            stretch = (
                i < n
                and i - start >= BUCKET_MIN_ROWS
                and sorted_len[i] > BUCKET_STRETCH * max(sorted_len[start], 1)
            )
            if i == n or full or stretch:
                parts.append(self._rows(b, order[start:i]))
                start = i
        return parts

    @staticmethod
    def _rows(b: _Batch, rows: Tensor) -> _Batch:
        """The given rows, cut to their own widths, with only the prompts they use."""
        width = int(b.attn[rows].sum(dim=1).max())
        comp = b.comp_mask[rows]
        tc = max(1, int(comp.sum(dim=1).max()))
        shared: tuple[Tensor | None, ...] = (None, None, None, None)
        if b.prompt_ids is not None and b.prompt_attn is not None and b.owner is not None:
            used, owner = torch.unique(b.owner[rows], return_inverse=True)
            assert b.comp_ids is not None
            shared = (b.prompt_ids[used], b.prompt_attn[used], owner, b.comp_ids[rows, :tc])
        return _Batch(
            b.ids[rows, :width],
            b.attn[rows, :width],
            b.starts[rows],
            comp[:, :tc],
            b.adv[rows],
            b.truncated[rows],
            *shared,
        )

    def _valid(self, b: _Batch) -> Tensor:
        keep = ~b.truncated if self.cfg.mask_truncated else torch.ones_like(b.truncated)
        return b.comp_mask & keep[:, None]  # (B, Tc)

    def _denominators(self, b: _Batch) -> tuple[float, float]:
        valid = self._valid(b)
        return float(valid.sum()), float(valid.any(dim=1).sum())

    def _share(self, part: _Batch, totals: tuple[float, float]) -> float:
        """This micro-batch's share of the aggregation's denominator (1 with one micro-batch)."""
        valid = self._valid(part)
        if self.cfg.aggregation == "token_mean":
            return float(valid.sum()) / max(totals[0], 1.0)
        return float(valid.any(dim=1).sum()) / max(totals[1], 1.0)

    # ---------------------------------------------------------------- checkpoints

    def save_checkpoint(self) -> Path:
        if self.checkpoint_dir is None:
            raise TrainerError("no checkpoint_dir was given to the trainer")
        for name, p in self.model.named_parameters():
            if not bool(torch.isfinite(p).all()):
                raise TrainerError(f"refusing to checkpoint non-finite weights ({name})")
        path = ckpt.save(
            self.checkpoint_dir,
            self.step,
            self._write_model,
            self._state(),
            self.cfg.keep_checkpoints,
            self.crash_point,
        )
        if self.on_checkpoint is not None:
            self.on_checkpoint(self.step, path)
        return path

    def _write_model(self, folder: Path) -> None:
        model = self.model
        if self.cfg.reference == "lora_base":  # a plain model folder: adapters merged in
            model = copy.deepcopy(self.model).merge_and_unload()  # type: ignore[operator]
        model.save_pretrained(folder, safe_serialization=True)  # type: ignore[operator]
        if hasattr(self.tokenizer, "save_pretrained"):
            self.tokenizer.save_pretrained(folder)
        if self.write_extra is not None:
            self.write_extra(folder, model)

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "beta_schedule": dict(vars(self.beta_schedule)),
            "counters": dataclasses.asdict(self.counters),
            "torch_rng": torch.get_rng_state(),
            "config": dataclasses.asdict(self.cfg),
        }
        if self.cfg.reference == "lora_base":
            from peft import get_peft_model_state_dict

            state["adapter"] = get_peft_model_state_dict(self.model)
        return state

    def resume(self, path: Path | None = None) -> int:
        """Restore the newest valid checkpoint (or `path`); returns the step it continues at."""
        if path is None:
            if self.checkpoint_dir is None:
                raise TrainerError("resume needs a checkpoint_dir")
            found = ckpt.latest_valid(self.checkpoint_dir, self.warn)
            if found is None:
                raise TrainerError(f"no usable checkpoint under {self.checkpoint_dir}")
            path, state = found
        else:
            state = ckpt.load_state(path)
        saved = state.get("config", {})
        for name in MODEL_FIELDS:
            if name in saved and saved[name] != getattr(self.cfg, name):
                raise ckpt.CheckpointError(
                    f"checkpoint {path} was trained with {name}={saved[name]!r}, "
                    f"this run has {name}={getattr(self.cfg, name)!r}; use the same value"
                )
        self._load_weights(path, state)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        vars(self.beta_schedule).update(state["beta_schedule"])
        self.counters = Counters(**state["counters"])
        torch.set_rng_state(state["torch_rng"])
        self.step = int(state["step"])
        return self.step

    def _load_weights(self, path: Path, state: dict[str, Any]) -> None:
        if self.cfg.reference == "lora_base":
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.model, state["adapter"])
            return
        from safetensors.torch import load_file

        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise ckpt.CheckpointError(f"checkpoint {path}: no *.safetensors weights")
        loaded: dict[str, Tensor] = {}
        for f in files:
            loaded.update(load_file(f))
        own = self.model.state_dict()
        tied = _tied_aliases(own)
        missing = [k for k in own if k not in loaded and not (tied.get(k, set()) & loaded.keys())]
        unexpected = [k for k in loaded if k not in own]
        bad_shape = [k for k in loaded if k in own and own[k].shape != loaded[k].shape]
        if missing or unexpected or bad_shape:
            what = (
                f"shape of {bad_shape[0]} {tuple(loaded[bad_shape[0]].shape)} vs "
                f"{tuple(own[bad_shape[0]].shape)}"
                if bad_shape
                else f"missing {missing[:2]}"
                if missing
                else f"unexpected {unexpected[:2]}"
            )
            raise ckpt.CheckpointError(
                f"checkpoint {path} does not fit this model ({what}); "
                "resume with the model it was trained from"
            )
        with torch.no_grad():
            for k, v in loaded.items():
                own[k].copy_(v)


def _tied_aliases(state: dict[str, Tensor]) -> dict[str, set[str]]:
    """For each key, the other keys sharing its storage (tied embeddings)."""
    by_ptr: dict[int, set[str]] = {}
    for k, v in state.items():
        by_ptr.setdefault(v.data_ptr(), set()).add(k)
    return {k: by_ptr[v.data_ptr()] - {k} for k, v in state.items()}


def _saved(root: Path, step: int) -> bool:
    return ckpt.step_dir(root, step).is_dir()


def _shared_prefix_logp(model: torch.nn.Module, b: _Batch) -> tuple[Tensor, Tensor]:
    """`_gather_completion`'s result with each distinct prompt run through the model once.

    The prompts (left-padded) give a KV cache and the logits of each completion's first token;
    the cache is gathered to the rows (an index, so gradients flow back to the shared prompt)
    and the completions run on top of it. Same log-probs as the full-row forward up to float
    rounding (tests/grpo_core/test_trainer_prefix.py), with the prompt computed once per group
    instead of once per sample.
    """
    assert b.prompt_ids is not None and b.prompt_attn is not None
    assert b.owner is not None and b.comp_ids is not None
    from transformers import DynamicCache

    positions = (b.prompt_attn.cumsum(-1) - 1).clamp(min=0)  # (P, Tp)
    cache = DynamicCache(config=getattr(model, "config", None))
    out = model(
        input_ids=b.prompt_ids,
        attention_mask=b.prompt_attn,
        position_ids=positions,
        cache=cache,
        use_cache=True,
    )
    first = out.logits[:, -1:, :][b.owner]  # (B, 1, V): predicts completion token 0
    tc = b.comp_ids.shape[1]
    if tc > 1:
        cache.batch_select_indices(b.owner)  # (B, ...) per layer, differentiable
        lengths = b.prompt_attn.sum(-1)[b.owner]  # (B,)
        steps = torch.arange(tc - 1, device=lengths.device)
        attn = torch.cat([b.prompt_attn[b.owner], torch.ones_like(b.comp_ids[:, :-1])], dim=1)
        rest = model(
            input_ids=b.comp_ids[:, :-1],
            attention_mask=attn,
            position_ids=lengths[:, None] + steps[None, :],
            cache=cache,
            use_cache=True,
        ).logits  # (B, Tc - 1, V)
        logits = torch.cat([first, rest], dim=1).float()  # (B, Tc, V)
    else:
        logits = first.float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, b.comp_ids[..., None]).squeeze(-1)
    return logp, logits


def _padded(
    rows: list[list[int]], pad: int, *, left: bool = False, min_width: int = 0
) -> tuple[Tensor, Tensor]:
    """Token rows as one padded (R, W) long tensor and its 0/1 mask, filled in one assignment.

    The mask's True cells, read row by row, are exactly the rows' tokens in order, so the flat
    concatenation drops into place without a per-row copy.
    """
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)  # (R,)
    width = max(min_width, int(lengths.max()) if len(rows) else 0)
    cols = torch.arange(width)[None, :]  # (1, W)
    mask = cols >= width - lengths[:, None] if left else cols < lengths[:, None]  # (R, W)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    ids[mask] = torch.tensor([t for r in rows for t in r], dtype=torch.long)
    return ids, mask.long()


def _gather_completion(logits: Tensor, b: _Batch) -> tuple[Tensor, Tensor]:
    """Pick the logits that predict each completion token; (B, Tc) log-probs, (B, Tc, V)."""
    tc = b.comp_mask.shape[1]
    pos = b.starts[:, None] + torch.arange(tc, device=logits.device)[None, :]  # (B, Tc)
    pos = pos.clamp(max=logits.shape[1] - 2)
    picked = logits.gather(1, pos[..., None].expand(-1, -1, logits.shape[-1])).float()
    targets = b.ids.gather(1, (pos + 1).clamp(max=b.ids.shape[1] - 1))  # (B, Tc)
    logp = torch.log_softmax(picked, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
    return logp, picked


def _empty_update_metrics(value: float = 0.0) -> dict[str, float]:
    keys = ("loss", "kl", "clip_low_frac", "clip_high_frac", "entropy", "grad_norm")
    return {**{k: value for k in keys}, "trained_samples": 0.0}


def _with_lora(model: torch.nn.Module, cfg: GRPOConfig) -> torch.nn.Module:
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise TrainerError(
            'reference="lora_base" needs peft: pip install "grpo-sieve[lora]"'
        ) from None
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, target_modules="all-linear")
    return get_peft_model(model, lora)
