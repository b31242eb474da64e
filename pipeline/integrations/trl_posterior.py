"""Sieve's posterior selection inside TRL's GRPOTrainer: each generation round's prompts picked
from the ledger's difficulty model before they are sampled, and every group TRL samples written
back to the ledger as a training run of the model's lineage, so the next pick, a later run from
these weights and the next Sieve night all read it.

    from pipeline.integrations.trl_posterior import SieveGRPOTrainer
    with Ledger.open(home) as ledger:
        trainer = SieveGRPOTrainer(ledger, model=path, args=args, train_dataset=data)
        trainer.train()
        trainer.save_model()  # the weights its last `checkpoints` row names

The pieces, after TRL's maintainers' advice for curricula (trl#2801: override
`_get_train_sampler`, update from a callback):

- `PosteriorSampler` keeps the geometry of TRL's `RepeatSampler` (each round's `batch_size`
  prompts, each index `num_generations` times in a row, the round repeated `repeat_count` times
  for `steps_per_generation` x `num_iterations`) and picks each round's prompts with
  `LedgerRun.pick`. accelerate's loader fetches one batch ahead, so round r is drawn before round
  r − 1 is sampled when a round is one batch: a round is picked from the groups of rounds
  ≤ r − 2 (≤ r − 1 when a round spans several batches), all judged by then, so a pick is a
  function of (seed, step, those groups), not of the loader's timing; a pick that finds them
  missing (a loader further ahead: `dataloader_num_workers` > 0) is refused, not made on less;
- `LedgerRecorder` is the reward function (it wraps Sieve's `SieveReward`, whose verdicts say
  which samples are correct; any other reward function counts a reward ≥ `correct_at` as
  correct) and a `TrainerCallback`: each group is evidence as soon as it is judged, its samples
  are written to `train_rollouts` at the step's end, every saved checkpoint and the final
  weights get a `checkpoints` row (their `model_revision`), and the run its `train_runs` row;
- `SieveGRPOTrainer` is `GRPOTrainer` with the two wired in: `reward` (default: Sieve's
  verifiers, told the tokenizer's stop ids) goes first in `reward_funcs`, any given there are
  added after it; the run's `base_revision` is the `model_revision` of the loaded weights (give
  it when they were loaded in another dtype than Sieve curated with), its `train_id` is derived
  from (base revision, output_dir, seed) unless given, so a resumed run keeps its rows.

The dataset is map-style with a `problem_id` column (`sieve export --format trl` writes one).
One process only: a data-parallel run needs every process to hold the same evidence (the
ledger opened on one of them, groups gathered from all), which is not built yet.

Test: `.venv/bin/pytest tests/integrations/test_trl_posterior.py -q`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import polars as pl
from datasets import Dataset
from torch.utils.data import Sampler
from transformers import TrainerCallback
from trl import GRPOTrainer

from grpo_core.lora import merged
from grpo_core.types import TrainerError
from pipeline.integrations.ledger_run import SAMPLE_SCHEMA, LedgerRun
from pipeline.integrations.trl import SieveReward, completion_text, reward_function, stop_ids
from pipeline.policy.model import model_revision
from pipeline.selection.posterior import PosteriorConfig, SelectionConfig
from pipeline.store import Ledger


class PosteriorSampler(Sampler[int]):
    """TRL's `RepeatSampler` order over the prompts `run` picks each round (module docstring)."""

    def __init__(
        self,
        run: LedgerRun,
        rows: int,
        num_generations: int,
        batch_size: int,
        repeat_count: int = 1,
        steps_per_round: int = 1,
        strict: bool = False,
    ) -> None:
        if batch_size < 1 or rows < batch_size:
            raise TrainerError(f"a round of {batch_size} prompts from a dataset of {rows} rows")
        self.run, self.num_generations, self.batch_size = run, num_generations, batch_size
        self.repeat_count, self.steps_per_round = repeat_count, steps_per_round
        self.rounds = rows // batch_size  # an epoch, as RepeatSampler counts one
        self.lag = 1 if repeat_count > 1 else 2  # rounds between a group and the picks it informs
        self.strict = strict  # the groups a pick reads must have been recorded
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def round_rows(self, r: int) -> list[int]:
        """Round r's dataset rows: picked at its first step from the groups of round r − lag."""
        upto = (r - self.lag) * self.steps_per_round
        if self.strict and upto >= 0 and upto not in self.run.steps:
            raise TrainerError(
                f"round {r} would be picked before the groups of step {upto} were judged: the "
                "loader runs ahead of training (set dataloader_num_workers=0)"
            )
        return self.run.pick(r * self.steps_per_round, self.batch_size, upto)

    def __iter__(self) -> Iterator[int]:
        for r in range(self.epoch * self.rounds, (self.epoch + 1) * self.rounds):
            rows = self.round_rows(r)  # drawn when the loader reaches the round, not before
            for _ in range(self.repeat_count):
                for row in rows:
                    yield from [row] * self.num_generations

    def __len__(self) -> int:
        return self.rounds * self.batch_size * self.num_generations * self.repeat_count


