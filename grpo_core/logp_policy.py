"""The policy being trained and its reference, as functions of a batch: the rows of items and
samples as padded tensors (`tensors`), the completion log-probs under the policy (`logp`) or
the reference (`ref_logp`: the frozen copy, or under LoRA the base weights with the adapters
disabled), and `kl_in_reward`'s per-sample penalty (`reward_kl`).

The trainer owns one `Policy` and builds it after any fsdp wrapping (the config it holds is the
one the trainer trains with); nothing here reads the trainer.

Test: `.venv/bin/pytest tests/grpo_core/test_trainer_kl.py tests/grpo_core/test_trainer_prefix.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from grpo_core.batch import Batch, build_batch, part_rows, rows
from grpo_core.config import GRPOConfig
from grpo_core.kl import sequence_k1
from grpo_core.logprobs import completion_logp
from grpo_core.types import Item, Sample


def pad_id(tokenizer: Any) -> int:
    """The id the batches pad with: the tokenizer's pad token, else 0 (masked out either way)."""
    return int(getattr(tokenizer, "pad_token_id", None) or 0)


@dataclass
class Policy:
    model: torch.nn.Module  # the trained model (peft-wrapped under LoRA, sharded under fsdp)
    ref_model: torch.nn.Module | None  # the frozen copy; None: LoRA's base, or no reference
    cfg: GRPOConfig
    tokenizer: Any
    pad_id: int
    device: torch.device

    def tensors(self, items: list[Item], samples: list[Sample], adv: Tensor) -> Batch:
        """Row i = items[i]'s prompt + samples[i], as padded tensors on the model's device."""
        return build_batch(self.tokenizer, items, samples, adv, self.pad_id, self.device)

    def logp(
        self, b: Batch, entropy: bool = False, model: torch.nn.Module | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs (B, Tc) of the completion tokens under `model` (default: the policy) and,
        if asked, their entropy (B, Tc)."""
        cfg, m = self.cfg, self.model if model is None else model
        return completion_logp(m, b, cfg.share_prefix, cfg.autocast, cfg.temperature, entropy)

    def ref_logp(self, b: Batch) -> Tensor:
        """Log-probs (B, Tc) under the reference."""
        if self.ref_model is not None:
            return self.logp(b, model=self.ref_model)[0]
        with self.model.disable_adapter():  # type: ignore[operator]
            return self.logp(b)[0]

    def reward_kl(
        self, beta: float, items: list[Item], flat: list[Sample], group: Tensor, known: Tensor
    ) -> Tensor | None:
        """`kl_in_reward`: (N,) β·Σ_t(logπ_old − logπ_ref) of each judged sample (`known`; 0 for
        the unjudged), sample i a completion of items[group[i]]; no grad, micro-batch by
        micro-batch. None when off or β = 0 (a no-op)."""
        cfg = self.cfg
        if not cfg.kl_in_reward or beta == 0.0 or not bool(known.any()):
            return None
        idx = known.nonzero().squeeze(1)  # (J,)
        judged = [flat[i] for i in idx.tolist()]
        b = self.tensors(
            [items[int(group[i])] for i in idx.tolist()], judged, torch.zeros(len(judged))
        )
        out = torch.zeros(len(flat), dtype=torch.float64)  # (N,)
        with torch.no_grad():
            for sel in part_rows(b, cfg.micro_batch_size, cfg.micro_batch_tokens, cfg.share_prefix):
                part = rows(b, sel, cut_prompts=cfg.micro_batch_tokens > 0)
                k1 = sequence_k1(self.logp(part)[0], self.ref_logp(part), part.comp_mask)  # (b,)
                out[idx[sel.cpu()]] = beta * k1.double().cpu()
        return out
