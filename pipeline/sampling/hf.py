"""The `hf` backend: batched sampling with `transformers` on CPU (or CUDA when present).

Inputs are built on the device of the model's parameters, read at each call: a sampler given a
model object (the trainer's, which `pipeline/jobs/train/trainee.py` may swap for its LoRA-wrapped
one) samples wherever that model lives; a folder is loaded on `device` (default: CUDA when
available).

Each prompt is encoded once and its prefill (KV cache) computed once, then expanded to its n
samples; rows are sorted by prompt length and cut into micro-batches that fit two budgets: the
padded size rows x (prompt + max_new_tokens) bounds the KV cache (`token_budget`), and
rows x vocab bounds one decode step's logits (`logit_budget`, 2^24 floats: ~340 rows for a
49k-vocab model, which the per-step temperature / top-k / top-p copies hold a few times over).
Prompts are left-padded and decoded by `generate` with the KV cache. A micro-batch's random
stream is seeded from (params.seed, micro-batch index), so the same call with the same seed gives
the same completions.

The log-probability reported is that of the sampled tokens under the model's own (untempered)
distribution, what a teacher-forced forward over prompt + completion gives. It is gathered step
by step (`SampledLogprobs`, a logits processor that runs before generate's warpers), so memory is
one step's rows x vocab, not every step's: keeping all logits (`output_logits=True`) and
stacking them peaked at 15.9 GB RSS for 32 prompts x 8 x 128 tokens of a 135 M model
(benchmarks/sampling.py measures both).

Test: `pytest tests/sampling/test_hf.py`; speed and memory: `python benchmarks/sampling.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import (
    DynamicCache,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from grpo_core.logprobs import cache_kwarg
from grpo_core.seeds import derive_seed
from pipeline.core.errors import SieveError
from pipeline.policy.model import load_policy
from pipeline.sampling.base import (
    Completion,
    FinishReason,
    SamplingParams,
    check_n,
    cut_at_stop,
)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class HFSampler:
    """Samples from a local causal-LM folder (or an in-memory model) with `generate`."""

    backend = "hf"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: PreTrainedModel | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        device: str | torch.device | None = None,
        token_budget: int = 32_768,
        logit_budget: int = 1 << 24,
        model_name: str | None = None,
        share_prefill: bool = True,
    ):
        if model is None:
            if model_path is None:
                raise ValueError("give model_path or model + tokenizer")
            target = torch.device(device) if device is not None else default_device()
            model, tokenizer = load_policy(model_path, target)
        elif device is not None and not _same_device(torch.device(device), _device_of(model)):
            raise ValueError(
                f"the model is on {_device_of(model)} but device={device!r} was asked; "
                "move the model first (or leave device unset to sample where it is)"
            )
        if tokenizer is None:
            raise ValueError("an in-memory model needs its tokenizer")
        self.model, self.tokenizer = model, tokenizer
        self.token_budget = token_budget  # rows x (prompt + new tokens): bounds the KV cache
        self.logit_budget = logit_budget  # rows x vocab: bounds one decode step's logits
        self.vocab = int(model.config.vocab_size)
        self.share_prefill = share_prefill
        self.model_name = model_name or str(model_path or "in-memory")
        self.context = int(getattr(model.config, "max_position_embeddings", 1 << 30))

    @property
    def device(self) -> torch.device:
        """Where inputs are built: the model's own device, whatever model is set now."""
        return _device_of(self.model)

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        check_n(n)
        encoded = [self.tokenizer(p)["input_ids"] for p in prompts]
        self._check_lengths(encoded, params.max_new_tokens)
        order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
        results: list[list[Completion]] = [[] for _ in prompts]
        for index, chunk in enumerate(self._micro_batches(order, encoded, n, params)):
            rows = self._generate([encoded[i] for i in chunk], n, params, index)
            for j, i in enumerate(chunk):
                results[i] = rows[j * n : (j + 1) * n]
        return results

    def _check_lengths(self, encoded: list[list[int]], max_new: int) -> None:
        for i, ids in enumerate(encoded):
            if len(ids) + max_new > self.context:
                raise SieveError(
                    f"prompt {i} has {len(ids)} tokens; with max_new_tokens={max_new} it exceeds "
                    f"the model's context of {self.context} tokens"
                )

    def _micro_batches(
        self, order: list[int], encoded: list[list[int]], n: int, params: SamplingParams
    ) -> list[list[int]]:
        """Consecutive prompts (by length) whose n rows fit both budgets together."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:  # lengths ascend, so the last prompt sets the padded width
            width = len(encoded[i]) + params.max_new_tokens
            rows = (len(current) + 1) * n
            over = rows * width > self.token_budget or rows * self.vocab > self.logit_budget
            if current and over:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    @torch.no_grad()
    def _generate(
        self, prompts: list[list[int]], n: int, params: SamplingParams, index: int
    ) -> list[Completion]:
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)  # (P, T) left-padded
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(prompt)
            mask[row, width - len(prompt) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        cache = self._shared_prefill(ids, mask, n)
        ids = ids.repeat_interleave(n, dim=0)  # (P*n, T)
        mask = mask.repeat_interleave(n, dim=0)
        torch.manual_seed(derive_seed(params.seed, "micro-batch", index))
        logprobs = SampledLogprobs()
        out = self.model.generate(  # type: ignore[operator]
            input_ids=ids,
            attention_mask=mask,
            **cache,
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=pad,
            logits_processor=LogitsProcessorList([logprobs]),
            return_dict_in_generate=False,  # token ids only: no per-step logits kept
            **_decoding(params),
        )
        new = out[:, width:]  # (P*n, L)
        return self._completions(new, logprobs.result(new), params)

    def _shared_prefill(self, ids: torch.Tensor, mask: torch.Tensor, n: int) -> dict[str, object]:
        """Run each prompt (all but its last token) once and copy its KV cache to its n rows.

        Without this every one of a prompt's n rows recomputes the same prefill; with it the
        prompt is computed once. Greedy outputs are identical either way (tests/sampling).
        """
        if n == 1 or ids.shape[1] < 2 or not self.share_prefill:
            return {}
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (P, T) left padding
        cache = DynamicCache(config=self.model.config)
        self.model(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=positions[:, :-1],
            **{cache_kwarg(self.model): cache},  # filled in place
            use_cache=True,
            logits_to_keep=1,  # only the cache is wanted, not (P, T, V) logits
        )
        cache.batch_repeat_interleave(n)  # (P*n, ...) per layer
        return {cache_kwarg(self.model): cache}

    def _completions(
        self, tokens: torch.Tensor, token_lp: torch.Tensor, params: SamplingParams
    ) -> list[Completion]:
        """The rows of (R, L) sampled tokens as completions, cut at the first end-of-sequence.

        One pass over the batch: end positions, kept ids and summed log-probs are computed on
        the whole tensor and the texts decoded in one tokenizer call. Stop strings, when given,
        are applied per row after decoding.
        """
        eos = self.tokenizer.eos_token_id
        hit = tokens == eos  # (R, L)
        ended = hit.any(dim=1)  # (R,)
        ends = torch.where(ended, hit.int().argmax(dim=1), tokens.shape[1])  # (R,)
        steps = torch.arange(tokens.shape[1], device=tokens.device)  # (L,)
        keep = steps[None, :] < ends[:, None]  # (R, L)
        sums = torch.where(keep, token_lp, 0.0).sum(dim=1)  # (R,)
        rows = [ids[:end] for ids, end in zip(tokens.tolist(), ends.tolist(), strict=True)]
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True)
        out = []
        for r, (ids, text, stopped_at_eos, lp) in enumerate(
            zip(rows, texts, ended.tolist(), sums.tolist(), strict=True)
        ):
            text, stopped = cut_at_stop(str(text), params.stop)
            if stopped:  # keep the sampled tokens that make up the kept text
                ids = ids[: self._tokens_within(ids, text)]
                lp = float(token_lp[r, : len(ids)].sum())
            reason: FinishReason = "stop" if stopped_at_eos or stopped else "length"
            out.append(Completion(text, tuple(ids), reason, logprob=lp))
        return out

    def _tokens_within(self, ids: list[int], text: str) -> int:
        """How many leading sampled tokens decode to a prefix of `text` (the part a stop string
        left). The sampled ids are kept, not a re-tokenisation of the text: those are the tokens
        the policy produced and their log-probs are the ones reported and trained on."""
        k = 0
        while k < len(ids):
            piece = str(self.tokenizer.decode(ids[: k + 1], skip_special_tokens=True))
            if not text.startswith(piece):
                break
            k += 1
        return k


class SampledLogprobs(LogitsProcessor):
    """Collects each sampled token's log-prob under the raw logits, one decode step at a time.

    `generate` runs custom processors before its temperature / top-k / top-p warpers
    (transformers 5.x, `_get_logits_processor`), so `scores` here is the untempered distribution.
    It does run after generate's own non-sampling processors (repetition penalty, min length...);
    Sieve's `SamplingParams` enable none, but a model folder's generation_config could.
    The token drawn from step t is known at step t + 1 (the last column of `input_ids`), so one
    step's log-softmax (rows x vocab) is kept, never all steps' logits.
    """

    def __init__(self) -> None:
        self.steps: list[torch.Tensor] = []  # (R,) per generated token
        self.last: torch.Tensor | None = None  # (R, V) log-softmax of the latest step

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.last is not None:
            self.steps.append(self.last.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def result(self, new: torch.Tensor) -> torch.Tensor:
        """(R, L) log-probs of the L new tokens (the last one is gathered here)."""
        if self.last is not None and len(self.steps) < new.shape[1]:
            self.steps.append(self.last.gather(-1, new[:, -1:]).squeeze(-1))
        self.last = None
        return torch.stack(self.steps[: new.shape[1]], dim=1)


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _same_device(a: torch.device, b: torch.device) -> bool:
    """cuda and cuda:0 are the same device when the current device is 0."""
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return (a.index if a.index is not None else current) == (
        b.index if b.index is not None else current
    )


def _decoding(params: SamplingParams) -> dict[str, object]:
    if params.greedy:
        return {"do_sample": False}
    return {
        "do_sample": True,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k or None,
    }
