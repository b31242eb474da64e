"""LoRA for `reference = "lora_base"`: the adapters trained, the base weights as the reference.

`with_lora` wraps a model once (a model that is already a peft model is returned as it is), so
the owner of a run wraps it before it builds anything that holds the model (a sampler, an
evaluator) and the trainer sees the same object. `merged` is the one place adapters are folded
into a copy of the base weights: for checkpoint folders and for the live model's revision.

Test: `pytest tests/grpo_core/test_trainer.py -k lora`.
"""

from __future__ import annotations

import copy

import torch

from grpo_core.config import GRPOConfig
from grpo_core.types import TrainerError


def is_lora(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "merge_and_unload")


def with_lora(model: torch.nn.Module, cfg: GRPOConfig) -> torch.nn.Module:
    """The model with trainable LoRA adapters on every linear layer, when the config asks."""
    if cfg.reference != "lora_base" or is_lora(model):
        return model
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise TrainerError(
            'reference="lora_base" needs peft: pip install "grpo-sieve[lora]"'
        ) from None
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, target_modules="all-linear")
    return get_peft_model(model, lora)


def merged(model: torch.nn.Module) -> torch.nn.Module:
    """A plain model with the adapters added to a copy of the base weights (the model itself
    when it has no adapters); the live model is left unchanged."""
    if not is_lora(model):
        return model
    return copy.deepcopy(model).merge_and_unload()  # type: ignore[operator]
