"""The trainer's vocabulary: what goes in (items, samples, scores), the seams it calls, counters.

Nothing here computes anything; `grpo_core.trainer` re-exports these names, so
`from grpo_core.trainer import Item, Sample, Scores, Trainer` keeps working.

- `GroupSampler` samples completions from the *current* weights of the model being trained;
  `Sample.logprobs`, when the engine reports them, are compared with the trainer's own and
  corrected for with truncated importance weights (`grpo_core.loss.truncated_is_weights`);
- `WeightSync` is the optional method of a sampler that holds its own copy of the weights (a
  vLLM engine): the trainer pushes the model into it after every optimiser update;
- `RewardFn` scores completions (reward and correctness; `None` = verifier error);
- `TrainerHooks` is what the trainer tells its owner: per-step metrics, a checkpoint written,
  files to add to a checkpoint before it is published, warnings. `Hooks` implements it with
  optional callables (the pipeline's recorder, `pipeline.jobs.train.recorder.Recorder`, is another);
- `Rollouts` is what a `Collector` may ask of the trainer (its batch source, sampling and
  scoring, the step seeds, the config): collectors never see the trainer's other state.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from grpo_core.config import GRPOConfig


@dataclass(frozen=True)
class Item:
    """One curriculum prompt: rendered prompt text, what the reward function checks, its G."""

    prompt: str
    answer: str
    group_size: int
    key: str = ""  # e.g. problem_id; only for logging
    weight: float = 1.0
    verifier: str = ""  # passed through to the reward function
    # the problem's stored params (JSON), for verifiers that rebuild the problem from its source
    # (reasoning-gym's "rg"); None when the verifier needs only the answer
    params: str | None = None


@dataclass(frozen=True)
class Sample:
    """One completion: its token ids (with the end-of-sequence token if it stopped there)."""

    token_ids: tuple[int, ...]
    text: str
    truncated: bool  # cut by max_new_tokens
    # the sampling engine's log-prob of each token in token_ids (same length); None: not known
    logprobs: tuple[float, ...] | None = None
    # the engine's summed log-prob when it reports only the sum (hf); kept in the ledger's
    # train_rollouts, never read by the trainer
    logprob_sum: float | None = None
    # a stored curation sample replayed by `grpo_core.history.replay_curation`, or any sample
    # drawn by another policy than the step's start; not counted as a new rollout. Its behaviour
    # log-probs μ are its `logprobs` when given (taken at the weights that sampled it:
    # `grpo_core.history.with_behaviour_logprobs`), else the reference log-probs the trainer
    # computes for KL (it was sampled from the reference weights). It trains on the decoupled
    # clipped objective (`grpo_core.loss`): ratio to the step's start, clipped, times the
    # truncated behaviour weight min(π_prox/μ, tis_cap), on its KL term too
    replayed: bool = False


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


@runtime_checkable
class WeightSync(Protocol):
    """A sampler with its own copy of the weights (e.g. a vLLM engine in this process).

    The trainer calls `sync_weights` once when `train()` starts (a resumed run pushes the
    restored weights before it samples) and after each step's final optimiser update, never
    after a skipped or empty step. Under LoRA `model` is the peft-wrapped model; merging the
    adapters (or loading them) is the sampler's job.
    """

    def sync_weights(self, model: torch.nn.Module) -> None: ...


@dataclass(frozen=True)
class Scores:
    rewards: list[float | None]  # None: the verifier could not judge this sample
    correct: list[bool | None]
    # per sample, its checkable fragments of `Sample.text` as (char_start, char_end, correct)
    # in text order; None for a sample (or the whole field) when not computed. Read only when
    # `GRPOConfig.advantage == "outcome+steps"` (`grpo_core.fragments`).
    steps: list[tuple[tuple[int, int, bool], ...] | None] | None = None


class RewardFn(Protocol):
    def __call__(self, items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
        """Score samples[i] against items[i] (items are repeated per sample)."""
        ...


BatchSource = Callable[[int], Sequence[Item]]
MetricsSink = Callable[[int, dict[str, float]], None]


class TrainerHooks(Protocol):
    """What the trainer reports while it trains, in this order within a step: `on_metrics`
    after the step, then (on the checkpoint schedule) `write_extra` while the checkpoint is
    still a temporary folder and `on_checkpoint` once it is published. `warn` gets one-line
    warnings (a skipped step, a refused checkpoint, an inexact resume)."""

    def on_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def write_extra(self, folder: Path, model: torch.nn.Module) -> None: ...

    def on_checkpoint(self, step: int, path: Path) -> None: ...

    def warn(self, message: str) -> None: ...


@dataclass
class Hooks:
    """`TrainerHooks` from optional callables; unset ones do nothing (`warn` prints)."""

    metrics: MetricsSink | None = None
    extra: Callable[[Path, torch.nn.Module], None] | None = None
    checkpoint: Callable[[int, Path], None] | None = None
    warning: Callable[[str], None] = print

    def on_metrics(self, step: int, metrics: dict[str, float]) -> None:
        if self.metrics is not None:
            self.metrics(step, metrics)

    def write_extra(self, folder: Path, model: torch.nn.Module) -> None:
        if self.extra is not None:
            self.extra(folder, model)

    def on_checkpoint(self, step: int, path: Path) -> None:
        if self.checkpoint is not None:
            self.checkpoint(step, path)

    def warn(self, message: str) -> None:
        self.warning(message)


class TrainerError(ValueError):
    """Bad trainer input; the message is one line saying what to fix."""


@dataclass
class Counters:
    skipped_steps: int = 0  # steps whose update was discarded (non-finite reward/loss/grad)
    empty_steps: int = 0  # steps where every group was uninformative (nothing to learn from)
    rollouts: int = 0  # completions sampled so far


@dataclass
class Collected:
    """What a step trains on: items, their groups (aligned), flat scores, rollouts spent."""

    items: list[Item]
    groups: list[list[Sample]]
    scores: Scores
    rollouts: int  # every completion sampled for this step, including ones not trained on
    time_sample: float = 0.0
    time_score: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)  # the collector's own, e.g. skips


class Rollouts(Protocol):
    """What a collector may ask of the trainer (`grpo_core.trainer.Trainer` implements it)."""

    @property
    def cfg(self) -> GRPOConfig: ...

    @property
    def batches(self) -> BatchSource:
        """The curriculum items of optimiser step `step`: `batches(step)`."""
        ...

    def sample_and_score(
        self, items: Sequence[Item], seed: int, sizes: Sequence[int] | None = None
    ) -> tuple[list[list[Sample]], Scores, float, float]:
        """Groups for `items` (G from each item unless `sizes`), their scores, and the seconds
        sampling and scoring took."""
        ...

    def score_groups(
        self, items: Sequence[Item], groups: list[list[Sample]]
    ) -> tuple[list[list[Sample]], Scores]:
        """Score groups[i] against items[i] (stored groups a collector replays)."""
        ...

    def step_seed(self, step: int, round_: int = 0) -> int:
        """The sampling seed of (step, round): a pure function, so resume is exact."""
        ...


Collector = Callable[[Rollouts, int], Collected]


@dataclass
class StepOutput:
    metrics: dict[str, float] = field(default_factory=dict)
    skipped: bool = False
