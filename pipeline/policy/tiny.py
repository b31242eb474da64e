"""The tiny policy's shape, apart from the model code so that settings naming it (the bootstrap's,
`pipeline.jobs.train.bootstrap_settings`) import neither torch nor transformers.

Test: `pytest tests/policy/test_model.py`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TinySize:
    """Shape of the tiny Llama; the defaults give ~0.9 M parameters."""

    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    max_position_embeddings: int = 320  # longest word problem + answer, in characters
