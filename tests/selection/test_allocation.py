"""Candidate allocation over family × level cells from the ledger's history (pure rule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from pipeline.problems import mix_cells, spread
from pipeline.selection.config import CurateConfig
from pipeline.selection.rules import allocate_candidates

CELLS = mix_cells({"arith": "1-4"})
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def history(rows: list[tuple[int, str, int, int, int]]) -> pl.DataFrame:
    """rows: (level, revision, seen, informative, day) per cell, as `history_prior` rows: one
    per problem × revision, `informative` of the `seen` problems with a group that disagreed."""
    out = []
    for lv, rev, seen, informative, day in rows:
        for i in range(seen):
            pid = f"{lv}-{rev}-{i}"
            out.append((pid, "arith", lv, rev, 8, i >= informative, T0 + timedelta(days=day)))
    return pl.DataFrame(
        out,
        schema={
            "problem_id": pl.Utf8,
            "family": pl.Utf8,
            "level": pl.Int32,
            "model_revision": pl.Utf8,
            "n": pl.Int64,
            "zero_variance": pl.Boolean,
            "last_seen": pl.Datetime("us", "UTC"),
        },
        orient="row",
    )


def counts(frame: pl.DataFrame | None) -> list[int]:
    assert frame is not None
    return frame["candidates"].to_list()


def test_no_history_means_the_even_spread() -> None:
    assert allocate_candidates(CELLS, history([]), 100, CurateConfig()) is None
    other_mix = history([(9, "r1", 50, 10, 0)])  # a cell outside the mix is not history of it
    assert allocate_candidates(CELLS, other_mix, 100, CurateConfig()) is None


def test_equal_yields_give_the_even_spread() -> None:
    h = history([(lv, "r1", 40, 20, 0) for lv in (1, 2, 3, 4)])
    assert counts(allocate_candidates(CELLS, h, 102, CurateConfig())) == spread(102, 4)


def test_informative_cells_get_more_and_flat_cells_keep_the_explored_share() -> None:
    h = history([(1, "r1", 40, 0, 0), (2, "r1", 40, 36, 0), (3, "r1", 40, 20, 0)])
    h = pl.concat([h, history([(4, "r1", 40, 0, 0)])])
    got = counts(allocate_candidates(CELLS, h, 1000, CurateConfig(explore_share=0.2)))
    assert got[1] > got[2] > 250 > max(got[0], got[3])
    assert abs(got[0] - got[3]) <= 1  # equal evidence, equal share (up to rounding)
    assert got[0] >= 0.2 * 1000 / 4  # the explored share stays even
    none_explored = counts(allocate_candidates(CELLS, h, 1000, CurateConfig(explore_share=0.0)))
    assert none_explored[0] < got[0] and none_explored[1] > got[1]
    all_explored = counts(allocate_candidates(CELLS, h, 1000, CurateConfig(explore_share=1.0)))
    assert all_explored == spread(1000, 4)


def test_only_recent_revisions_count() -> None:
    old_says_flat = [(lv, "old", 400, 0, 0) for lv in (1, 2, 3, 4)]
    recent = [(2, "new", 40, 30, 5), (3, "newer", 40, 30, 6)]
    h = history(old_says_flat + recent)
    got = counts(allocate_candidates(CELLS, h, 1000, CurateConfig(history_revisions=2)))
    # levels 1 and 4 were not seen by the two recent revisions: the mix-wide yield, not "flat"
    with_old = counts(allocate_candidates(CELLS, h, 1000, CurateConfig(history_revisions=3)))
    assert with_old[0] < got[0] and with_old[3] < got[3]


@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 60), st.integers(0, 60)), max_size=8),
    st.integers(1, 5000),
    st.floats(0.0, 1.0),
)
def test_counts_always_sum_to_n(rows: list[tuple[int, int, int]], n: int, explore: float) -> None:
    h = history([(lv, "r1", max(s, i), min(s, i), 0) for lv, s, i in rows])
    got = allocate_candidates(CELLS, h, n, CurateConfig(explore_share=explore))
    if got is None:
        assert all(max(s, i) == 0 for _, s, i in rows)
        return
    assert sum(counts(got)) == n and min(counts(got)) >= 0
