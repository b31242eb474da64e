"""Options that several `sieve` commands share, and the blocks of them that commands repeat.

`--home` and the sampler's `--model`, `--backend` and `--base-url` are `Annotated` types used as
they are; `HomeOpt` is `--home` handing every command the home it decided (the folder given, else
$SIEVE_HOME's, else ./data, checked as `decided_home` says), so a command resolves its home once
and passes it down. The sampling overrides (curate, eval), the vLLM engine settings (curate,
eval, train, loop) and a train recipe's selection fields (train, loop; plan takes the model and
score) are blocks generated from the settings objects they set (`SamplingConfig`,
`EngineOptions`, `SelectionSettings`), so a field and its option are written once, its help the
field's own description. Sampling and selection are one option per field (`--temperature 0.6`);
the engine, whose settings only the vllm backend reads, is one repeatable option of KEY=VALUE
pairs named after its fields (`--engine max_model_len=1024,kv_cache_gib=2`, as
lm-evaluation-harness's `--model_args`), which keeps six rarely used options out of four
commands' `--help`. A command declares one parameter, `engine:
OptionBlock = ENGINE`, and `@option_blocks` turns it into the block's options, in that place of
`--help`, handing the command the block with what was given. The block checks its values when the
command asks (`engine.options()`); the commands ask before they call their job, so a bad
`--engine` is refused before anything is written. An integer option outside a block that has a
range takes `within(low, high)` as its callback (`seed_option` for `--seed`), so it is refused
while the command line is parsed, in the words every range check uses (`check_range`).

Test: `pytest tests/cli/test_cli.py` (where the blocks sit), `tests/cli/test_train_cli.py`,
`tests/cli/test_bad_inputs.py` (the ranges).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from grpo_core.validate import MAX_SEED
from pipeline.core.errors import SieveError, check_range


def home_path(text: str) -> Path:
    """`--home TEXT` as a path; an empty one is refused (it meant the current folder)."""
    if not text:
        raise SieveError(
            f"--home {text!r} is empty; name the home folder (`--home .` for this one)"
        )
    return Path(text)


def decided_home(home: Path | None) -> Path:
    """The home `--home` names, else $SIEVE_HOME's, else ./data, decided once for the command
    (`HomeOpt`), once it can be a folder: not a file, a device, a dangling or looping symlink, or
    a path below a file (each would fail later, in whatever first creates a file there, as a
    traceback)."""
    from pipeline.core.home import resolve_home

    folder = resolve_home(home)
    given = "--home" if home is not None else "$SIEVE_HOME" if os.environ.get("SIEVE_HOME") else ""
    where = f"{given} {folder}".strip()
    if folder.is_symlink() and not folder.exists():
        raise SieveError(f"{where} is a symlink to nothing (a loop or a missing target)")
    if folder.exists() and not folder.is_dir():
        raise SieveError(f"{where} is not a folder")
    for parent in folder.absolute().parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise SieveError(f"{where} is below {parent}, which is not a folder")
            break
    return folder


# the home decided by the option (never None from the command line): a command resolves it once
HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Sieve home (ledger, models); default $SIEVE_HOME or ./data.",
        parser=home_path,
        metavar="<path>",
        callback=decided_home,
    ),
]
BackendOpt = Annotated[str, typer.Option("--backend", help="Sampler: hf, vllm or openai.")]
ModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--model",
        help="Model folder (default: the newest checkpoint of the newest curriculum's model, "
        "else that model, else the tiny policy under <home>/models).",
    ),
]
BaseUrlOpt = Annotated[
    list[str] | None,
    typer.Option("--base-url", help="OpenAI-compatible server (repeat for several; openai)."),
]
ConfigOpt = Annotated[Path | None, typer.Option(help="CurateConfig TOML file.")]


def within(low: int, high: int) -> Callable[[typer.CallbackParam, int | None], int | None]:
    """A Typer callback that refuses an integer option outside [low, high] while the command
    line is parsed, before any work, as one line in `check_range`'s words."""

    def check(param: typer.CallbackParam, value: int | None) -> int | None:
        check_range(param.opts[0] if param.opts else f"--{param.name}", value, low, high)
        return value

    return check


