"""A verl sampler that keeps Sieve's curriculum: stages in order, weights in a stage, per-prompt G.

verl's PPO/GRPO trainer takes any `torch.utils.data.Sampler` as `train_sampler`
(`RayPPOTrainer(..., train_sampler=...)`; with none it builds a sequential or random one from
`data.shuffle`), and its older custom-sampler hook constructs the class as
`Sampler(data_source, data_config)`. `CurriculumSampler` takes the same two arguments: the
dataset (verl's `RLHFDataset` over a `sieve export --format verl` file, whose `dataframe` holds
`extra_info`; or any Hugging Face dataset or Arrow table with that column) and the data config
(a dict or OmegaConf node; only `seed` and `rollout_n` are read, both optional).

Order: stage 1 before stage 2. Within a stage, prompts are drawn without replacement with
probability proportional to `weight` (Efraimidis & Spirakis' keys u^(1/w), seeded, so the same
seed gives the same order; equal weights keep the exported order when `seed` is None). verl uses
one group size (`actor_rollout_ref.rollout.n`); with `rollout_n` set, each prompt's index is
yielded max(1, round(G / rollout_n)) times in a row, so it gets about its own G rollouts.

    from pipeline.integrations.verl import CurriculumSampler
    sampler = CurriculumSampler(train_dataset, {"seed": 0, "rollout_n": 8})
    trainer = RayPPOTrainer(..., train_dataset=train_dataset, train_sampler=sampler)

Test: `.venv/bin/pytest tests/integrations/test_verl.py -q`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Any

import numpy as np
import pyarrow as pa
from torch.utils.data import Sampler


def _extra_info(data_source: Any) -> pa.StructArray:
    """The `extra_info` column of a verl dataset, HF dataset or Arrow table, as one array."""
    frame = getattr(data_source, "dataframe", data_source)  # verl's RLHFDataset keeps it here
    if isinstance(frame, pa.Table):
        column = frame.column("extra_info")
    else:  # a datasets.Dataset: Arrow format honours its filter/select index mapping
        column = frame.select_columns(["extra_info"]).with_format("arrow")[:]["extra_info"]
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not isinstance(array, pa.StructArray):
        raise TypeError("extra_info must be a struct column (a `sieve export --format verl` file)")
    return array


def _setting(config: Any, name: str) -> Any:
    if config is None:
        return None
    if isinstance(config, Mapping):
        return config.get(name)
    getter = getattr(config, "get", None)
    return getter(name) if callable(getter) else getattr(config, name, None)


class CurriculumSampler(Sampler[int]):
    """Indices of a verl dataset in curriculum order (see the module docstring)."""

    def __init__(self, data_source: Sized, data_config: Any = None) -> None:
        info = _extra_info(data_source)
        self.stage = info.field("stage").to_numpy(zero_copy_only=False).astype(np.int64)
        self.weight = info.field("weight").to_numpy(zero_copy_only=False).astype(np.float64)
        self.group_size = info.field("group_size").to_numpy(zero_copy_only=False).astype(np.int64)
        if len(self.stage) != len(data_source):
            raise ValueError(f"{len(self.stage)} extra_info rows for {len(data_source)} prompts")
        if (self.weight < 0).any() or not np.isfinite(self.weight).all():
            raise ValueError("extra_info.weight must be finite and >= 0")
        seed = _setting(data_config, "seed")
        self.seed = None if seed is None else int(seed)
        rollout_n = _setting(data_config, "rollout_n")
        self.rollout_n = None if rollout_n is None else int(rollout_n)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """A new order per epoch (same seed, different stream), as torch's samplers allow."""
        self.epoch = epoch

    def order(self) -> np.ndarray:
        """Each prompt once: stages ascending, weighted draw without replacement within one."""
        n = len(self.stage)
        if self.seed is None:
            keys = -np.arange(n, dtype=np.float64)  # exported order (already by position)
        else:
            rng = np.random.default_rng([self.seed, self.epoch])
            u = rng.random(n)  # (n,)
            with np.errstate(divide="ignore"):
                keys = np.where(self.weight > 0, np.log(u) / self.weight, -np.inf)
        return np.lexsort((-keys, self.stage))  # stage first, then the largest key

    def indices(self) -> np.ndarray:
        """`order()` with each prompt repeated for its G when `rollout_n` is set."""
        order = self.order()
        if not self.rollout_n:
            return order
        copies = np.maximum(1, np.rint(self.group_size[order] / self.rollout_n)).astype(np.int64)
        return np.repeat(order, copies)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        if not self.rollout_n:
            return len(self.stage)
        return int(np.maximum(1, np.rint(self.group_size / self.rollout_n)).sum())
