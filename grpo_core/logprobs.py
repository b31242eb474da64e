"""Log-probs of the completion tokens under a model: full rows, or prompts once + KV cache.

`completion_logp(model, batch, share_prefix, autocast)` is the one entry point the trainer uses
for the policy, the old policy and the reference. With `autocast="bf16"` the forward runs under
`torch.autocast(device_type, bfloat16)` (weights stay in their own dtype, fp32 masters); the
log-softmax is always taken in float32.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer_prefix.py -q`.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

import torch
from torch import Tensor

from grpo_core.batch import Batch


@contextlib.contextmanager
def forward_precision(device: torch.device, autocast: str) -> Iterator[None]:
    """bf16 autocast on `device` when asked, else nothing."""
    if autocast == "bf16":
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            yield
    else:
        yield


def completion_logp(
    model: torch.nn.Module,
    b: Batch,
    share_prefix: bool,
    autocast: str = "off",
    temperature: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Log-probs (B, Tc) of the completion tokens and their logits (B, Tc, V), both of the
    distribution the completions were sampled from: logits / `temperature` (as TRL scores them;
    vLLM's `processed_logprobs` are the same quantity when top-p and top-k are off)."""
    device = b.ids.device
    with forward_precision(device, autocast):
        if share_prefix:
            return shared_prefix_logp(model, b, temperature)
        logits = model(input_ids=b.ids, attention_mask=b.attn).logits  # (B, L, V)
        return gather_completion(logits, b, temperature)


def _tempered(logits: Tensor, temperature: float) -> Tensor:
    return logits if temperature == 1.0 else logits / temperature


def gather_completion(logits: Tensor, b: Batch, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """Pick the logits that predict each completion token; (B, Tc) log-probs, (B, Tc, V)."""
    tc = b.comp_mask.shape[1]
    pos = b.starts[:, None] + torch.arange(tc, device=logits.device)[None, :]  # (B, Tc)
    pos = pos.clamp(max=logits.shape[1] - 2)
    picked = logits.gather(1, pos[..., None].expand(-1, -1, logits.shape[-1])).float()
    picked = _tempered(picked, temperature)
    targets = b.ids.gather(1, (pos + 1).clamp(max=b.ids.shape[1] - 1))  # (B, Tc)
    logp = torch.log_softmax(picked, dim=-1).gather(-1, targets[..., None]).squeeze(-1)
    return logp, picked


def cache_kwarg(model: torch.nn.Module) -> str:
    """The forward's name for a KV cache: `cache` from transformers 5.20, `past_key_values` before.

    An older transformers takes `cache=` silently into `**kwargs` and runs without the prompt, so
    the name is read off the model's (or, under peft, the base model's) `forward` signature.
    """
    get_base = getattr(model, "get_base_model", None)
    base: object = get_base() if callable(get_base) else model
    cls = type(base)
    if cls not in _CACHE_KWARG:
        params = inspect.signature(cls.forward).parameters  # type: ignore[attr-defined]
        _CACHE_KWARG[cls] = "cache" if "cache" in params else "past_key_values"
    return _CACHE_KWARG[cls]


_CACHE_KWARG: dict[type, str] = {}


def shared_prefix_logp(
    model: torch.nn.Module, b: Batch, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """`gather_completion`'s result with each distinct prompt run through the model once.

    The prompts (left-padded) give a KV cache and the logits of each completion's first token;
    the cache is gathered to the rows (an index, so gradients flow back to the shared prompt)
    and the completions run on top of it. Same log-probs as the full-row forward up to float
    rounding (tests/grpo_core/test_trainer_prefix.py), with the prompt computed once per group
    instead of once per sample.
    """
    assert b.prompt_ids is not None and b.prompt_attn is not None
    assert b.owner is not None and b.comp_ids is not None
    from transformers import DynamicCache

    positions = (b.prompt_attn.cumsum(-1) - 1).clamp(min=0)  # (P, Tp)
    cache = DynamicCache(config=getattr(model, "config", None))
    out = model(
        input_ids=b.prompt_ids,
        attention_mask=b.prompt_attn,
        position_ids=positions,
        **{cache_kwarg(model): cache},
        use_cache=True,
    )
    first = out.logits[:, -1:, :][b.owner]  # (B, 1, V): predicts completion token 0
    tc = b.comp_ids.shape[1]
    if tc > 1:
        cache.batch_select_indices(b.owner)  # (B, ...) per layer, differentiable
        lengths = b.prompt_attn.sum(-1)[b.owner]  # (B,)
        steps = torch.arange(tc - 1, device=lengths.device)
        attn = torch.cat([b.prompt_attn[b.owner], torch.ones_like(b.comp_ids[:, :-1])], dim=1)
        rest = model(
            input_ids=b.comp_ids[:, :-1],
            attention_mask=attn,
            position_ids=lengths[:, None] + steps[None, :],
            **{cache_kwarg(model): cache},
            use_cache=True,
        ).logits  # (B, Tc - 1, V)
        logits = torch.cat([first, rest], dim=1).float()  # (B, Tc, V)
    else:
        logits = first.float()
    logits = _tempered(logits, temperature)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, b.comp_ids[..., None]).squeeze(-1)
    return logp, logits
