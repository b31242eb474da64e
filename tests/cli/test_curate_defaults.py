"""`sieve curate` on a chat model: sampling from the model's recipe unless set, the upper bounds
it announces and the rough time from the first screen chunk (issue 31 point 3).

Test: `pytest tests/cli/test_curate_defaults.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.commands.curation import sampling_plan
from pipeline.core.hooks import SamplingPlan
from pipeline.jobs.train.settings import (
    RECIPES,
    chat_sampling_defaults,
    curation_sampling,
    load_settings,
)
from pipeline.selection import CurateConfig

SERVED = Path("a-served-chat-model")  # not a local folder: counts as a chat model


def with_recipe_sampling(cfg: CurateConfig, folder: Path, chosen: set[str]) -> CurateConfig:
    """What `sieve curate` (`flows.commands.curate`) curates at: the recipe's sampling for the
    fields the user did not set (`chosen`, which `test_the_fields_the_user_set_are_the_flags_
    and_the_files` checks `flows.commands.curation.curate_config` finds)."""
    return curation_sampling(cfg, folder, sorted(chosen))[0]


def test_the_fields_the_user_set_are_the_flags_and_the_files(tmp_path: Path) -> None:
    """The [sampling] fields `sieve curate` keeps from the user: those given as flags and those
    the config file sets; the defaults of an unset field follow the recipe."""
    from flows.commands.curation import CurateRequest, curate_config

    config = tmp_path / "c.toml"
    config.write_text("[sampling]\nmax_new_tokens = 64\n", encoding="utf-8")
    request = CurateRequest(config=config, sampling={"temperature": 0.9}, overrides={"seed": 3})
    cfg, chosen = curate_config(request)
    assert chosen == ["max_new_tokens", "temperature"]
    assert (cfg.seed, cfg.sampling.temperature, cfg.sampling.max_new_tokens) == (3, 0.9, 64)
    assert curate_config(CurateRequest())[1] == []  # no file, no flag: the recipe decides all
    assert with_recipe_sampling(cfg, SERVED, set(chosen)).sampling.temperature == 0.9


def test_a_chat_model_curates_at_its_recipe_temperature_and_budget() -> None:
    real = load_settings(RECIPES / "real_train.toml").grpo
    cfg = with_recipe_sampling(CurateConfig(), SERVED, set())
    assert cfg.sampling.temperature == real["temperature"] == 0.6
    assert cfg.sampling.max_new_tokens == real["max_new_tokens"] == 256


def test_values_the_user_set_win_over_the_recipe() -> None:
    given = CurateConfig.model_validate({"sampling": {"temperature": 1.0}})
    cfg = with_recipe_sampling(given, SERVED, {"temperature"})
    assert cfg.sampling.temperature == 1.0
    assert cfg.sampling.max_new_tokens == 256


def test_the_tiny_policy_keeps_the_sampling_defaults(tiny_model_dir: Path) -> None:
    assert chat_sampling_defaults(tiny_model_dir) == ({}, None)
    cfg = CurateConfig()
    assert with_recipe_sampling(cfg, tiny_model_dir, set()) == cfg
    assert sampling_plan(cfg, str(tiny_model_dir)).max_new_tokens == 16


def test_the_plan_is_an_upper_bound_over_screen_and_refine() -> None:
    cfg = with_recipe_sampling(CurateConfig(n_candidates=16), SERVED, set())
    plan = sampling_plan(cfg, str(SERVED))
    assert (plan.screen_rollouts, plan.refine_rollouts) == (16 * 8, 16 * 32)
    assert plan.tokens == 16 * 40 * 256


def test_the_estimate_scales_the_first_chunk() -> None:
    plan = SamplingPlan(candidates=100, screen_g=8, refine_g=32, max_new_tokens=256)
    # 4 chunks of 200 rollouts; the first took 60 s: 3 more chunks (180 s), refine 3200 x 0.3 s
    assert plan.estimate(60.0, 4).split(": ")[1].split(",")[0] == "about 3 min more of screen"
    assert "at most 16 min of refine" in plan.estimate(60.0, 4)
    with pytest.raises(ValueError, match="chunks >= 1"):
        plan.estimate(1.0, 0)


def _night_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **params: object
) -> CurateConfig:
    """The CurateConfig the nightly flow hands its curation (the flow body, no Prefect run)."""
    import flows.nightly as nightly

    seen: dict[str, CurateConfig] = {}

    def fake_curate(p: object, runtime: object = None) -> dict[str, object]:
        seen["cfg"] = p.config  # type: ignore[attr-defined]
        return {"curriculum_id": "c", "kept": {}}

    monkeypatch.setattr(nightly, "curate_flow", fake_curate)
    monkeypatch.setattr(nightly, "night_start", lambda home, model, fresh=False: (SERVED, "given"))
    monkeypatch.setattr(nightly, "night_engine", lambda *a, **k: None)
    nightly.nightly_flow.fn(
        nightly.NightlyParams(home=str(tmp_path), night="2026-01-02", skip_train=True, **params)
    )
    return seen["cfg"]


def test_the_nightly_flow_curates_at_the_sampling_it_trains_at(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 46 point 4: sieve loop / schedule / the nightly flow curated a chat model at
    [sampling]'s T 1.0 / 512 tokens and trained it at the recipe's 0.6 / 256."""
    from pipeline.jobs.train.settings import TrainSettings

    cfg = _night_config(monkeypatch, tmp_path)
    assert (cfg.sampling.temperature, cfg.sampling.max_new_tokens) == (0.6, 256)
    given = CurateConfig.model_validate({"sampling": {"temperature": 1.0}})
    cfg = _night_config(monkeypatch, tmp_path, config=given, keep_sampling=["temperature"])
    assert (cfg.sampling.temperature, cfg.sampling.max_new_tokens) == (1.0, 256)
    settings = TrainSettings.model_validate({"grpo": {"temperature": 0.8, "max_new_tokens": 96}})
    cfg = _night_config(monkeypatch, tmp_path, train=settings)  # the night's own training
    assert (cfg.sampling.temperature, cfg.sampling.max_new_tokens) == (0.8, 96)
