"""`grpo_core.seeds.derive_seed`: stable, distinct for distinct inputs, and the values curation
and problem generation had before it existed (so curated data and problem ids did not move)."""

from __future__ import annotations

import hashlib

import pytest

from grpo_core.seeds import derive_seed


def test_the_seed_is_the_leading_bits_of_the_sha256_of_the_joined_parts() -> None:
    digest = hashlib.sha256(b"3|screen-abc|4").hexdigest()
    assert derive_seed(3, "screen-abc", 4) == int(digest[:8], 16)
    assert derive_seed(3, "screen-abc", 4, bits=64) == int(digest[:16], 16)
    raw = hashlib.sha256(b"5\x1farith\x1f3").digest()
    assert derive_seed(5, "arith", 3, bits=64, sep="\x1f") == int.from_bytes(raw[:8], "big")


def test_distinct_steps_and_sizes_get_distinct_seeds() -> None:
    # unlike seed + step + g, where step 0 at G = 16 and step 8 at G = 8 both give seed + 16
    assert derive_seed(0, "step", 0, 16) != derive_seed(0, "step", 8, 8)
    seeds = {derive_seed(0, "step", s, g) for s in range(200) for g in (4, 8, 16, 32)}
    assert len(seeds) == 800


def test_order_and_separator_matter() -> None:
    assert derive_seed(1, 2) != derive_seed(2, 1)
    assert derive_seed("a|b") == derive_seed("a", "b")  # the separator is part of the text
    assert derive_seed("a|b", sep="\x1f") != derive_seed("a", "b", sep="\x1f")


@pytest.mark.parametrize("bits", [0, 3, 260])
def test_bad_widths_are_refused(bits: int) -> None:
    with pytest.raises(ValueError, match="bits"):
        derive_seed(1, bits=bits)


def test_seeded_draws_from_the_seed_and_leaves_the_global_generator_alone() -> None:
    import torch

    from grpo_core.seeds import seeded

    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    with seeded(7, torch.device("cpu")):
        inside = torch.rand(3)
    assert torch.equal(torch.rand(3), expected_next)  # as if nothing had been drawn
    torch.manual_seed(7)
    assert torch.equal(inside, torch.rand(3))


def test_the_trainer_sets_no_process_wide_torch_state() -> None:
    """Neither the global seed nor deterministic algorithms change when a Trainer is built
    (with LoRA, whose initial weights are drawn); the caller's `seed_torch` sets both."""
    import torch

    from grpo_core.config import GRPOConfig
    from grpo_core.seeds import seed_torch
    from grpo_core.trainer import Hooks, Trainer
    from tests.grpo_core.conftest import ToySampler, ToyTokenizer, first_letter_reward, toy_model

    was = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(False)
        cfg = GRPOConfig(reference="lora_base", lora_rank=2, beta=0.0, deterministic=True)

        def build(model: torch.nn.Module) -> Trainer:
            tok = ToyTokenizer()
            sampler = ToySampler(model, tok)
            return Trainer(model, tok, sampler, first_letter_reward, lambda s: [], cfg,
                           hooks=Hooks(warning=lambda m: None))  # fmt: skip

        first, second = toy_model(1), toy_model(1)  # (seeds the global generator itself)
        torch.manual_seed(99)
        state = torch.get_rng_state()
        lora = [p.detach().clone() for p in build(first).params]
        assert torch.equal(torch.get_rng_state(), state)
        assert not torch.are_deterministic_algorithms_enabled()
        torch.manual_seed(5)  # another global state: the same LoRA start (drawn from cfg.seed)
        assert all(torch.equal(a, b) for a, b in zip(lora, build(second).params, strict=True))
        seed_torch(cfg.seed, cfg.deterministic)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.equal(torch.get_rng_state(), torch.manual_seed(cfg.seed).get_state())
    finally:
        torch.use_deterministic_algorithms(was)
