"""Crafted selection frames: counts of binary groups with the reward spread they imply."""

from __future__ import annotations

import polars as pl


def binary_spread(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (n, k) plus reward_min / reward_max of a 0/1 group with k of n right (null at
    n = 0), as `group_stats` gives them when reward = correctness."""
    n, k = pl.col("n"), pl.col("k")
    return frame.with_columns(
        pl.when(n > 0).then(pl.when(k < n).then(0.0).otherwise(1.0)).alias("reward_min"),
        pl.when(n > 0).then(pl.when(k > 0).then(1.0).otherwise(0.0)).alias("reward_max"),
    )
