"""Problem families and seeded generation of verifiable short-answer problems.

Re-exports only; the logic lives in named modules: the family registry and level specs in
`registry.py`, seeded generation in `generation.py`, ids, the held-out split and the frame schema
in `base.py`, one module per family (`arith`, `linear`, `modular`, `word`, `code`, `rg`), mixes
from TOML in `mix.py` and external files in `ingest.py` (formats in `readers.py` and `tables.py`,
column mapping in `columns.py`, invisible text and question identity in `text.py`, duplicates
and conflicts in `duplicates.py`).
Test: `.venv/bin/pytest tests/problems -q`.
"""

from __future__ import annotations

from pipeline.problems import arith, code, linear, modular, rg, word
from pipeline.problems.base import PROBLEM_SCHEMA, problem_id, split_for
from pipeline.problems.generation import (
    MAX_DRAWS_PER_PROBLEM,
    MAX_MISSES_IN_A_ROW,
    generate,
    generate_cells,
    generate_mix,
    level_seed,
    mix_cells,
    spread,
)
from pipeline.problems.registry import (
    FAMILIES,
    OPT_IN_FAMILIES,
    family_levels,
    get_family,
    parse_levels,
)

__all__ = [
    "FAMILIES",
    "MAX_DRAWS_PER_PROBLEM",
    "MAX_MISSES_IN_A_ROW",
    "OPT_IN_FAMILIES",
    "PROBLEM_SCHEMA",
    "arith",
    "code",
    "family_levels",
    "generate",
    "generate_cells",
    "generate_mix",
    "get_family",
    "level_seed",
    "linear",
    "mix_cells",
    "modular",
    "parse_levels",
    "problem_id",
    "rg",
    "split_for",
    "spread",
    "word",
]
