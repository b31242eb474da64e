"""Log-probs of the completion tokens under a model: full rows, or prompts once + KV cache.

`completion_logp(model, batch, share_prefix, autocast)` is the one entry point the trainer uses
for the policy, the old policy and the reference. With `autocast="bf16"` the forward runs under
`torch.autocast(device_type, bfloat16)` (weights stay in their own dtype, fp32 masters); the
log-softmax is always taken in float32.

Selective log-softmax: only the sampled token's log-prob is formed, as x[token] − logsumexp(x)
over chunks of rows (`SelectedLogSoftmax`): no float32 log-softmax, expanded or tempered copy of
the logits exists, only chunk-sized float32 temporaries; the backward recomputes each chunk's
softmax from the saved logits (native dtype). The entropy metric comes from the same chunks in
the same pass.

Scored positions only: the LM head (a fifth of SmolLM2's linear FLOPs per token) and the
log-softmax run only where a completion token is predicted, never on prompt positions or
padding. A transformers model whose forward takes a (B, L) bool `logits_to_keep` (transformers
≥ 5: `slice_logits_to_keep`; the model's own forward, so any logit scaling it applies stays)
returns logits (M, V) at those M positions only, as TRL's GRPO does with `logits_to_keep` and its
fused head; the prompt forward keeps only its last position (`logits_to_keep=1`). Any other
model computes (B, L, V) logits and only the M scored rows enter the log-softmax. Unscored
(padding) entries of the returned (B, Tc) log-probs and entropy are 0.

Test: `.venv/bin/pytest tests/grpo_core/test_logprobs.py tests/grpo_core/test_trainer_prefix.py
tests/grpo_core/test_scored_positions.py -q`.
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


def _chunk(logits: Tensor, rows: Tensor | None, s: int, e: int, temperature: float) -> Tensor:
    """Rows s..e of the picked rows as float32 / T, (c, V): a view when `rows` is None (all rows
    in order), fp32 and T = 1, else a copy. Never written to in place."""
    x = logits[s:e] if rows is None else logits.index_select(0, rows[s:e])
    x = x.float()
    return x if temperature == 1.0 else x / temperature


class SelectedLogSoftmax(torch.autograd.Function):
    """log softmax(x / T)[target] for chosen rows of (N, V) logits (`rows` None: every row, in
    order), and their entropy.

    Forward and backward go chunk by chunk in float32; only the logits (native dtype, not
    copied) and one logsumexp per row are saved. The entropy is a detached output.
    """

    @staticmethod
    def forward(
        ctx: Any,
        logits: Tensor,
        rows: Tensor | None,
        targets: Tensor,
        temperature: float,
        entropy: bool,
    ) -> tuple[Tensor, Tensor]:
        m = int(targets.shape[0])
        step = max(1, CHUNK_ELEMENTS // int(logits.shape[-1]))
        lse = torch.empty(m, device=logits.device)  # (M,)
        ent = torch.zeros(m if entropy else 0, device=logits.device)  # (M,) or empty
        with torch.autocast(logits.device.type, enabled=False):
            for s in range(0, m, step):
                x = _chunk(logits, rows, s, s + step, temperature)  # (c, V)
                lse[s : s + step] = torch.logsumexp(x, dim=-1)
                if entropy:  # H = lse − Σ p·x
                    p = (x - lse[s : s + step, None]).exp_()
                    ent[s : s + step] = lse[s : s + step] - (p * x).sum(dim=-1)
            at = torch.arange(m, device=logits.device) if rows is None else rows
            chosen = logits[at, targets].float() / temperature  # (M,)
        ctx.save_for_backward(logits, rows, targets, lse)
        ctx.temperature = temperature
        ctx.mark_non_differentiable(ent)
        return chosen - lse, ent

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor) -> tuple[Tensor | None, ...]:
        logits, rows, targets, lse = ctx.saved_tensors
        t, m = ctx.temperature, int(targets.shape[0])
        step = max(1, CHUNK_ELEMENTS // int(logits.shape[-1]))
        # every row in order: each row of the gradient is written once (no zero fill, no add)
        out = torch.empty_like(logits) if rows is None else torch.zeros_like(logits)  # (N, V)
        for s in range(0, m, step):
            g = grad[s : s + step, None].float() / t  # (c, 1)
            x = _chunk(logits, rows, s, s + step, t)  # (c, V)
            d = (x - lse[s : s + step, None]).exp_().mul_(-g)  # −g·softmax
            d.scatter_add_(1, targets[s : s + step, None], g)  # + g at the sampled token
            if rows is None:
                out[s : s + step] = d
            else:  # rows may repeat (clamped positions)
                out.index_add_(0, rows[s : s + step], d.to(out.dtype))
        return out, None, None, None, None


def selected_logp(
    logits: Tensor, targets: Tensor, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """(B, T) log-probs of `targets` (B, T) under softmax(logits / T) for logits (B, T, V), and
    the (B, T) entropy (detached) when asked."""
    b, t, v = logits.shape
    logp, ent = picked_logp(
        logits.reshape(b * t, v), None, targets.reshape(-1), temperature, entropy
    )
    return logp.view(b, t), ent.view(b, t) if ent is not None else None


def picked_logp(
    flat: Tensor, rows: Tensor | None, targets: Tensor, temperature: float, entropy: bool
) -> tuple[Tensor, Tensor | None]:
    """(M,) log-probs of `targets` at rows `rows` of (N, V) logits (None: all N = M rows, in
    order), and (M,) entropy if asked."""
    if rows is None and int(flat.shape[0]) != int(targets.shape[0]):
        raise ValueError(f"{flat.shape[0]} rows of logits for {targets.shape[0]} targets")
    logp, ent = SelectedLogSoftmax.apply(flat, rows, targets, temperature, entropy)
    return logp, ent if entropy else None


def spread(values: Tensor, keep: Tensor) -> Tensor:
    """(M,) values at the True entries of `keep` (B, T), in row-major order, as (B, T) with 0
    elsewhere (differentiable in `values`)."""
    return torch.zeros_like(keep, dtype=values.dtype).masked_scatter(keep, values)


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
    are off). Padding entries are 0."""
    device = b.ids.device
    with forward_precision(device, autocast):
        if share_prefix:
            return shared_prefix_logp(model, b, temperature, entropy)
        keep = scored_positions(b)  # (B, L)
        flat, rows = scored_logits(model, keep, input_ids=b.ids, attention_mask=b.attn)
        return _completion_from(flat, rows, keep, b, temperature, entropy)


