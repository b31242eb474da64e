"""Selection: group statistics, the Beta posterior, the selection rules and the curriculum.

Pure functions over Polars frames — the curate flow samples and writes the ledger; this package
only decides. `stats` (Polars twins of the ledger views, the Beta posterior, the informative
rule on rewards), `config` (`CurateConfig`), `rules` (prefilter, history prior, screen,
per-prompt G), `curriculum` (the two-stage curriculum), `sqlexpr` / `sql_macros` (the ledger's
macros rendered from the same formulas).
Test: `.venv/bin/pytest tests/selection tests/grpo_core/test_zero_variance.py
tests/store/test_sql_macros.py -q`.
"""

from pipeline.selection.config import (
    TINY_CURATE,
    CurateConfig,
    check_samplable,
    load_curate_config,
)
from pipeline.selection.curriculum import ITEM_SCHEMA, build_curriculum
from pipeline.selection.rules import (
    REASONS,
    REJECTION_SCHEMA,
    Screened,
    allocate_candidates,
    group_size_for,
    group_sizes_for,
    history_prior,
    prefilter,
    screen_survivors,
    stable_uniform,
    stable_uniforms,
)
from pipeline.selection.stats import beta_quantile, group_stats, posterior, reward_informative

__all__ = [
    "ITEM_SCHEMA",
    "REASONS",
    "REJECTION_SCHEMA",
    "TINY_CURATE",
    "CurateConfig",
    "Screened",
    "allocate_candidates",
    "beta_quantile",
    "build_curriculum",
    "check_samplable",
    "group_size_for",
    "group_sizes_for",
    "group_stats",
    "history_prior",
    "load_curate_config",
    "posterior",
    "prefilter",
    "reward_informative",
    "screen_survivors",
    "stable_uniform",
    "stable_uniforms",
]
