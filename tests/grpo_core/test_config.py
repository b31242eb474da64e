"""GRPOConfig defaults, frozenness, cross-field checks and the β schedule it builds."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from grpo_core.config import GRPOConfig
from grpo_core.kl import AdaptiveBeta, FixedBeta, WarmupBeta, make_beta_schedule


def test_defaults_are_valid_and_frozen() -> None:
    cfg = GRPOConfig()
    assert (cfg.clip_eps_low, cfg.beta, cfg.beta_start) == (0.2, 0.02, 0.05)
    assert (cfg.micro_batch_tokens, cfg.autocast, cfg.save_dtype, cfg.tis_cap) == (
        0,
        "off",
        "auto",
        2.0,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.lr = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "hint"),
    [
        ({"clip_eps_low": 0.2, "clip_eps_high": 0.1}, "set clip_eps_high ≥ clip_eps_low"),
        ({"num_iterations": 0}, "num_iterations must be an integer in [1, 2147483647], got 0"),
        ({"reference": "none"}, "set beta=0"),
        ({"reference": "none", "beta": 0.0, "beta_schedule": "fixed"}, None),
        ({"beta_start": 0.01, "beta": 0.02}, "set beta_start ≥ beta"),
        ({"beta_warmup_steps": 0}, "beta_warmup_steps must be ≥ 1"),
        ({"beta_schedule": "adaptive", "kl_target": 0.0}, "kl_target must be a finite number > 0"),
        ({"beta_schedule": "adaptive", "beta": 0.0}, "needs beta > 0"),
        ({"estimator": "ppo"}, "estimator must be one of ['grpo', 'rloo', 'dr_grpo', 'batch']"),
        ({"aggregation": "sum"}, "aggregation must be one of"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an integer in [1, 1048576], got 0"),
        ({"std_ddof": 2}, "std_ddof must be an integer in [0, 1], got 2"),
        ({"lr": 0.0}, "lr must be a finite number > 0, got 0.0"),
        ({"clip_eps_low": 1.5, "clip_eps_high": 2.0}, "in (0, 1), got 1.5"),
        ({"length_penalty_coef": -0.1}, "length_penalty_coef must be a finite number ≥ 0"),
        ({"autocast": "fp16"}, "autocast must be one of ['off', 'bf16'], got 'fp16'"),
        ({"save_dtype": "float16"}, "one of ['auto', 'float32', 'bfloat16']"),
        ({"micro_batch_tokens": -1}, "micro_batch_tokens must be an integer in [0, 2147483647]"),
        ({"tis_cap": -1.0}, "tis_cap must be a finite number ≥ 0, got -1.0"),
        ({"tis_cap": 0.0, "micro_batch_tokens": 512, "autocast": "bf16"}, None),
        ({"kl_estimator": "k4"}, "kl_estimator must be one of ['k1', 'k2', 'k3']"),
        ({"kl_estimator": "k2"}, None),
        ({"kl_in_reward": True}, None),
        ({"kl_in_reward": True, "beta": 0.0, "beta_schedule": "fixed"}, None),  # a no-op
        ({"loss_norm_tokens": -1, "aggregation": "dr_grpo"}, "loss_norm_tokens must be an integer"),
        ({"loss_norm_tokens": 512}, "set it to 0 or choose dr_grpo"),
    ],
)
def test_cross_field_checks_say_how_to_fix(kwargs: dict[str, Any], hint: str | None) -> None:
    if hint is None:
        GRPOConfig(**kwargs)
        return
    with pytest.raises(ValueError, match=re.escape(hint)):
        GRPOConfig(**kwargs)


@pytest.mark.parametrize("name", ["group_size", "prompts_per_step"])
def test_group_size_and_prompts_per_step_are_not_trainer_knobs(name: str) -> None:
    # the trainer takes G from each item and a step's prompts from the batch source, so a field
    # here would be a setting that changes nothing; a TOML that sets one fails as unknown
    assert name not in {f.name for f in dataclasses.fields(GRPOConfig)}
    with pytest.raises(TypeError, match=name):
        GRPOConfig(**{name: 8})


def test_make_beta_schedule() -> None:
    warm = make_beta_schedule(GRPOConfig())
    assert isinstance(warm, WarmupBeta)
    assert warm.value(0) == pytest.approx(0.05) and warm.value(10_000) == 0.02
    fixed = make_beta_schedule(GRPOConfig(beta_schedule="fixed", beta=0.0, reference="none"))
    assert isinstance(fixed, FixedBeta) and fixed.value(3) == 0.0
    adaptive = make_beta_schedule(GRPOConfig(beta_schedule="adaptive"))
    assert isinstance(adaptive, AdaptiveBeta) and adaptive.value(0) == 0.02


def test_dr_grpo_tokens_is_a_constant() -> None:
    assert GRPOConfig(max_new_tokens=64).dr_grpo_tokens == 64
    assert GRPOConfig(aggregation="dr_grpo", loss_norm_tokens=512).dr_grpo_tokens == 512


def test_the_config_names_the_registries_it_checks_against() -> None:
    """The field names' Literal types live in grpo_core.config (so the config loads without
    torch), and every name they allow has its registry entry (the config checks the names alone)."""
    import typing

    from grpo_core import config
    from grpo_core.advantages import ESTIMATORS
    from grpo_core.kl import KL_ESTIMATORS
    from grpo_core.loss import AGGREGATIONS

    assert set(ESTIMATORS) == set(typing.get_args(config.EstimatorName))
    assert set(AGGREGATIONS) == set(typing.get_args(config.AggregationName))
    assert set(KL_ESTIMATORS) == set(typing.get_args(config.KLEstimatorName))


def test_the_config_and_the_cli_load_without_torch() -> None:
    """`import flows.cli` (every `sieve` command's start) and `grpo_core.config` import no
    torch: a command that needs it imports it when it runs."""
    import subprocess
    import sys

    code = "import sys, flows.cli, grpo_core.config; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
