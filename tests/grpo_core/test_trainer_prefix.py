"""Prefix sharing in the update: the same log-probs, gradients and losses as full rows."""

from __future__ import annotations

import torch

from grpo_core.batch import Batch, build_batch
from grpo_core.batch import padded as _padded
from grpo_core.config import GRPOConfig
from grpo_core.logprobs import gather_completion as _gather_completion
from grpo_core.logprobs import shared_prefix_logp as _shared_prefix_logp
from grpo_core.trainer import Hooks, Item, Sample, Trainer
from tests.grpo_core.conftest import (
    EOS,
    ToySampler,
    ToyTokenizer,
    first_letter_reward,
    toy_batches,
    toy_model,
)


def ragged_batch(trainer: Trainer) -> Batch:
    """Three prompts of different lengths, groups of 3, completions of 1..5 tokens."""
    gen = torch.Generator().manual_seed(0)
    items, samples = [], []
    for prompt in ("ab", "abcde", "c"):
        for _ in range(3):
            n = int(torch.randint(1, 6, (1,), generator=gen))
            toks = torch.randint(2, 12, (n,), generator=gen).tolist()
            if n % 2:
                toks[-1] = EOS
            items.append(Item(prompt, "A", 3))
            samples.append(Sample(tuple(toks), "", truncated=toks[-1] != EOS))
    adv = torch.linspace(-1.0, 1.0, len(items))
    return build_batch(trainer.tokenizer, items, samples, adv, trainer.pad_id, trainer.device)


def make_trainer(share: bool, model: torch.nn.Module | None = None) -> Trainer:
    model = model if model is not None else toy_model(3)
    tok = ToyTokenizer()
    cfg = GRPOConfig(total_steps=6, seed=1, checkpoint_every=0, share_prefix=share, lr=1e-2)
    return Trainer(
        model, tok, ToySampler(model, tok), first_letter_reward, toy_batches(), cfg,
        hooks=Hooks(warning=lambda m: None),
    )  # fmt: skip


def test_shared_prefix_gives_the_full_row_log_probs_and_gradients() -> None:
    model = toy_model(3)
    b = ragged_batch(make_trainer(True, model))
    mask = b.comp_mask
    full = _gather_completion(model(input_ids=b.ids, attention_mask=b.attn).logits, b, 1.0)[0]
    weights = torch.randn(full.shape, generator=torch.Generator().manual_seed(1))
    (full * weights)[mask].sum().backward()
    grads_full = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    shared = _shared_prefix_logp(model, b, 1.0)[0]
    assert shared.shape == full.shape
    assert torch.allclose(shared[mask], full[mask], atol=1e-5)
    (shared * weights)[mask].sum().backward()
    for g_full, p in zip(grads_full, model.parameters(), strict=True):
        assert p.grad is not None
        assert torch.allclose(p.grad, g_full, atol=1e-5)
    assert b.prompt_ids is not None and b.owner is not None
    assert (b.prompt_ids.shape[0], b.owner.tolist()) == (3, [0] * 3 + [1] * 3 + [2] * 3)


def test_training_with_and_without_prefix_sharing_gives_the_same_losses() -> None:
    shared = make_trainer(True).train()
    full = make_trainer(False).train()
    assert [h["trained_samples"] for h in shared] == [h["trained_samples"] for h in full]
    assert any(h["trained_samples"] > 0 for h in full)
    for a, b in zip(shared, full, strict=True):
        assert abs(a["loss"] - b["loss"]) < 1e-5
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-4


def test_padded_rows_match_a_row_by_row_fill() -> None:
    rows = [[5, 6, 7], [], [8], [9, 10, 11, 12]]
    for left in (False, True):
        ids, mask = _padded(rows, pad=0, left=left, min_width=2)
        assert ids.shape == mask.shape == (4, 4)
        for r, row in enumerate(rows):
            cells = ids[r, 4 - len(row) :] if left else ids[r, : len(row)]
            assert cells.tolist() == row
            assert int(mask[r].sum()) == len(row)
            assert ids[r][mask[r] == 0].eq(0).all()
    assert _padded([[], []], pad=3, min_width=1)[0].tolist() == [[3], [3]]


def test_log_probs_are_of_the_tempered_distribution() -> None:
    """At temperature T both paths score logits / T (what was sampled from), equal to each other
    and to a plain log-softmax of the scaled logits; T = 1 is the raw distribution."""
    from grpo_core.logprobs import completion_logp

    model = toy_model(3)
    b = ragged_batch(make_trainer(True, model))
    with torch.no_grad():
        logits = model(input_ids=b.ids, attention_mask=b.attn).logits
        raw = _gather_completion(logits, b, 1.0)[0]
        for share in (False, True):
            at_one = completion_logp(model, b, share, "off", temperature=1.0)[0]
            at_half = completion_logp(model, b, share, "off", temperature=0.5)[0]
            want = _gather_completion(logits / 0.5, b, 1.0)[0]
            mask = b.comp_mask
            assert torch.allclose(at_one[mask], raw[mask], atol=1e-5)
            assert torch.allclose(at_half[mask], want[mask], atol=1e-5)
            assert not torch.allclose(at_half[mask], raw[mask], atol=1e-3)
