"""The trainer's optimiser: AdamW over the trainable parameters and a linear lr warm-up."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from grpo_core.config import GRPOConfig


def make_optimiser(
    params: Sequence[torch.nn.Parameter], cfg: GRPOConfig, warn: Callable[[str], None]
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (cfg.lr, cfg.weight_decay) and the warm-up over `cfg.lr_warmup_steps` steps."""
    if any(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        warn(
            "training 16-bit parameters directly: Adam updates below their resolution are "
            "lost; load the model in float32 and set autocast='bf16' for 16-bit speed"
        )
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    warmup = cfg.lr_warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
    )
    return optimizer, scheduler
