"""A toy task for the trainer that needs nothing but torch and transformers.

Policy: a random-init Llama over a 12-symbol vocabulary. Prompt "a".."f"; the completion is
correct when its first token is the prompt's letter in upper case. At random init p ≈ 1/12 per
prompt, so groups of 8 are sometimes informative and GRPO can raise the pass rate in a few dozen
steps. The sampler is a plain torch loop seeded by the trainer's seed, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from grpo_core.trainer import Item, Sample, Scores

VOCAB = ["<pad>", "<eos>", "a", "b", "c", "d", "e", "f", "A", "B", "C", "D"]
PAD, EOS = 0, 1


class ToyTokenizer:
    pad_token_id = PAD
    eos_token_id = EOS

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [VOCAB.index(ch) for ch in text]}

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(VOCAB[i] for i in ids if i > EOS)


def toy_model(seed: int = 0, hidden: int = 32) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(VOCAB),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=PAD,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).eval()


class ToySampler:
    """Samples from the live model with a seeded generator (no KV cache: tiny)."""

    def __init__(self, model: torch.nn.Module, tokenizer: ToyTokenizer):
        self.model, self.tokenizer = model, tokenizer

    @torch.no_grad()
    def sample_groups(
        self,
        prompts: Sequence[str],
        sizes: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int,
    ) -> list[list[Sample]]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for prompt, g in zip(prompts, sizes, strict=True):
            ids = torch.tensor([self.tokenizer(prompt)["input_ids"]] * g)  # (G, P)
            done = torch.zeros(g, dtype=torch.bool)
            new: list[list[int]] = [[] for _ in range(g)]
            for _ in range(max_new_tokens):
                logits = self.model(input_ids=ids).logits[:, -1].float() / temperature
                tok = torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)  # (G, 1)
                for r in range(g):
                    if not done[r]:
                        new[r].append(int(tok[r]))
                        done[r] = int(tok[r]) == EOS
                ids = torch.cat([ids, tok], dim=1)
                if bool(done.all()):
                    break
            out.append(
                [Sample(tuple(t), self.tokenizer.decode(t), truncated=t[-1] != EOS) for t in new]
            )
        return out


def first_letter_reward(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    correct = [s.text[:1] == it.answer for it, s in zip(items, samples, strict=True)]
    return Scores([float(c) for c in correct], list(correct))


def toy_batches(prompts_per_step: int = 4, g: int = 8) -> Callable[[int], list[Item]]:
    letters = "abcdef"

    def batch(step: int) -> list[Item]:
        start = (step * prompts_per_step) % len(letters)
        picked = [letters[(start + i) % len(letters)] for i in range(prompts_per_step)]
        return [Item(p, p.upper(), g, key=p) for p in picked]

    return batch


@pytest.fixture
def toy() -> dict[str, object]:
    return {
        "model": toy_model,
        "tokenizer": ToyTokenizer,
        "sampler": ToySampler,
        "reward": first_letter_reward,
        "batches": toy_batches,
    }
