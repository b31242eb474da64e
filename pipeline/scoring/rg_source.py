"""A reasoning-gym problem's stored source, rebuilt and scored in the calling process.

Every `rg:<dataset>` problem keeps in its `params` JSON the reasoning-gym version it was made
with (`rg_version`), the dataset, its full keyword config and the item's index. This module turns
such a source back into reasoning-gym objects: the dataset (`dataset_for`, cached), the entry
(`item`), and `score_here`, the dataset's own `score_answer` applied to one answer. Both sides
read it: the family that makes problems (pipeline/problems/rg.py) and the math-verify worker's
child, which runs `score_here` for the "rg" verifier (pipeline/scoring/rg.py). It imports nothing
of Sieve but `pipeline.core.errors`, so the child needs neither the verifier registry nor the
worker.

reasoning-gym is imported on first use only (it takes seconds to import).
Test: `.venv/bin/pytest tests/problems/test_rg.py -q`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import cache, lru_cache
from importlib import metadata
from typing import Any

from pipeline.core.errors import SieveError


@cache
def rg_version() -> str:
    """The installed reasoning-gym version; SieveError saying how to install it otherwise."""
    try:
        return metadata.version("reasoning-gym")
    except metadata.PackageNotFoundError:
        raise SieveError(
            "rg: families need reasoning-gym: pip install 'grpo-sieve[gym]' "
            "(or .venv/bin/pip install reasoning-gym==0.1.25)"
        ) from None


def as_config(config_cls: Any, config: dict[str, Any]) -> dict[str, Any]:
    """JSON lists back to tuples where the config's default is a tuple (operators, styles)."""
    tuples = {
        f.name
        for f in dataclasses.fields(config_cls)
        if f.default is not dataclasses.MISSING and isinstance(f.default, tuple)
    }
    return {k: tuple(v) if k in tuples and isinstance(v, list) else v for k, v in config.items()}


@lru_cache(maxsize=256)
def _dataset(dataset: str, config_json: str) -> Any:
    """The reasoning-gym dataset object of one config (cached: some load word lists)."""
    rg_version()
    from reasoning_gym.factory import DATASETS, create_dataset

    if dataset not in DATASETS:
        raise SieveError(f"reasoning-gym {rg_version()} has no dataset {dataset!r}")
    config = as_config(DATASETS[dataset][1], json.loads(config_json))
    return create_dataset(dataset, **config)


def dataset_for(dataset: str, config: dict[str, Any]) -> Any:
    """The (cached) dataset object built from a stored config."""
    return _dataset(dataset, json.dumps(config, sort_keys=True))


@lru_cache(maxsize=8192)
def _item(dataset: str, config_json: str, index: int) -> dict[str, Any]:
    return dict(_dataset(dataset, config_json)[index])


def item(params: dict[str, Any]) -> dict[str, Any]:
    """The reasoning-gym entry (question, answer, metadata) a problem's params describe."""
    config_json = json.dumps(params["config"], sort_keys=True)
    return dict(_item(str(params["dataset"]), config_json, int(params["index"])))


def score_here(params_json: str, candidate: str, gold: str) -> tuple[float, str]:
    """(score, detail) from score_answer in this process (the worker child calls it). The entry
    is rebuilt from the stored source and must give the stored gold answer (else ValueError).
    score_answer raising on the model's answer (some parse it with `int()`) scores 0, and the
    detail names the exception: the answer is unreadable, not the verifier broken."""
    params = json.loads(params_json)
    entry = item(params)
    if str(entry["answer"]) != gold:
        raise ValueError(
            f"rg source {params['dataset']}[{params['index']}] no longer gives its gold answer"
        )
    dataset = dataset_for(str(params["dataset"]), params["config"])
    try:
        value = float(dataset.score_answer(candidate, entry) or 0.0)
    except Exception as exc:
        return 0.0, f"rg: score_answer raised {type(exc).__name__}"
    return (min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0), "rg"
