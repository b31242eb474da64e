"""The trainer's optimiser: AdamW over the trainable parameters and a linear lr warm-up.

AdamW runs torch's fused kernel (`fused=True`: one pass over each parameter, its gradient and
its two moments) where torch has one for every parameter (plain float tensors on CPU or CUDA;
not fsdp's sharded DTensors), else torch's default implementation. The two compute the same
update up to float32 rounding (tests/grpo_core/test_optim.py); the single-tensor loop torch
picks on CPU by default makes ~8 passes with parameter-sized temporaries.

Test: `.venv/bin/pytest tests/grpo_core/test_optim.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from grpo_core.config import GRPOConfig

FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def fused_ok(params: Sequence[torch.nn.Parameter]) -> bool:
    """Whether torch's fused AdamW takes every one of `params`."""
    return bool(params) and all(
        type(p.data) is torch.Tensor
        and p.device.type in ("cpu", "cuda")
        and p.dtype in FUSED_DTYPES
        and not p.is_sparse
        for p in params
    )


def make_optimiser(
    params: Sequence[torch.nn.Parameter], cfg: GRPOConfig, warn: Callable[[str], None]
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (cfg.lr, cfg.weight_decay; fused where `fused_ok`) and the warm-up over
    `cfg.lr_warmup_steps` steps."""
    if any(p.dtype in (torch.bfloat16, torch.float16) for p in params):
        warn(
            "training 16-bit parameters directly: Adam updates below their resolution are "
            "lost; load the model in float32 and set autocast='bf16' for 16-bit speed"
        )
    fused = True if fused_ok(params) else None  # None: torch's own choice
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=fused)
    warmup = cfg.lr_warmup_steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
    )
    return optimizer, scheduler
