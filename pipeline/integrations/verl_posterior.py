"""Sieve's posterior selection as a verl curriculum sampler: `SieveCurriculumSampler` draws each
step's prompts from the ledger's difficulty model before they are sampled, and `update(batch)`
writes the step's groups to the ledger as a training run of the model's lineage, so the next
draw, a later run from the trained weights and the next Sieve night all read them.

verl's hooks. verl 0.5-0.7 build a sampler named by `data.sampler.class_path` / `class_name` as
`Sampler(data_source=dataset, data_config=config.data)` (`create_rl_sampler`, which requires
`data.dataloader_num_workers=0`, so no batch is drawn before the previous one is recorded) and
call `update(batch)` after every step on an `AbstractCurriculumSampler`, which this class is
when verl has one. verl 0.8 dropped that interface: its `RayPPOTrainer(train_sampler=...)` takes
the sampler and calls only `train_dataset.on_batch_end(batch)` after each step but the last;
`attach(dataset)` routes that to `update`.

    data.sampler.class_path=pkg://pipeline.integrations.verl_posterior
    data.sampler.class_name=SieveCurriculumSampler
    +data.sampler.home=/path/to/sieve-home
    +data.sampler.model_path=${actor_rollout_ref.model.path}
    data.dataloader_num_workers=0

Settings under `data.sampler`: `home` (the Sieve home; or `ledger`, the ledger file), the start
weights as `base_revision` or a `model_path` folder (its `folder_revision`), `train_id` (default
derived from the base revision and seed), `correct_at` (1.0: a reward ≥ it is correct when the
batch carries no `acc`). `data.seed` seeds the picks; `data.gen_batch_size` (else
`train_batch_size`) is a step's prompts. The dataset is a `sieve export --format verl` file read
by verl's `RLHFDataset` (its `extra_info.problem_id` names each row's problem).

What `update` reads of verl's `DataProto` after a step (each prompt's rows repeated
`rollout.n` times): `non_tensor_batch["extra_info"][i]["problem_id"]`;
`batch["token_level_scores"].sum(-1)`, each response's reward before any KL penalty;
`non_tensor_batch["acc"]` where the reward function reported it (verl's reward managers copy a
`compute_score` dict there), else reward ≥ `correct_at`; `batch["responses"]` under
`batch["response_mask"]` (else the response part of `attention_mask`): the completion, decoded
by the dataset's tokenizer, its length, and "length" as its finish reason when it fills the
response budget. Steps are counted by the sampler from 0 (the ledger's step; a resumed loader
restores it through `state_dict`).

Test: `.venv/bin/pytest tests/integrations/test_verl_posterior.py -q` (verl from
`.venv/consumers`, loaded in a child process: tests/integrations/verl_posterior_child.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sized
from pathlib import Path
from typing import Any

import polars as pl
from torch.utils.data import Sampler

from grpo_core.types import TrainerError
from pipeline.integrations.ledger_run import SAMPLE_SCHEMA, LedgerRun
from pipeline.integrations.verl import _extra_info, _setting
from pipeline.store import Ledger


def _base() -> type:
    """verl's curriculum interface where verl has it (0.5-0.7), else torch's Sampler."""
    try:
        from verl.experimental.dataset.sampler import AbstractCurriculumSampler
    except ImportError:
        return Sampler
    return AbstractCurriculumSampler


class SieveCurriculumSampler(_base()):  # type: ignore[misc]
    """Each step's prompts from the ledger's posterior; each step's groups into the ledger."""

    def __init__(self, data_source: Sized, data_config: Any) -> None:
        settings = _setting(data_config, "sampler") or {}
        info = _extra_info(data_source)
        seed = int(_setting(data_config, "seed") or 0)
        size = _setting(data_config, "gen_batch_size") or _setting(data_config, "train_batch_size")
        if not size:
            raise TrainerError("data.train_batch_size (prompts a step) is not set")
        self.batch_size, self.rows = int(size), len(data_source)
        self.tokenizer = getattr(data_source, "tokenizer", None)
        correct_at = _setting(settings, "correct_at")
        self.correct_at = 1.0 if correct_at is None else float(correct_at)
        revision = _base_revision(settings)
        train_id = _setting(settings, "train_id") or _train_id(revision, seed)
        self.run = LedgerRun(_ledger(settings), info.field("problem_id").to_pylist(), revision,
                             str(train_id), seed=seed)  # fmt: skip
        curriculum = info.field("curriculum_id")[0].as_py() if len(info) else None
        self.run.start("verl", {"batch_size": self.batch_size}, _setting(settings, "model_path"),
                       curriculum)  # fmt: skip
        self.drawn = self.recorded = 0  # steps drawn by the loader, steps whose groups are in

    def __iter__(self) -> Iterator[int]:
        for _ in range(len(self) // self.batch_size):
            step = self.drawn
            if step != self.recorded:
                raise TrainerError(
                    f"step {step} is drawn before step {self.recorded}'s groups were recorded: "
                    "set data.dataloader_num_workers=0, and on verl ≥ 0.8 call attach(dataset) "
                    "(update(batch) is called through train_dataset.on_batch_end)"
                )
            rows = self.run.pick(step, self.batch_size, upto=step - 1)
            self.drawn += 1
            yield from rows

    def __len__(self) -> int:
        return self.rows

    def update(self, batch: Any) -> None:
        """Record the step's groups (verl calls this after each step)."""
        self.run.record(self.recorded, batch_samples(batch, self.tokenizer, self.correct_at))
        self.recorded += 1

    def attach(self, dataset: Any) -> None:
        """verl ≥ 0.8: its trainer calls `train_dataset.on_batch_end(batch=...)` after a step."""
        dataset.on_batch_end = lambda batch: self.update(batch)

    def state_dict(self) -> dict[str, int]:
        return {"step": self.drawn}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.drawn = self.recorded = int(state["step"])


def batch_samples(batch: Any, tokenizer: Any, correct_at: float) -> pl.DataFrame:
    """One row per response (`SAMPLE_SCHEMA`) of a verl DataProto after its step."""
    tensors, extra = batch.batch, batch.non_tensor_batch
    scores = [float(s) for s in tensors["token_level_scores"].sum(-1).tolist()]  # (N,)
    rewards = [s if math.isfinite(s) else None for s in scores]
    acc = extra.get("acc")
    correct = [
        None if r is None else bool(a) if acc is not None else r >= correct_at
        for r, a in zip(rewards, acc if acc is not None else rewards, strict=True)
    ]
    responses = tensors["responses"]  # (N, R)
    width = responses.shape[-1]
    keys = tensors.keys()
    mask = tensors["response_mask"] if "response_mask" in keys else tensors["attention_mask"][
        :, -width:]  # fmt: skip
    tokens = [[t for t, m in zip(row, ms, strict=True) if m]
              for row, ms in zip(responses.tolist(), mask.tolist(), strict=True)]  # fmt: skip
    texts = tokenizer.batch_decode(tokens, skip_special_tokens=True) if tokenizer else None
    return pl.DataFrame(
        {"problem_id": [str(i["problem_id"]) for i in extra["extra_info"]],
         "completion": texts, "n_tokens": [len(t) for t in tokens],
         "finish_reason": ["length" if len(t) >= width else "stop" for t in tokens],
         "reward": rewards, "correct": correct},
        schema=SAMPLE_SCHEMA,
    )  # fmt: skip


def _ledger(settings: Any) -> Ledger:
    """The run's ledger, connected only while it reads or writes (other tools may read it
    between steps)."""
    path, home = _setting(settings, "ledger"), _setting(settings, "home")
    if path is None and home is None:
        raise TrainerError("set data.sampler.home (the Sieve home) or data.sampler.ledger")
    return Ledger.open(home, path=Path(path) if path else None, transient=True)


def _base_revision(settings: Any) -> str:
    revision, folder = _setting(settings, "base_revision"), _setting(settings, "model_path")
    if revision:
        return str(revision)
    if folder:
        from pipeline.policy.model import folder_revision

        return folder_revision(folder)
    raise TrainerError("set data.sampler.base_revision or data.sampler.model_path")


def _train_id(revision: str, seed: int) -> str:
    return "verl-" + hashlib.sha256(f"{revision}|{seed}".encode()).hexdigest()[:12]
