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
