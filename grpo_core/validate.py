"""The one validation layer of every Sieve config: strict types, finite numbers, ranges, caps.

Every config class goes through it, once, when it is built (never on a hot path):

- pydantic models (the edges: TOML files, CLI options, flow parameters) take `STRICT` as their
  `model_config` (`STRICT | {"frozen": True}` for frozen ones);
- frozen dataclasses (`GRPOConfig`, `SamplingParams`, ...) call `check_fields(self)` first thing
  in `__post_init__`; it validates each field against its annotation under `STRICT`.

`STRICT` means: no `"128"` for an int, no `"yes"` for a bool, no float for an int, no bool for a
number (an int is a float), no NaN or ±inf anywhere, unknown keys refused. Ranges sit on the
annotations (`Positive`, `Fraction`, `Count`, `Seed`, `Tokens`, ... below), so a field says its
range where it is declared. `problem(exc, model)` turns a pydantic error into one line that names
the field, the allowed values and the bad one: `lr must be a finite number > 0, got inf`.

Test: `.venv/bin/pytest tests/grpo_core/test_validate.py tests/cli/test_bad_configs.py -q`.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

MAX_COUNT = 2**31 - 1  # steps, sizes, group sizes: far past any run, and an int32 column
MAX_SEED = 2**63 - 1  # seeds are unsigned 63-bit: a DuckDB BIGINT and numpy's SeedSequence
MAX_TOKENS = 1 << 20  # completion budget cap: a million tokens is past every model's context
MAX_TEMPERATURE = 10.0  # at T = 10 sampling is already close to uniform over the vocabulary

Positive = Annotated[float, at.Gt(0)]  # finite > 0
NonNegative = Annotated[float, at.Ge(0)]  # finite ≥ 0
Fraction = Annotated[float, at.Ge(0), at.Le(1)]  # a share or probability in [0, 1]
Count = Annotated[int, at.Ge(0), at.Le(MAX_COUNT)]  # 0 usually means "off" / "all"
AtLeastOne = Annotated[int, at.Ge(1), at.Le(MAX_COUNT)]
Seed = Annotated[int, at.Ge(0), at.Le(MAX_SEED)]
Tokens = Annotated[int, at.Ge(1), at.Le(MAX_TOKENS)]
Temperature = Annotated[float, at.Ge(0), at.Le(MAX_TEMPERATURE)]  # 0: greedy
NonEmpty = Annotated[str, at.MinLen(1)]
# a list in a file or a flow's JSON parameters becomes this tuple (the only lax step: list →
# tuple; each element is still checked strictly)
StopStrings = Annotated[tuple[NonEmpty, ...], Field(strict=False)]


class FieldError(ValueError):
    """A config field's value is outside its type or range; the message is one line."""


def check_fields(obj: Any) -> None:
    """Validate every field of the dataclass instance `obj` against its annotation (STRICT);
    a bad one raises `FieldError` with `problem`'s line."""
    model = _field_model(type(obj))  # type: ignore[arg-type]
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    try:
        model.model_validate(values)
    except ValidationError as exc:
        raise FieldError(problem(exc, model)) from None


@functools.cache
def _field_model(cls: type) -> type[BaseModel]:
    """A pydantic model with the dataclass `cls`'s fields and annotations (built once)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(cls)}
    return create_model(f"{cls.__name__}Fields", __config__=STRICT, **fields)


def problem(exc: ValidationError, model: type | None = None) -> str:
    """The first error of `exc` as one line: `where must be WHAT, got VALUE` for a type or range
    error (WHAT from the field's annotation in `model`), else `where: message`."""
    first = exc.errors()[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])[1:]
    message = first["msg"].removeprefix("Value error, ")
    message = message[:1].lower() + message[1:]
    if first["type"] in ("value_error", "assertion_error") or first["type"].startswith("missing"):
        if not where or message.startswith((f"{where}.", f"{where}:")):
            return message  # the message names the field itself (a nested config's check)
        return f"{where}: {message}"
    if first["type"] == "extra_forbidden":
        return f"{where}: extra inputs are not permitted"
    want = _wanted(model, first["loc"]) if model is not None else None
    if want is None:
        return f"{where or '(top level)'}: {message}, got {_shown(first.get('input'))}"
    return f"{where} must be {want}, got {_shown(first.get('input'))}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _wanted(model: type, loc: tuple[int | str, ...]) -> str | None:
    """What the field at `loc` (a path through models and dataclasses) accepts, in words."""
    hint: Any = model
    for part in loc:
        if isinstance(part, int) or part in ("", "[key]"):
            args = [a for a in get_args(_bare(hint)) if a is not Ellipsis]
            if not args:
                return None
            hint = args[-1]
            continue
        fields = _fields_of(_bare(hint))
        if fields is None or part not in fields:
            return None
        hint = fields[part]
    return describe(hint)


def _fields_of(cls: Any) -> dict[str, Any] | None:
    """name -> annotation (constraints included) of a pydantic model or a dataclass."""
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return {
            name: Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            for name, info in cls.model_fields.items()
        }
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return dict(typing.get_type_hints(cls, include_extras=True))
    return None


def _bare(hint: Any) -> Any:
    """`hint` without Annotated and without None in an optional."""
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) in (Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
    return hint


def describe(hint: Any) -> str | None:
    """An annotation in words: `a finite number > 0`, `an integer in [1, 64]`, `true or false`,
    `one of ['k1', 'k2', 'k3']`; None for one without a short description."""
    constraints: list[Any] = []
    optional = False
    while True:
        if get_origin(hint) is Annotated:
            constraints += list(hint.__metadata__)
            hint = get_args(hint)[0]
        elif get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint):
            optional = True
            rest = [a for a in get_args(hint) if a is not type(None)]
            if len(rest) != 1:
                return None
            hint = rest[0]
        else:
            break
    base = _kind(hint)
    if base is None:
        return None
    text = base + _range(constraints)
    return f"{text} (or unset)" if optional else text


def _kind(hint: Any) -> str | None:
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a finite number"
    if hint is str:
        return "a string"
    if get_origin(hint) is Literal:
        return f"one of {list(get_args(hint))}"
    return None


def _range(constraints: list[Any]) -> str:
    """` > 0`, ` ≥ 1`, ` in [0, 1]`, ` in (0, 1)`, ` of at least 1 character` from constraints."""
    low: Any = None
    high: Any = None
    low_open = high_open = False
    extra = ""
    for c in constraints:
        for item in c.metadata if hasattr(c, "metadata") and isinstance(c.metadata, list) else [c]:
            if isinstance(item, at.Gt):
                low, low_open = item.gt, True
            elif isinstance(item, at.Ge):
                low, low_open = item.ge, False
            elif isinstance(item, at.Lt):
                high, high_open = item.lt, True
            elif isinstance(item, at.Le):
                high, high_open = item.le, False
            elif isinstance(item, at.MinLen) and item.min_length >= 1:
                extra = " of at least one character"
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{_num(low)}, {_num(high)}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '≥'} {_num(low)}"
    if high is not None:
        return f" {'<' if high_open else '≤'} {_num(high)}"
    return extra


def _num(x: Any) -> str:
    """A bound as written in a range: 0 and 10, not 0.0 and 10.0 (typing may hand back either:
    `Ge(0) == Ge(0.0)`, so Annotated's cache mixes them)."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return str(x)