def scored_positions(b: Batch) -> Tensor:
    """(B, L) bool: the full-row positions whose logits predict a completion token (position
    starts + t predicts completion token t), True for each real token of `b.comp_mask`."""
    n, length = b.ids.shape
    tc = b.comp_mask.shape[1]
    pos = b.starts[:, None] + torch.arange(tc, device=b.ids.device)[None, :]  # (B, Tc)
    row = torch.arange(n, device=b.ids.device)[:, None].expand(n, tc)  # (B, Tc)
    mask = b.comp_mask.bool()
    if bool((pos[mask] < 0).any()):
        raise ValueError("a row with an empty prompt: its first completion token has no logits")
    keep = torch.zeros(n, length, dtype=torch.bool, device=b.ids.device)
    keep[row[mask], pos[mask]] = True  # in row-major order these are comp_mask's True entries
    return keep


def _completion_from(
    flat: Tensor,
    rows: Tensor | None,
    keep: Tensor,
    b: Batch,
    temperature: float,
    entropy: bool,
) -> tuple[Tensor, Tensor | None]:
    """(B, Tc) log-probs (and entropy) from the logits at `keep`'s positions (`scored_logits`)."""
    nxt = torch.nn.functional.pad(b.ids[:, 1:], (0, 1))  # (B, L): the token each position predicts
    logp, ent = picked_logp(flat, rows, nxt[keep], temperature, entropy)  # (M,)
    mask = b.comp_mask.bool()
    return spread(logp, mask), None if ent is None else spread(ent, mask)


