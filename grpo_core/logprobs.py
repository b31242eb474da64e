"""Log-probs of the completion tokens under a model: full rows, or prompts once + KV cache.

`completion_logp(model, batch, share_prefix, autocast)` is the one entry point the trainer uses
for the policy, the old policy and the reference. With `autocast="bf16"` the forward runs under
`torch.autocast(device_type, bfloat16)` (weights stay in their own dtype, fp32 masters); the
log-softmax is always taken in float32.

Selective log-softmax: only the sampled token's log-prob is formed, as x[token] − logsumexp(x)
over chunks of rows (`SelectedLogSoftmax`): no float32 log-softmax, expanded or tempered copy of
the (B, L, V) logits exists, only chunk-sized float32 temporaries; the backward recomputes each
chunk's softmax from the saved logits (native dtype). The entropy metric comes from the same
chunks in the same pass.

Test: `.venv/bin/pytest tests/grpo_core/test_logprobs.py tests/grpo_core/test_trainer_prefix.py -q`.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

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


# Rows of logits turned to float32 at a time (bounds the temporaries: 2**24 floats = 64 MiB).
CHUNK_ELEMENTS = 1 << 24


class SelectedLogSoftmax(torch.autograd.Function):
    """log softmax(x / T)[target] for chosen rows of (N, V) logits, and their entropy.

    Forward and backward go chunk by chunk in float32; only the logits (native dtype, not
    copied) and one logsumexp per row are saved. The entropy is a detached output.
    """

    @staticmethod
    def forward(
        ctx: Any, logits: Tensor, rows: Tensor, targets: Tensor, temperature: float, entropy: bool
    ) -> tuple[Tensor, Tensor]:
        m, step = int(rows.shape[0]), max(1, CHUNK_ELEMENTS // int(logits.shape[-1]))
        lse = torch.empty(m, device=logits.device)  # (M,)
        ent = torch.zeros(m if entropy else 0, device=logits.device)  # (M,) or empty
        with torch.autocast(logits.device.type, enabled=False):
            for s in range(0, m, step):
                x = logits.index_select(0, rows[s : s + step]).float() / temperature  # (c, V)
                lse[s : s + step] = torch.logsumexp(x, dim=-1)
                if entropy:  # H = lse − Σ p·x
                    p = (x - lse[s : s + step, None]).exp_()
                    ent[s : s + step] = lse[s : s + step] - (p * x).sum(dim=-1)
            chosen = logits[rows, targets].float() / temperature  # (M,)
        ctx.save_for_backward(logits, rows, targets, lse)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(ent)
        return chosen - lse, ent

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor) -> tuple[Tensor | None, ...]:
        logits, rows, targets, lse = ctx.saved_tensors
        t, m = ctx.temperature, int(rows.shape[0])
        step = max(1, CHUNK_ELEMENTS // int(logits.shape[-1]))
        out = torch.zeros_like(logits)  # (N, V)
        for s in range(0, m, step):
            r, g = rows[s : s + step], grad[s : s + step, None].float() / t  # (c,), (c, 1)
            x = logits.index_select(0, r).float() / t  # (c, V)
            d = (x - lse[s : s + step, None]).exp_().mul_(-g)  # −g·softmax
            d.scatter_add_(1, targets[s : s + step, None], g)  # + g at the sampled token
            out.index_add_(0, r, d.to(out.dtype))  # rows may repeat (clamped positions)
        return out, None, None, None, None


def selected_logp(
    logits: Tensor, targets: Tensor, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """(B, T) log-probs of `targets` (B, T) under softmax(logits / T) for logits (B, T, V), and
    the (B, T) entropy (detached) when asked."""
    b, t, v = logits.shape
    rows = torch.arange(b * t, device=logits.device)
    logp, ent = picked_logp(
        logits.reshape(b * t, v), rows, targets.reshape(-1), temperature, entropy
    )
    return logp.view(b, t), ent.view(b, t) if ent is not None else None


def picked_logp(
    flat: Tensor, rows: Tensor, targets: Tensor, temperature: float, entropy: bool
) -> tuple[Tensor, Tensor | None]:
    """(M,) log-probs of `targets` at rows `rows` of (N, V) logits, and (M,) entropy if asked."""
    logp, ent = SelectedLogSoftmax.apply(flat, rows, targets, temperature, entropy)
    return logp, ent if entropy else None


def completion_logp(
    model: torch.nn.Module,
    b: Batch,
    share_prefix: bool,
    autocast: str = "off",
    temperature: float = 1.0,
    entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-probs (B, Tc) of the completion tokens and, when `entropy`, the (B, Tc) entropy
    (detached) of the distribution the completions were sampled from: logits / `temperature`
    (as TRL scores them; vLLM's `processed_logprobs` are the same quantity when top-p and top-k
    are off)."""
    device = b.ids.device
    with forward_precision(device, autocast):
        if share_prefix:
            return shared_prefix_logp(model, b, temperature, entropy)
        logits = model(input_ids=b.ids, attention_mask=b.attn).logits  # (B, L, V)
        return gather_completion(logits, b, temperature, entropy)


def gather_completion(
    logits: Tensor, b: Batch, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """From full-row logits (B, L, V), the (B, Tc) log-probs of the completion tokens (each
    predicted at the position before it) and, when asked, their (B, Tc) entropy."""
    n, length, v = logits.shape
    tc = b.comp_mask.shape[1]
    pos = b.starts[:, None] + torch.arange(tc, device=logits.device)[None, :]  # (B, Tc)
    pos = pos.clamp(max=length - 2)
    targets = b.ids.gather(1, pos + 1)  # (B, Tc)
    rows = (torch.arange(n, device=logits.device)[:, None] * length + pos).reshape(-1)  # (B·Tc,)
    flat = logits.reshape(n * length, v)  # a view: no copy
    logp, ent = picked_logp(flat, rows, targets.reshape(-1), temperature, entropy)
    return logp.view(n, tc), ent.view(n, tc) if ent is not None else None


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
    model: torch.nn.Module, b: Batch, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
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
    last = out.logits[:, -1, :]  # (P, V): predicts completion token 0 of each prompt's rows
    first = picked_logp(last, b.owner, b.comp_ids[:, 0], temperature, entropy)  # (B,) each
    tc = b.comp_ids.shape[1]
    if tc == 1:
        return first[0][:, None], first[1][:, None] if first[1] is not None else None
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
    logp, ent = selected_logp(rest, b.comp_ids[:, 1:], temperature, entropy)  # (B, Tc - 1)
    logp = torch.cat([first[0][:, None], logp], dim=1)  # (B, Tc)
    if ent is None or first[1] is None:
        return logp, None
    return logp, torch.cat([first[1][:, None], ent], dim=1)
