"""The nightly flow starts one vLLM engine per night: curation samples from it, the training run
reuses it (weights pushed in, held-out eval on it), and it is closed when the night ends, also
when training fails. Wiring only: the flows and the engine are stand-ins (the real engine is
`make demo-real` / tests/test_train_vllm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flows.nightly as nightly
import pipeline.sampling.group_sampler as training
from pipeline.sampling import EngineOptions


class FakeEngine:
    def __init__(self, model_dir: str, options: EngineOptions):
        self.model_dir, self.options, self.closed = model_dir, options, False
        self.tokenizer = None

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def night(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> dict[str, Any]:
    seen: dict[str, Any] = {"engines": []}

    def engine(model_dir: str, options: EngineOptions) -> FakeEngine:
        seen["engines"].append(FakeEngine(model_dir, options))
        return seen["engines"][-1]

    def curate_flow(params: Any, rt: Any = None) -> dict[str, Any]:
        seen["curate_rt"] = rt
        return {"curriculum_id": "cur-1", "kept": {"stage1": 3}}

    def train_flow(params: Any, rt: Any = None) -> dict[str, Any]:
        seen["train_rt"] = rt
        if seen.get("fail"):
            raise RuntimeError("training died")
        return {"steps": 1}

    monkeypatch.setattr(training, "training_engine_sampler", engine)
    monkeypatch.setattr(nightly, "curate_flow", curate_flow)
    monkeypatch.setattr(nightly, "train_flow", train_flow)
    monkeypatch.setattr(nightly, "write_report", lambda home, night: None)
    seen["model"] = str(tiny_model_dir)
    return seen


def params(model: str, backend: str, home: Path) -> nightly.NightlyParams:
    return nightly.NightlyParams(
        model=model, backend=backend, home=str(home), night="2026-12-03",
        engine=EngineOptions(kv_cache_gib=1.0),
    )  # fmt: skip


def test_vllm_night_curates_and_trains_on_one_engine_then_closes_it(
    night: dict[str, Any], tmp_path: Path
) -> None:
    nightly.nightly_flow.fn(params(night["model"], "vllm", tmp_path))
    (engine,) = night["engines"]
    assert night["curate_rt"].policy.sampler is engine
    assert night["train_rt"].engine is engine
    assert engine.closed
    # the trainer's fp32 master weights, not vLLM's CPU default (bf16); the user's options kept
    assert engine.options.dtype == "float32" and engine.options.kv_cache_gib == 1.0
    assert Path(engine.model_dir) == Path(night["model"])


def test_the_engine_is_closed_when_training_fails(night: dict[str, Any], tmp_path: Path) -> None:
    night["fail"] = True
    with pytest.raises(RuntimeError, match="training died"):
        nightly.nightly_flow.fn(params(night["model"], "vllm", tmp_path))
    assert night["engines"][0].closed


def test_other_backends_start_no_night_engine(night: dict[str, Any], tmp_path: Path) -> None:
    nightly.nightly_flow.fn(params(night["model"], "hf", tmp_path))
    assert night["engines"] == []
    assert night["curate_rt"].policy is None  # curate_flow loads its own
    assert night["train_rt"].engine is None
