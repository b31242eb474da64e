"""Options that several `sieve` commands share, and the blocks of them that commands repeat.

`--home` and the sampler's `--model`, `--backend` and `--base-url` are `Annotated` types used as
they are. The vLLM engine options (curate, eval, train, loop) and the sampling overrides (curate,
eval) are blocks: a command declares one parameter, `engine: EngineArgs = ENGINE`, and
`@option_blocks` turns it into the block's options, in that place of `--help`, handing the
command one `EngineArgs` built from what was given. The block checks its values only when the
command asks (`engine.options()`), so each command still reports its errors in its own order.

Test: `pytest tests/cli/test_cli.py` (where the blocks sit), `tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

import typer

from pipeline.errors import SieveError

if TYPE_CHECKING:
    from pipeline.sampling import EngineOptions


def checked_home(home: Path | None) -> Path | None:
    """`--home` as given, once the home it names (else $SIEVE_HOME's, else ./data) can be a
    folder: not a file, a device, a dangling or looping symlink, or a path below a file (each
    would fail later, in whatever first creates a file there, as a traceback)."""
    from pipeline.home import resolve_home

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
    return home


HomeOpt = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Sieve home (ledger, models); default $SIEVE_HOME or ./data.",
        callback=checked_home,
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

MaxTokensOpt = Annotated[
    int | None,
    typer.Option(help="Answer budget in tokens (default: 16 for the tiny model, 512 for chat)."),
]
TemperatureOpt = Annotated[float | None, typer.Option(help="Sampling temperature (default 1).")]
TopPOpt = Annotated[float | None, typer.Option(help="Nucleus top-p (default 1).")]
StopOpt = Annotated[
    list[str] | None, typer.Option("--stop", help="A stop string (repeat for several).")
]

GpuMemOpt = Annotated[
    float | None,
    typer.Option(help="vllm: share of GPU memory the engine may take (default vLLM's own)."),
]
KvCacheOpt = Annotated[
    float | None,
    typer.Option(help="vllm: KV-cache GiB (CPU default 4, or $VLLM_CPU_KVCACHE_SPACE)."),
]
MaxModelLenOpt = Annotated[int | None, typer.Option(help="vllm: context length of the engine.")]
DtypeOpt = Annotated[str, typer.Option(help="vllm: weights dtype (auto, bfloat16, float32).")]
TPOpt = Annotated[int, typer.Option(help="vllm: tensor-parallel size (GPUs per engine).")]
DPOpt = Annotated[int, typer.Option(help="vllm: data-parallel size (engine replicas).")]


@dataclass(frozen=True)
class SamplingArgs:
    """`--max-new-tokens --temperature --top-p --stop` as given (None: not given)."""

    max_new_tokens: MaxTokensOpt = None
    temperature: TemperatureOpt = None
    top_p: TopPOpt = None
    stop: StopOpt = None

    def overrides(self) -> dict[str, object]:
        """The given ones, as `SamplingConfig` fields."""
        given = {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": tuple(self.stop) if self.stop else None,
        }
        return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True)
class EngineArgs:
    """The vLLM engine options as given; `options()` checks them."""

    gpu_memory_utilization: GpuMemOpt = None
    kv_cache_gib: KvCacheOpt = None
    max_model_len: MaxModelLenOpt = None
    dtype: DtypeOpt = "auto"
    tensor_parallel_size: TPOpt = 1
    data_parallel_size: DPOpt = 1

    def options(self) -> EngineOptions:
        """The `EngineOptions` these give; a bad value is one SieveError line."""
        from pipeline.sampling import EngineOptions

        try:
            return EngineOptions(**dataclasses.asdict(self))
        except (TypeError, ValueError) as exc:
            raise SieveError(f"invalid engine option: {exc}") from None


SAMPLING = SamplingArgs()
ENGINE = EngineArgs()
BLOCKS = (SamplingArgs, EngineArgs)


def option_blocks(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with each parameter typed as a block (`BLOCKS`) replaced, in its place, by the
    block's fields as options; the command is called with the block built from them."""
    signature = inspect.signature(command, eval_str=True)
    blocks: dict[str, type] = {}
    params: list[inspect.Parameter] = []
    for param in signature.parameters.values():
        if param.annotation not in BLOCKS:
            params.append(param)
            continue
        blocks[param.name] = block = param.annotation
        hints = get_type_hints(block, include_extras=True)
        params += [
            param.replace(name=f.name, annotation=hints[f.name], default=f.default)
            for f in dataclasses.fields(block)
        ]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        for name, block in blocks.items():
            values[name] = block(**{f.name: values.pop(f.name) for f in dataclasses.fields(block)})
        command(**values)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return run