def gather_completion(
    logits: Tensor, b: Batch, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """From full-row logits (B, L, V), the (B, Tc) log-probs of the completion tokens (each
    predicted at the position before it) and, when asked, their (B, Tc) entropy; 0 at padding."""
    keep = scored_positions(b)  # (B, L)
    rows = keep.reshape(-1).nonzero().squeeze(1)  # (M,)
    flat = logits.reshape(-1, logits.shape[-1])  # a view: no copy
    return _completion_from(flat, rows, keep, b, temperature, entropy)


def _forward_params(model: torch.nn.Module) -> tuple[type, Any]:
    """The class whose `forward` runs (under peft, the base model's) and its parameters."""
    get_base = getattr(model, "get_base_model", None)
    base: object = get_base() if callable(get_base) else model
    cls = type(base)
    return cls, inspect.signature(cls.forward).parameters  # type: ignore[attr-defined]


def cache_kwarg(model: torch.nn.Module) -> str:
    """The forward's name for a KV cache: `cache` from transformers 5.20, `past_key_values` before.

    An older transformers takes `cache=` silently into `**kwargs` and runs without the prompt, so
    the name is read off the model's (or, under peft, the base model's) `forward` signature.
    """
    cls, params = _forward_params(model)
    if cls not in _CACHE_KWARG:
        _CACHE_KWARG[cls] = "cache" if "cache" in params else "past_key_values"
    return _CACHE_KWARG[cls]


_CACHE_KWARG: dict[type, str] = {}


def head_support(model: torch.nn.Module) -> tuple[bool, bool]:
    """(takes `logits_to_keep` at all, takes it as a (B, L) bool mask) for this model's forward.

    The mask form is trusted only where the forward's own code slices with transformers'
    `slice_logits_to_keep` (which flattens the True positions to (M, H) before the head); an
    older forward indexes `hidden[:, keep]` and would misread a mask."""
    cls, params = _forward_params(model)
    if cls not in _HEAD_SUPPORT:
        last = "logits_to_keep" in params
        code = getattr(inspect.unwrap(cls.forward), "__code__", None)  # type: ignore[attr-defined]
        names = code.co_names if code is not None else ()
        _HEAD_SUPPORT[cls] = (last, last and "slice_logits_to_keep" in names)
    return _HEAD_SUPPORT[cls]


_HEAD_SUPPORT: dict[type, tuple[bool, bool]] = {}


def scored_logits(
    model: torch.nn.Module, keep: Tensor, **inputs: Any
) -> tuple[Tensor, Tensor | None]:
    """The logits at `keep`'s True positions (B, L) of the forward on `inputs`: (M, V) and None
    where the model computes only those (`head_support`), else all (B·L, V) and the (M,) row
    indices of the kept positions."""
    if head_support(model)[1]:
        flat = model(**inputs, logits_to_keep=keep).logits  # (M, V)
        if flat.dim() != 2 or int(flat.shape[0]) != int(keep.sum()):
            raise RuntimeError(f"logits_to_keep as a mask gave logits {tuple(flat.shape)}")
        return flat, None
    logits = model(**inputs).logits  # (B, L, V)
    return logits.reshape(-1, logits.shape[-1]), keep.reshape(-1).nonzero().squeeze(1)


def shared_prefix_logp(
    model: torch.nn.Module, b: Batch, temperature: float = 1.0, entropy: bool = False
) -> tuple[Tensor, Tensor | None]:
    """`gather_completion`'s result with each distinct prompt run through the model once.

    The prompts (left-padded) give a KV cache and the logits of each completion's first token
    (only the last prompt position's, where the model allows); the cache is gathered to the
    rows (an index, so gradients flow back to the shared prompt) and the completions run on top
    of it, with logits only where a completion token follows (`scored_logits`). Same log-probs
    as the full-row forward up to float rounding (tests/grpo_core/test_trainer_prefix.py), with
    the prompt computed once per group instead of once per sample.
    """
    assert b.prompt_ids is not None and b.prompt_attn is not None
    assert b.owner is not None and b.comp_ids is not None
    from transformers import DynamicCache

    positions = (b.prompt_attn.cumsum(-1) - 1).clamp(min=0)  # (P, Tp)
    cache = DynamicCache(config=getattr(model, "config", None))
    last_only = {"logits_to_keep": 1} if head_support(model)[0] else {}
    out = model(
        input_ids=b.prompt_ids,
        attention_mask=b.prompt_attn,
        position_ids=positions,
        **{cache_kwarg(model): cache},
        use_cache=True,
        **last_only,
    )
    last = out.logits[:, -1, :]  # (P, V): predicts completion token 0 of each prompt's rows
    del out
    lp0, ent0 = picked_logp(last, b.owner, b.comp_ids[:, 0], temperature, entropy)  # (B,)
    real0 = b.comp_mask[:, 0].bool()  # (B,): an empty completion scores nothing
    lp0 = torch.where(real0, lp0, torch.zeros_like(lp0))[:, None]  # (B, 1)
    ent0 = None if ent0 is None else torch.where(real0, ent0, torch.zeros_like(ent0))[:, None]
    tc = b.comp_ids.shape[1]
    if tc == 1:
        return lp0, ent0
    cache.batch_select_indices(b.owner)  # (B, ...) per layer, differentiable
    lengths = b.prompt_attn.sum(-1)[b.owner]  # (B,)
    steps = torch.arange(tc - 1, device=lengths.device)
    attn = torch.cat([b.prompt_attn[b.owner], torch.ones_like(b.comp_ids[:, :-1])], dim=1)
    keep = b.comp_mask[:, 1:].bool()  # (B, Tc - 1): position t predicts completion token t + 1
    flat, rows = scored_logits(
        model,
        keep,
        input_ids=b.comp_ids[:, :-1],
        attention_mask=attn,
        position_ids=lengths[:, None] + steps[None, :],
        **{cache_kwarg(model): cache},
        use_cache=True,
    )  # (M, V), or (B·(Tc − 1), V) and rows
    lp, ent = picked_logp(flat, rows, b.comp_ids[:, 1:][keep], temperature, entropy)  # (M,)
    logp = torch.cat([lp0, spread(lp, keep)], 1)
    if ent is None or ent0 is None:
        return logp, None  # (B, Tc)
    return logp, torch.cat([ent0, spread(ent, keep)], 1)
