"""The one validation layer (`grpo_core.validate`), swept over every config class.

For each config class, each field of a kind (float, int, bool) is given the values the layer
must refuse: NaN and ±inf for a number, a bool for a number, a float or a numeric string for an
int, "yes" or 1 for a bool. Each must be refused with one line naming the field. The error text
itself (`problem`, `describe`) is checked on a few fields whose range is documented.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
import pytest
from pydantic import BaseModel, ValidationError

from flows.curate import CurateParams
from flows.evaluate import EvalParams
from flows.nightly import NightlyParams
from flows.runtime import PolicyParams
from flows.scale import ScaleConfig
from flows.train import TrainParams
from grpo_core.config import GRPOConfig
from grpo_core.distributed import DistributedConfig
from grpo_core.validate import MAX_SEED, MAX_TOKENS, STRICT, describe
from pipeline.core.errors import SieveError
from pipeline.jobs.analysis.evaluate import EvalConfig
from pipeline.jobs.train.bootstrap import BootstrapConfig
from pipeline.jobs.train.settings import TrainSettings
from pipeline.problems.mix import MixConfig
from pipeline.sampling import EngineOptions, SamplingParams
from pipeline.sampling.budget import SamplingConfig
from pipeline.selection import CurateConfig

DATACLASSES = [
    GRPOConfig,
    DistributedConfig,
    SamplingParams,
    EngineOptions,
    EvalConfig,
    BootstrapConfig,
]
MODELS = [
    CurateConfig,
    SamplingConfig,
    MixConfig,
    TrainSettings,
    PolicyParams,
    CurateParams,
    EvalParams,
    TrainParams,
    NightlyParams,
    ScaleConfig,
]
REQUIRED = {MixConfig: {"families": {"arith": "all"}}, PolicyParams: {"model": "m"}}
REQUIRED |= {CurateParams: {"model": "m"}, EvalParams: {"model": "m"}}
# dataclass fields without a default (a sampling call states its temperature: issue 49)
DATA_REQUIRED: dict[type, dict[str, Any]] = {SamplingParams: {"temperature": 1.0}}

BAD = {
    float: [math.nan, math.inf, -math.inf, True, "1.0"],
    int: [1.5, 2.0, True, "3", math.nan],
    bool: ["yes", "true", 1, 0.0],
}


def _kind(hint: Any) -> type | None:
    """float, int or bool for a field of that scalar type (optional or constrained), else None."""
    if get_origin(hint) is Annotated:
        return _kind(get_args(hint)[0])
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        return _kind(rest[0]) if len(rest) == 1 else None
    return hint if hint in (float, int, bool) else None


def _scalar_fields(cls: type) -> list[tuple[str, type]]:
    if issubclass(cls, BaseModel):
        hints = {n: f.annotation for n, f in cls.model_fields.items()}
    else:
        hints = typing.get_type_hints(cls, include_extras=True)
    return [(n, k) for n, h in hints.items() if (k := _kind(h)) is not None]


def _cases(classes: list[type]) -> list[tuple[type, str, Any]]:
    return [
        (cls, name, bad)
        for cls in classes
        for name, kind in _scalar_fields(cls)
        for bad in BAD[kind]
    ]


DATA_CASES = _cases(DATACLASSES)
MODEL_CASES = _cases(MODELS)


def test_every_config_class_is_covered_and_valid_by_default() -> None:
    for cls in DATACLASSES:
        cls(**DATA_REQUIRED.get(cls, {}))
    for model in MODELS:
        assert model.model_config.get("strict") is True, model
        assert model.model_config.get("allow_inf_nan") is False, model
        assert model.model_config.get("extra") == "forbid", model
        model.model_validate(REQUIRED.get(model, {}))
    assert len(DATA_CASES) > 200 and len(MODEL_CASES) > 150
    assert STRICT["strict"] is True


@pytest.mark.parametrize(
    ("cls", "name", "bad"), DATA_CASES, ids=[f"{c.__name__}.{n}={b!r}" for c, n, b in DATA_CASES]
)
def test_dataclass_configs_refuse_nonsense(cls: type, name: str, bad: Any) -> None:
    with pytest.raises((ValueError, SieveError)) as err:
        cls(**{**DATA_REQUIRED.get(cls, {}), name: bad})
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{name} must be "), message
    assert f"got {bad!r}" in message, message


@pytest.mark.parametrize(
    ("cls", "name", "bad"), MODEL_CASES, ids=[f"{c.__name__}.{n}={b!r}" for c, n, b in MODEL_CASES]
)
def test_edge_models_refuse_nonsense(cls: type[BaseModel], name: str, bad: Any) -> None:
    with pytest.raises(ValidationError) as err:
        cls.model_validate({**REQUIRED.get(cls, {}), name: bad})
    assert err.value.errors()[0]["loc"][0] == name


@pytest.mark.parametrize(
    ("kwargs", "line"),
    [
        ({"lr": math.inf}, "lr must be a finite number > 0, got inf"),
        ({"beta": math.nan}, "beta must be a finite number ≥ 0, got nan"),
        ({"total_steps": 0}, "total_steps must be an integer in [1, 2147483647], got 0"),
        (
            {"max_new_tokens": MAX_TOKENS + 1},
            f"max_new_tokens must be an integer in [1, {MAX_TOKENS}]",
        ),
        ({"seed": MAX_SEED + 1}, f"seed must be an integer in [0, {MAX_SEED}], got {MAX_SEED + 1}"),
        ({"seed": -1}, "seed must be an integer in [0, "),
        ({"temperature": 0.0}, "temperature must be a finite number in (0, 10], got 0.0"),
        ({"estimator": "ppo"}, "estimator must be one of ['grpo', 'rloo', 'dr_grpo', 'batch']"),
        ({"deterministic": "yes"}, "deterministic must be true or false, got 'yes'"),
    ],
)
def test_grpo_config_errors_name_field_range_and_value(kwargs: dict[str, Any], line: str) -> None:
    with pytest.raises(ValueError) as err:
        GRPOConfig(**kwargs)
    assert str(err.value).startswith(line), str(err.value)


def test_values_inside_the_ranges_are_kept() -> None:
    cfg = GRPOConfig(seed=MAX_SEED, max_new_tokens=MAX_TOKENS, temperature=10.0, lr=1)
    assert (cfg.seed, cfg.max_new_tokens, cfg.lr) == (MAX_SEED, MAX_TOKENS, 1)
    assert SamplingParams(0.0, stop=("\n",)).greedy
    assert SamplingConfig.model_validate({"stop": ["\n", "###"]}).stop == ("\n", "###")


def test_stop_strings_must_not_be_empty() -> None:
    with pytest.raises(SieveError, match=r"stop\[1\] must be a string of at least one character"):
        SamplingParams(1.0, stop=("a", ""))
    with pytest.raises(ValidationError):
        SamplingConfig.model_validate({"stop": [""]})


def test_engine_options_in_flow_parameters_come_back_from_json() -> None:
    params = NightlyParams(engine=EngineOptions(kv_cache_gib=2.0, seed=3))
    again = NightlyParams.model_validate(params.model_dump(mode="json"))
    assert again.engine == params.engine
    with pytest.raises(ValidationError, match="kv_cache_gib must be a finite number > 0"):
        NightlyParams.model_validate({"engine": {"kv_cache_gib": math.inf}})


@pytest.mark.parametrize(
    ("hint", "words"),
    [
        (Annotated[float, at.Gt(0)], "a finite number > 0"),
        (Annotated[int, at.Ge(1), at.Le(64)], "an integer in [1, 64]"),
        (Annotated[float, at.Gt(0), at.Lt(1)], "a finite number in (0, 1)"),
        (Annotated[str, at.MinLen(1)], "a string of at least one character"),
        (bool, "true or false"),
        (Literal["a", "b"], "one of ['a', 'b']"),
        (int | None, "an integer (or unset)"),
        (list[int], None),
    ],
)
def test_describe(hint: Any, words: str | None) -> None:
    assert describe(hint) == words


def test_every_grpo_field_has_a_checked_kind() -> None:
    # each GRPOConfig field is a number, a bool or a Literal mode: nothing the layer cannot check
    hints = typing.get_type_hints(GRPOConfig, include_extras=True)
    for f in dataclasses.fields(GRPOConfig):
        assert describe(hints[f.name]) is not None, f.name