class LedgerRecorder(TrainerCallback):
    """A TRL reward function that records what it judges, and the callback that writes it."""

    def __init__(
        self,
        reward: Callable[..., list[float | None]] | None = None,
        *,
        key: str = "problem_id",
        correct_at: float = 1.0,
    ) -> None:
        self.reward = reward if reward is not None else reward_function()
        self.key, self.correct_at = key, correct_at
        self.__name__ = getattr(self.reward, "__name__", "sieve_reward")  # TRL's log name
        self.run: LedgerRun | None = None
        self.stops: frozenset[int] | None = None  # the tokenizer's stop ids: finish reasons
        self.pending: list[tuple[int, pl.DataFrame]] = []  # judged, not yet written

    def attach(self, run: LedgerRun, stop_token_ids: Sequence[int] | None = None) -> None:
        self.run = run
        self.stops = None if stop_token_ids is None else frozenset(stop_token_ids)

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        if isinstance(self.reward, SieveReward):
            verdicts = self.reward.judge(prompts, completions, **kwargs)
            rewards, correct = [v.reward for v in verdicts], [v.correct for v in verdicts]
        else:
            rewards = list(self.reward(prompts, completions, **kwargs))
            correct = [None if r is None else r >= self.correct_at for r in rewards]
        if self.run is not None:
            step = int(kwargs["trainer_state"].global_step)
            samples = self.samples(completions, rewards, correct, kwargs)
            self.run.observe(step, samples)  # evidence now: the next round's pick reads it
            self.pending.append((step, samples))
        return rewards

    def samples(
        self,
        completions: Sequence[Any],
        rewards: list[float | None],
        correct: list[bool | None],
        kwargs: dict[str, Any],
    ) -> pl.DataFrame:
        """One row per completion (`SAMPLE_SCHEMA`) from what TRL passed the reward function."""
        ids = kwargs.get("completion_ids") or [[] for _ in completions]
        finish = [
            None if self.stops is None else "stop" if row and row[-1] in self.stops else "length"
            for row in ids
        ]
        columns = {
            "problem_id": [str(k) for k in kwargs[self.key]],
            "completion": [completion_text(c) for c in completions],
            "n_tokens": [len(row) for row in ids],
            "finish_reason": finish, "reward": rewards, "correct": correct,
        }  # fmt: skip
        return pl.DataFrame(columns, schema=SAMPLE_SCHEMA)

    # -------------------------------------------------------------- TrainerCallback

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.run is not None:
            config = {"num_generations": args.num_generations, "learning_rate": args.learning_rate,
                      "output_dir": args.output_dir}  # fmt: skip
            self.run.start("trl", config, base_model=_name(kwargs.get("model")))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.flush()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        self.register(state.global_step, kwargs.get("model"), folder)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.flush()
        if self.run is not None:
            if state.global_step not in self.run.policy:
                self.register(state.global_step, kwargs.get("model"), args.output_dir)
            self.run.finish("finished")

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        if self.run is not None:
            for step, samples in pending:
                self.run.write(step, samples)

    def register(self, step: int, model: Any, path: str) -> None:
        if self.run is not None and model is not None:
            self.run.checkpoint(step, model_revision(merged(model)), path)


class SieveGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose prompts the ledger's posterior picks and whose groups it records."""

    def __init__(
        self,
        ledger: Ledger,
        *args: Any,
        reward: Callable[..., list[float | None]] | None = None,
        train_id: str | None = None,
        base_revision: str | None = None,
        posterior: PosteriorConfig | None = None,
        select: SelectionConfig | None = None,
        key: str = "problem_id",
        **kwargs: Any,
    ) -> None:
        recorder = LedgerRecorder(reward, key=key)
        kwargs["reward_funcs"] = [recorder, *_listed(kwargs.get("reward_funcs"))]
        kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), recorder]
        super().__init__(*args, **kwargs)
        if self.accelerator.num_processes > 1:
            raise TrainerError("SieveGRPOTrainer runs on one process (module docstring)")
        data, cfg, model = self.train_dataset, self.args, self.model
        if not isinstance(data, Dataset) or key not in data.column_names:
            raise TrainerError(f"SieveGRPOTrainer needs a datasets.Dataset with a {key!r} column")
        assert model is not None
        tok = getattr(self.processing_class, "tokenizer", self.processing_class)
        if reward is None:  # Sieve's verifiers, told which completions were cut at the budget
            recorder.reward = reward_function(stop_token_ids=stop_ids(tok))
        revision = base_revision or model_revision(merged(model))
        self.sieve = LedgerRun(
            ledger, data[key], revision,
            train_id or _train_id(revision, str(cfg.output_dir), cfg.seed),
            seed=cfg.seed, posterior=posterior, select=select,
        )  # fmt: skip
        recorder.attach(self.sieve, stop_ids(tok))
        self.recorder, self.rows = recorder, len(data)
        self.steps_per_round = _steps_per_round(cfg, self.num_iterations)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """GRPOTrainer.train; a run that raises is marked failed, its judged groups kept."""
        try:
            return super().train(*args, **kwargs)
        except BaseException:
            self.recorder.flush()
            self.sieve.finish("failed")
            raise

    def _get_train_sampler(self, *args: Any, **kwargs: Any) -> Sampler[int]:
        cfg: Any = self.args  # a GRPOConfig
        g = int(self.num_generations or 1)
        return PosteriorSampler(
            self.sieve, self.rows, g, cfg.generation_batch_size // g,
            repeat_count=self.num_iterations * cfg.steps_per_generation,
            steps_per_round=self.steps_per_round, strict=True,
        )  # fmt: skip


def _steps_per_round(args: Any, num_iterations: int) -> int:
    """Optimiser steps from one generation round to the next (TRL generates every
    steps_per_generation x num_iterations micro-batches)."""
    micro = args.steps_per_generation * num_iterations
    if micro % args.gradient_accumulation_steps:
        raise TrainerError(
            f"steps_per_generation x num_iterations ({micro}) must be a multiple of "
            f"gradient_accumulation_steps ({args.gradient_accumulation_steps}): each generation "
            "round is recorded at the optimiser step it starts"
        )
    return micro // args.gradient_accumulation_steps


def _train_id(revision: str, output_dir: str, seed: int) -> str:
    text = f"{revision}|{os.path.abspath(output_dir)}|{seed}"
    return "trl-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _listed(funcs: Any) -> list[Any]:
    if funcs is None:
        return []
    return list(funcs) if isinstance(funcs, list | tuple) else [funcs]


def _name(model: Any) -> str | None:
    """The model's name or folder as TRL loaded it, a label only (the revision identifies it)."""
    name = getattr(getattr(model, "config", None), "_name_or_path", None)
    return str(name) if name else None
