"""Logits only at scored positions (`grpo_core.logprobs`): the LM head and the log-softmax run
only where a completion token is predicted. Log-probs, entropy and every parameter's gradient
against a plain reference (the whole (B, L, V) logits of the full rows, a float32 log-softmax,
gathered at each completion token), on ragged batches (prompts and completions of uneven
lengths, a one-token and an empty completion, padding on both sides), for full rows and shared
prefixes, with the model's masked head and without it (the fallback), and under LoRA.

Tolerances: log-probs and entropy to 1e-5 absolute (values of ~2..10; the paths differ only
in matmul shapes, so in float32 summation order); gradients to 1e-5 absolute + 1e-4 relative
over every parameter (summed over ~40 tokens of float32 rounding). Padding entries are exactly 0.

Test: `.venv/bin/pytest tests/grpo_core/test_scored_positions.py -q`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import Tensor
from transformers import LlamaConfig, LlamaForCausalLM

from grpo_core import logprobs
from grpo_core.batch import Batch, build_batch
from grpo_core.logprobs import completion_logp, head_support
from grpo_core.trainer import Item, Sample
from tests.grpo_core.conftest import EOS, PAD, ToyTokenizer, toy_model

ATOL, RTOL = 1e-5, 1e-4


def ragged_batch(vocab: int) -> Batch:
    """Four prompts (1..6 tokens), ten completions of 0..7 tokens, owners out of order."""
    prompts = ["ab", "abcdef", "c", "dcba"]
    comps = [(8, 3, EOS), (2, 9, 10, 4, 5, 6, 7), (11,), (), (3, 3, EOS), (4, 5, 6, 7, 8), (7,)]
    comps += [(8, EOS), (9, 9, 9, 9), (2, 3, 4, 5, 6, 7, 8)]
    owners = [0, 0, 1, 1, 2, 3, 3, 2, 0, 1]
    assert max(t for c in comps for t in c) < vocab
    items = [Item(prompts[o], "A", 3) for o in owners]
    samples = [Sample(c, "", truncated=not c or c[-1] != EOS) for c in comps]
    adv = torch.linspace(-1.0, 1.0, len(items))
    return build_batch(ToyTokenizer(), items, samples, adv, PAD, torch.device("cpu"))


def reference_logp(model: torch.nn.Module, b: Batch, temperature: float) -> tuple[Tensor, Tensor]:
    """Row by row, the plain way: whole logits of prompt + completion, float32 log-softmax of
    logits / T, the log-prob of each completion token at the position before it; (B, Tc)."""
    n, tc = b.comp_mask.shape
    logp, ent = torch.zeros(n, tc), torch.zeros(n, tc)
    for r in range(n):
        length = int(b.attn[r].sum())
        ids = b.ids[r : r + 1, :length]  # (1, L_r) no padding at all
        logits = model(input_ids=ids).logits[0].float() / temperature  # (L_r, V)
        all_lp = torch.log_softmax(logits, dim=-1)  # (L_r, V)
        k = int(b.comp_mask[r].sum())
        start = int(b.starts[r])
        for t in range(k):
            logp[r, t] = all_lp[start + t, ids[0, start + t + 1]]
            ent[r, t] = -(all_lp[start + t].exp() * all_lp[start + t]).sum().detach()
    return logp, ent


def weights_for(b: Batch) -> Tensor:
    g = torch.Generator().manual_seed(7)
    return torch.randn(b.comp_mask.shape, generator=g) * b.comp_mask  # (B, Tc)


def grads_of(
    model: torch.nn.Module, fn: Callable[[], tuple[Tensor, Tensor | None]], w: Tensor
) -> tuple[Tensor, Tensor | None, dict[str, Tensor]]:
    model.zero_grad(set_to_none=True)
    logp, ent = fn()
    (logp * w).sum().backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), ent, grads


def assert_same(
    got: tuple[Tensor, Tensor | None, dict[str, Tensor]],
    want: tuple[Tensor, Tensor | None, dict[str, Tensor]],
    mask: Tensor,
) -> None:
    torch.testing.assert_close(got[0][mask], want[0][mask], rtol=0, atol=ATOL)
    assert bool((got[0][~mask] == 0).all()), "padding log-probs are 0"
    if got[1] is not None and want[1] is not None:
        torch.testing.assert_close(got[1][mask], want[1][mask], rtol=0, atol=ATOL)
        assert bool((got[1][~mask] == 0).all())
    assert got[2].keys() == want[2].keys() and got[2]
    for k, g in got[2].items():
        torch.testing.assert_close(g, want[2][k], rtol=RTOL, atol=ATOL, msg=k)


def gqa_llama(seed: int = 0) -> LlamaForCausalLM:
    """A second tiny Llama: GQA, untied head, a wider vocabulary than the toy's."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=97, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=PAD, tie_word_embeddings=False,
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


