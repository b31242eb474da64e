"""Registry, level specs and seeded generation in `pipeline.problems`.

Run: `.venv/bin/pytest tests/problems/test_generate.py -q`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.errors import SieveError
from pipeline.problems import (
    FAMILIES,
    PROBLEM_SCHEMA,
    family_levels,
    generate,
    generate_mix,
    parse_levels,
    split_for,
)
from pipeline.problems.base import problem_id


@st.composite
def family_and_levels(draw: st.DrawFn) -> tuple[str, list[int]]:
    family = draw(st.sampled_from(sorted(FAMILIES)))
    levels = draw(st.lists(st.sampled_from(family_levels(family)), min_size=1, max_size=4))
    return family, levels


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(
    spec=family_and_levels(),
    n=st.integers(1, 60),
    seed=st.integers(-(2**40), 2**40),
    pct=st.floats(0, 100),
)
def test_generate_is_deterministic_unique_and_split_by_id(
    spec: tuple[str, list[int]], n: int, seed: int, pct: float
) -> None:
    family, levels = spec
    first = generate(family, levels, n, seed, heldout_pct=pct)
    second = generate(family, levels, n, seed, heldout_pct=pct)
    assert first.schema == pl.Schema(PROBLEM_SCHEMA)
    assert first.drop("created_at").equals(second.drop("created_at"))
    assert first["problem_id"].n_unique() == first.height
    assert 0 < first.height <= n
    assert set(first["level"]) <= set(levels)
    assert set(first["source"]) == {f"gen:{family}"}
    for row in first.iter_rows(named=True):
        assert row["problem_id"] == problem_id(row["question"], row["answer"], row["verifier"])
        assert row["split"] == split_for(row["problem_id"], pct)


def test_same_problems_in_another_process_whatever_its_hash_seed() -> None:
    script = (
        "from pipeline.problems import generate_mix\n"
        "print(','.join(generate_mix(None, 40, seed=9)['problem_id']))"
    )
    here = ",".join(generate_mix(None, 40, seed=9)["problem_id"])
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == here


def test_different_seeds_differ_but_shared_problems_share_their_split() -> None:
    a = generate("arith", [1, 2], 200, seed=1)
    b = generate("arith", [1, 2], 200, seed=2)
    assert not a.drop("created_at").equals(b.drop("created_at"))
    both = a.join(b, on="problem_id")
    assert both.height > 0  # level 1 has only 100 problems
    assert (both["split"] == both["split_right"]).all()


def test_about_ten_percent_held_out() -> None:
    frame = generate_mix(None, 20_000, seed=7)
    share = (frame["split"] == "heldout").mean()
    assert isinstance(share, float)
    assert 0.08 < share < 0.12


def test_levels_share_n_evenly_remainder_first() -> None:
    frame = generate("linear", [3, 4, 5], 11, seed=0)
    counts = dict(frame.group_by("level").len().iter_rows())
    assert counts == {3: 4, 4: 4, 5: 3}
    assert frame["level"].to_list() == [3] * 4 + [4] * 4 + [5] * 3


def test_prefix_is_stable_when_n_grows() -> None:
    small = generate("modular", [6], 20, seed=3)
    large = generate("modular", [6], 50, seed=3)
    assert small["question"].to_list() == large["question"].to_list()[:20]


def test_small_level_space_returns_fewer_without_looping() -> None:
    frame = generate("arith", [1], 1000, seed=0)
    assert frame.height == 100  # every a+b with one-digit a and b, once


def test_generate_mix_defaults_to_every_family_and_level() -> None:
    frame = generate_mix(None, 400, seed=5)
    assert frame.height == 400
    assert set(frame["family"]) == set(FAMILIES)
    for family in FAMILIES:
        levels = set(frame.filter(pl.col("family") == family)["level"])
        assert levels == set(family_levels(family))
    again = generate_mix(None, 400, seed=5)
    assert frame.drop("created_at").equals(again.drop("created_at"))


def test_generate_mix_with_spec() -> None:
    frame = generate_mix({"arith": [1, 2], "word": "5-6"}, 9, seed=1)
    assert dict(frame.group_by("family").len().iter_rows()) == {"arith": 5, "word": 4}
    assert set(frame.filter(pl.col("family") == "word")["level"]) == {5, 6}


def test_hundred_thousand_arith_problems_are_fast() -> None:
    start = time.perf_counter()
    frame = generate("arith", [4, 5, 7, 8, 9, 10], 100_000, seed=0)  # levels with room for 100k
    elapsed = time.perf_counter() - start
    assert frame.height == 100_000
    assert elapsed < 30  # a few seconds normally; loose for busy machines


@pytest.mark.parametrize(
    ("spec", "levels"),
    [("3", [3]), ("1-5", [1, 2, 3, 4, 5]), ("1,3,5", [1, 3, 5]), (" 5, 1-2 ", [1, 2, 5])],
)
def test_parse_levels(spec: str, levels: list[int]) -> None:
    assert parse_levels(spec, "arith") == levels


def test_parse_levels_all() -> None:
    for family in FAMILIES:
        assert parse_levels("all", family) == family_levels(family)


def test_unknown_family_lists_valid_ones() -> None:
    for call in (
        lambda: parse_levels("1", "foo"),
        lambda: family_levels("foo"),
        lambda: generate("foo", [1], 5, seed=0),
        lambda: generate_mix({"foo": [1]}, 5, seed=0),
    ):
        with pytest.raises(SieveError) as info:
            call()
        assert str(info.value) == "unknown family 'foo'; valid: arith, linear, modular, word"


def test_unknown_level_lists_valid_ones() -> None:
    top = max(family_levels("arith"))
    with pytest.raises(SieveError, match=rf"^level 12 not in arith levels 1-{top}$"):
        parse_levels("12", "arith")
    with pytest.raises(SieveError, match=rf"^level 0 not in arith levels 1-{top}$"):
        generate("arith", [1, 0], 5, seed=0)
    with pytest.raises(SieveError, match="level 99 not in word levels"):
        generate_mix({"word": [99]}, 5, seed=0)


@pytest.mark.parametrize("spec", ["", "x", "1-", "-3", "1,,2", "1.5"])
def test_bad_level_spec(spec: str) -> None:
    with pytest.raises(SieveError, match="invalid level spec"):
        parse_levels(spec, "arith")


def test_reversed_range() -> None:
    with pytest.raises(SieveError, match="low-high"):
        parse_levels("5-1", "arith")


@pytest.mark.parametrize("n", [0, -3])
def test_n_must_be_positive(n: int) -> None:
    with pytest.raises(SieveError, match="n must be"):
        generate("arith", [1], n, seed=0)
    with pytest.raises(SieveError, match="n must be"):
        generate_mix(None, n, seed=0)


def test_no_levels() -> None:
    with pytest.raises(SieveError, match="no levels"):
        generate("arith", [], 5, seed=0)
