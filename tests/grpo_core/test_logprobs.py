"""Selective log-softmax (`grpo_core.logprobs`) against the formula it replaced: the whole
float32 log-softmax of the picked (B, Tc, V) logits, gathered at the sampled tokens. Values and
gradients (to the logits and to a tiny model's parameters), entropy, chunking, temperature,
and that no float32 (B, T, V) tensor is kept for the backward of bf16 logits.

Test: `.venv/bin/pytest tests/grpo_core/test_logprobs.py -q`.
"""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from grpo_core import logprobs
from grpo_core.batch import Batch, build_batch
from grpo_core.logprobs import gather_completion, selected_logp, shared_prefix_logp
from grpo_core.trainer import Item, Sample
from tests.grpo_core.conftest import EOS, PAD, ToyTokenizer, toy_model


def slow_logp(logits: Tensor, targets: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    """The old path: float copy, temper, full log-softmax, gather; entropy from the same."""
    logp_all = torch.log_softmax(logits.float() / temperature, dim=-1)  # (B, T, V)
    entropy = -(logp_all.exp() * logp_all).sum(dim=-1)  # (B, T)
    return logp_all.gather(-1, targets[..., None]).squeeze(-1), entropy


def slow_gather(logits: Tensor, b: Batch, temperature: float = 1.0) -> Tensor:
    """The old `gather_completion`: expand-gather the (B, Tc, V) logits, then `slow_logp`."""
    tc = b.comp_mask.shape[1]
    pos = b.starts[:, None] + torch.arange(tc)[None, :]  # (B, Tc)
    pos = pos.clamp(max=logits.shape[1] - 2)
    picked = logits.gather(1, pos[..., None].expand(-1, -1, logits.shape[-1]))  # (B, Tc, V)
    targets = b.ids.gather(1, (pos + 1).clamp(max=b.ids.shape[1] - 1))  # (B, Tc)
    return slow_logp(picked, targets, temperature)[0]


def random_logits(shape: tuple[int, ...], seed: int = 0) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    logits = 3.0 * torch.randn(*shape, generator=g)
    targets = torch.randint(0, shape[-1], shape[:-1], generator=g)
    return logits, targets


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("chunk", [1 << 24, 37])  # one chunk; chunks of 1 row (V = 50)
def test_selected_logp_value_gradient_and_entropy_match_the_full_log_softmax(
    temperature: float, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", chunk)
    logits, targets = random_logits((3, 5, 50))
    weights = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    fast_in, slow_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    fast, fast_ent = selected_logp(fast_in, targets, temperature, entropy=True)
    slow, slow_ent = slow_logp(slow_in, targets, temperature)
    torch.testing.assert_close(fast, slow, rtol=1e-6, atol=1e-6)  # fp32 rounding of ~20
    assert fast_ent is not None
    torch.testing.assert_close(fast_ent, slow_ent, rtol=0, atol=1e-5)
    (fast * weights).sum().backward()
    (slow * weights).sum().backward()
    assert fast_in.grad is not None and slow_in.grad is not None
    torch.testing.assert_close(fast_in.grad, slow_in.grad, rtol=0, atol=1e-6)
    assert not fast_ent.requires_grad


def test_entropy_is_zero_for_a_peaked_distribution_and_log_v_for_a_flat_one() -> None:
    flat = selected_logp(
        torch.zeros(1, 2, 7), torch.zeros(1, 2, dtype=torch.long), 1.0, entropy=True
    )
    assert flat[1] is not None
    torch.testing.assert_close(flat[1], torch.full((1, 2), float(torch.log(torch.tensor(7.0)))))
    peaked = torch.tensor([[[50.0, 0.0, 0.0]]])
    ent = selected_logp(peaked, torch.zeros(1, 1, dtype=torch.long), 1.0, entropy=True)[1]
    assert ent is not None and abs(float(ent)) < 1e-6
    assert selected_logp(peaked, torch.zeros(1, 1, dtype=torch.long), 1.0)[1] is None


def test_bf16_logits_keep_no_float32_vocabulary_tensor_for_the_backward() -> None:
    logits, targets = random_logits((4, 6, 64))
    low = logits.bfloat16().requires_grad_()
    saved: list[Tensor] = []

    def keep(t: Tensor) -> Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        logp, _ = selected_logp(low, targets, 0.9)
    big_float = [t for t in saved if t.dtype == torch.float32 and t.numel() >= low.numel()]
    assert not big_float, [tuple(t.shape) for t in big_float]
    assert any(t.dtype == torch.bfloat16 and t.numel() == low.numel() for t in saved)
    logp.sum().backward()
    assert low.grad is not None and low.grad.dtype == torch.bfloat16
    slow = slow_logp(logits.bfloat16(), targets, 0.9)[0]
    torch.testing.assert_close(logp, slow, rtol=0, atol=1e-5)


def toy_batch(tok: ToyTokenizer) -> Batch:
    """Three prompts of different lengths, two completions each, ragged; one prompt repeated
    out of order (so one prompt's first logits feed rows that are not neighbours)."""
    prompts = ["ab", "abcdef", "c", "ab"]
    comps = [(8, 3, EOS), (2, 9, 10, 4, 5), (11,), (3, 3, EOS), (4, 5, 6), (7,), (8, EOS)]
    owners = [0, 0, 1, 1, 2, 2, 3]
    items = [Item(prompts[o], "A", 2) for o in owners]
    samples = [Sample(c, "", truncated=c[-1] != EOS) for c in comps]
    return build_batch(tok, items, samples, torch.ones(len(items)), PAD, torch.device("cpu"))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_model_log_probs_and_parameter_gradients_match_the_old_path(temperature: float) -> None:
    """Full rows and shared prefixes both against the old full-row formula, value and grads."""
    b = toy_batch(ToyTokenizer())
    weights = torch.randn(b.comp_mask.shape, generator=torch.Generator().manual_seed(2))
    weights = weights * b.comp_mask

    def grads(fn: object) -> tuple[Tensor, list[Tensor]]:
        model = toy_model(5)
        logp = fn(model)  # type: ignore[operator]
        (logp * weights).sum().backward()
        return logp.detach(), [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]

    def old(model: torch.nn.Module) -> Tensor:
        return slow_gather(model(input_ids=b.ids, attention_mask=b.attn).logits, b, temperature)

    def full(model: torch.nn.Module) -> Tensor:
        logits = model(input_ids=b.ids, attention_mask=b.attn).logits
        return gather_completion(logits, b, temperature)[0]

    def shared(model: torch.nn.Module) -> Tensor:
        return shared_prefix_logp(model, b, temperature)[0]

    want, want_grads = grads(old)
    mask = b.comp_mask
    for fn, atol in ((full, 1e-6), (shared, 1e-5)):  # shared: another forward, float rounding
        got, got_grads = grads(fn)
        torch.testing.assert_close(got[mask], want[mask], rtol=0, atol=atol)
        for g_got, g_want in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(g_got, g_want, rtol=1e-4, atol=atol)