SUPPORT = {"masked head": (True, True), "last only": (True, False), "none": (False, False)}


@contextlib.contextmanager
def support(model: torch.nn.Module, kind: str) -> Iterator[None]:
    """Make `model`'s class look as if its forward took `logits_to_keep` as `kind` says."""
    cls = type(model)
    before = logprobs._HEAD_SUPPORT.pop(cls, None)
    logprobs._HEAD_SUPPORT[cls] = SUPPORT[kind]
    try:
        yield
    finally:
        logprobs._HEAD_SUPPORT.pop(cls, None)
        if before is not None:
            logprobs._HEAD_SUPPORT[cls] = before


def test_transformers_llama_takes_a_position_mask() -> None:
    assert head_support(toy_model()) == (True, True)


@pytest.mark.parametrize("kind", list(SUPPORT))
@pytest.mark.parametrize("share_prefix", [False, True])
@pytest.mark.parametrize(("make", "temperature"), [(toy_model, 1.0), (gqa_llama, 0.7)])
def test_log_probs_entropy_and_every_gradient_match_the_plain_full_log_softmax(
    kind: str, share_prefix: bool, make: Callable[[], torch.nn.Module], temperature: float
) -> None:
    model = make()
    b = ragged_batch(int(model.config.vocab_size))  # type: ignore[attr-defined]
    w = weights_for(b)
    want = grads_of(model, lambda: reference_logp(model, b, temperature), w)
    with support(model, kind):
        got = grads_of(
            model, lambda: completion_logp(model, b, share_prefix, "off", temperature, True), w
        )
    assert_same(got, want, b.comp_mask.bool())


@pytest.mark.parametrize("share_prefix", [False, True])
def test_small_chunks_give_the_same_gradient(
    share_prefix: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = gqa_llama(1)
    b = ragged_batch(97)
    w = weights_for(b)
    want = grads_of(model, lambda: completion_logp(model, b, share_prefix, "off", 0.8, True), w)
    monkeypatch.setattr(logprobs, "CHUNK_ELEMENTS", 3 * 97 + 5)  # chunks of 3 rows
    got = grads_of(model, lambda: completion_logp(model, b, share_prefix, "off", 0.8, True), w)
    assert_same(got, want, b.comp_mask.bool())


@pytest.mark.parametrize("share_prefix", [False, True])
def test_the_head_sees_only_the_scored_positions(share_prefix: bool) -> None:
    """The LM head runs on M = the completion tokens (plus each prompt's last position when
    sharing the prefix), never on prompt positions or padding."""
    model = toy_model(2)
    b = ragged_batch(12)
    rows: list[int] = []
    hook = model.lm_head.register_forward_hook(
        lambda mod, args, out: rows.append(int(args[0].reshape(-1, args[0].shape[-1]).shape[0]))
    )
    try:
        completion_logp(model, b, share_prefix)[0].sum().backward()
    finally:
        hook.remove()
    tokens = int(b.comp_mask.sum())
    if share_prefix:
        assert b.prompt_ids is not None
        starts = int(b.comp_mask[:, 0].sum())  # first tokens come from the prompts' last logits
        assert rows == [int(b.prompt_ids.shape[0]), tokens - starts]
    else:
        assert rows == [tokens]
    assert tokens < b.ids.numel() // 2  # the batch is mostly prompt and padding


def test_lora_adapters_get_the_reference_gradient() -> None:
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model

    base = gqa_llama(2)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    for name, p in model.named_parameters():  # B = 0 at init: give the adapters a value
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    assert head_support(model) == (True, True)
    b = ragged_batch(97)
    w = weights_for(b)
    want = grads_of(model, lambda: reference_logp(model, b, 1.0), w)
    for share_prefix in (False, True):
        got = grads_of(model, lambda s=share_prefix: completion_logp(model, b, s), w)
        assert_same(got, want, b.comp_mask.bool())
    assert all("lora_" in k for k in want[2])