def seed_option(help: str) -> Any:
    """`--seed` of a command that takes one outside a settings block: refused outside
    [0, 2^63 - 1], the range of every Sieve seed (`grpo_core.validate.Seed`: a DuckDB BIGINT,
    numpy's SeedSequence takes no negative one), as the blocks' `--seed` is."""
    return typer.Option("--seed", help=help, callback=within(0, MAX_SEED))


ROWS_CAP = 2**63 - 1  # `--limit`: past any table, and the most a DuckDB LIMIT takes


class OptionBlock:
    """Options generated from a settings object's fields, unset (None) unless given. Without
    `flag`: one `--field-name` option per field, its help the field's own description (a
    pydantic `description`, or a dataclass field's `metadata["help"]`). With `flag`: one
    repeatable option taking KEY=VALUE pairs (comma-separated), the keys being the fields. A
    command declares `name: OptionBlock = BLOCK` and `@option_blocks` puts the options in that
    place; the command gets a copy of the block holding what was given."""

    def __init__(
        self, name: str, settings: type, fields: tuple[str, ...], prefix: str = "", flag: str = ""
    ) -> None:
        self.name, self.settings, self.fields, self.prefix = name, settings, fields, prefix
        self.flag = flag
        self.given: dict[str, Any] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The command parameters the block's options arrive as."""
        return (f"{self.name}_pairs",) if self.flag else self.fields

    def overrides(self) -> dict[str, Any]:
        """The given values, as the settings object's fields (a repeated option as a tuple); a
        KEY=VALUE pair with an unknown key or a value of the wrong type is one SieveError."""
        given = self._pairs() if self.flag else self.given
        return {
            k: tuple(v) if isinstance(v, list) else v for k, v in given.items() if v is not None
        }

    def _pairs(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for text in self.given.get(f"{self.name}_pairs") or ():
            for pair in filter(None, (p.strip() for p in text.split(","))):
                key, sep, raw = pair.partition("=")
                key = key.strip().replace("-", "_")
                if not sep or key not in self.fields:
                    raise SieveError(
                        f"invalid {self.flag} {pair!r}: expected KEY=VALUE with KEY one of "
                        + ", ".join(self.fields)
                    )
                if key in values:  # the last one used to win without a word
                    raise SieveError(f"invalid {self.flag}: {key} is given twice")
                typ, _ = field_type_and_help(self.settings, key)
                try:
                    values[key] = typ(raw.strip()) if typ in (int, float) else raw.strip()
                except ValueError:
                    raise SieveError(
                        f"invalid {self.flag} {pair!r}: {key} takes "
                        + ("an integer" if typ is int else "a number")
                    ) from None
        return values

    def options(self) -> Any:
        """The settings object the given values make (its defaults elsewhere); a bad value is
        one SieveError line."""
        try:
            return self.settings(**self.overrides())
        except (TypeError, ValueError) as exc:
            raise SieveError(f"invalid {self.name} option: {exc}") from None

    def with_given(self, values: dict[str, Any]) -> OptionBlock:
        block = OptionBlock(self.name, self.settings, self.fields, self.prefix, self.flag)
        block.given = values
        return block

    def parameters(self, kind: Any) -> list[inspect.Parameter]:
        if self.flag:
            option = typer.Option(self.flag, metavar="KEY=VALUE[,...]", help=self.help())
            pairs: Any = Annotated[list[str] | None, option]
            return [inspect.Parameter(self.names[0], kind, default=None, annotation=pairs)]
        params = []
        for name in self.fields:
            typ, text = field_type_and_help(self.settings, name)
            option = typer.Option(f"--{name.replace('_', '-')}", help=self.prefix + text)
            annotation = Annotated[typ | None, option]  # type: ignore[valid-type]
            params.append(inspect.Parameter(name, kind, default=None, annotation=annotation))
        return params

    def help(self) -> str:
        """The one option's help: the keys with their defaults (the fields' descriptions are in
        the docs and in the error an unknown key gets)."""
        keys = []
        for key in self.fields:
            default = next(f.default for f in dataclasses.fields(self.settings) if f.name == key)
            keys.append(key if default is None else f"{key} ({default})")
        return f"{self.prefix}KEY=VALUE pairs, comma-separated or repeated; keys: " + ", ".join(
            keys
        )


def field_type_and_help(settings: type, name: str) -> tuple[Any, str]:
    """(the option's value type, the field's help and default) of a pydantic model's or a
    dataclass's field: Optional and constraints dropped, a tuple as a repeatable list."""
    if hasattr(settings, "model_fields"):
        info = settings.model_fields[name]
        typ, text, default = info.annotation, info.description or "", info.default
    else:
        (info,) = [f for f in dataclasses.fields(settings) if f.name == name]
        typ, text, default = get_type_hints(settings)[name], info.metadata["help"], info.default
    typ = _plain(typ)
    if typing.get_origin(typ) in (typing.Union, types.UnionType):
        typ = _plain(next(a for a in typing.get_args(typ) if a is not type(None)))
    if typing.get_origin(typ) is tuple:
        typ = list[_plain(typing.get_args(typ)[0])]  # type: ignore[misc]
    if default is not None and default != ():
        text += f" Default: {default}."
    return typ, text


def _plain(typ: Any) -> Any:
    """`typ` without its Annotated constraints."""
    return typing.get_args(typ)[0] if typing.get_origin(typ) is Annotated else typ


def sampling_block() -> OptionBlock:
    from pipeline.sampling.budget import SamplingConfig

    return OptionBlock(
        "sampling", SamplingConfig, ("max_new_tokens", "temperature", "top_p", "stop")
    )


def engine_block() -> OptionBlock:
    from pipeline.sampling import EngineOptions

    fields = (
        "gpu_memory_utilization",
        "kv_cache_gib",
        "max_model_len",
        "dtype",
        "tensor_parallel_size",
        "data_parallel_size",
    )
    return OptionBlock("engine", EngineOptions, fields, prefix="vllm engine: ", flag="--engine")


def eval_block(*fields: str, prefix: str = "") -> OptionBlock:
    from pipeline.sampling.budget import EvalConfig

    return OptionBlock("evaluation", EvalConfig, fields, prefix=prefix)


def bootstrap_block() -> OptionBlock:
    from pipeline.jobs.train.bootstrap_settings import BootstrapConfig

    return OptionBlock("bootstrap", BootstrapConfig, ("seed", "max_steps", "max_minutes"))


def selection_block(*fields: str) -> OptionBlock:
    from pipeline.jobs.train.selection_settings import SelectionSettings

    return OptionBlock("selection", SelectionSettings, fields)


SAMPLING = sampling_block()  # --max-new-tokens --temperature --top-p --stop (SamplingConfig)
EVAL = eval_block("per_level", "samples", "seed")  # --per-level --samples --seed (EvalConfig)
ENGINE = engine_block()  # --engine KEY=VALUE,... (EngineOptions)
BOOTSTRAP = bootstrap_block()  # --seed --max-steps --max-minutes (BootstrapConfig)
# --selection --selection-model --selection-score --selection-prior --selection-target-share (a
# train recipe's fields, SelectionSettings): handed on as `overrides()`, which the recipe's
# settings check
SELECTION = selection_block(
    "selection", "selection_model", "selection_score", "selection_prior", "selection_target_share"
)
# sieve plan's: which difficulty model and score its posterior policy replays with
SELECTION_MODEL = selection_block("selection_model", "selection_score")


def option_blocks(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with each parameter whose default is an `OptionBlock` replaced, in its place,
    by the block's options; the command is called with the block holding what was given."""
    signature = inspect.signature(command, eval_str=True)
    blocks: dict[str, OptionBlock] = {}
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if not isinstance(param.default, OptionBlock):
            params.append(param)
            continue
        blocks[param.name] = param.default
        params += param.default.parameters(param.kind)

    @functools.wraps(command)
    def run(**values: Any) -> None:
        for name, block in blocks.items():
            values[name] = block.with_given({f: values.pop(f) for f in block.names})
        command(**values)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return run
