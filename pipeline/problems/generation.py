"""Seeded generation of problem frames: one family over levels, a mix, or explicit cells.

`generate` makes n problems of one family spread over levels, `generate_mix` over several
families, `generate_cells` a count per (family, level); all are deterministic for a seed (except
`created_at`) and return `PROBLEM_SCHEMA` frames. Each (seed, family, level) has its own random
stream, so the first k problems of a level are the same whatever n is. External problem files
are read by `pipeline.problems.ingest`.

Test: `.venv/bin/pytest tests/problems -q`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import polars as pl

from grpo_core.seeds import derive_seed
from pipeline.core.errors import SieveError
from pipeline.problems.base import (
    Family,
    Row,
    build_frame,
    check_heldout_pct,
    check_level,
    make_row,
    params_json,
)
from pipeline.problems.registry import FAMILIES, get_family, parse_levels

# Give up on a level after this many duplicates in a row (its space is nearly exhausted) ...
MAX_MISSES_IN_A_ROW = 1000
# ... or after this many draws per problem asked for.
MAX_DRAWS_PER_PROBLEM = 20


def level_seed(seed: int, family: str, level: int) -> int:
    """A stable 64-bit seed for (seed, family, level); never Python's salted `hash()`."""
    return derive_seed(seed, family, level, bits=64, sep="\x1f")


def spread(n: int, parts: int) -> list[int]:
    """n split into `parts` near-equal shares, the remainder going to the first shares."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _level_rows(
    family: Family, level: int, share: int, seed: int, heldout_pct: float, seen: set[str]
) -> list[Row]:
    """Up to `share` new problems of one level; fewer if the level's space runs dry."""
    rng = random.Random(level_seed(seed, family.NAME, level))
    verifier: str = getattr(family, "VERIFIER", "math")
    source = f"gen:{family.NAME}"
    rows: list[Row] = []
    misses = draws = 0
    max_draws = MAX_DRAWS_PER_PROBLEM * share + MAX_MISSES_IN_A_ROW
    while len(rows) < share and misses < MAX_MISSES_IN_A_ROW and draws < max_draws:
        draws += 1
        question, answer, params = family.make(level, rng)
        row = make_row(
            source=source,
            family=family.NAME,
            level=level,
            params=params_json(params),
            question=question,
            answer=answer,
            verifier=verifier,
            heldout_pct=heldout_pct,
        )
        if row[0] in seen:
            misses += 1
            continue
        seen.add(row[0])
        rows.append(row)
        misses = 0
    return rows


def _checked_levels(family: str, levels: Sequence[int]) -> list[int]:
    """`levels` without repeats (order kept), each valid for `family`."""
    valid = get_family(family).LEVELS
    unique = list(dict.fromkeys(levels))
    if not unique:
        raise SieveError(f"no levels given for {family}; valid: {', '.join(map(str, valid))}")
    for level in unique:
        check_level(family, valid, level)
    return unique


def _generate_rows(
    family: str, levels: Sequence[int], n: int, seed: int, heldout_pct: float, seen: set[str]
) -> list[Row]:
    fam = get_family(family)
    ordered = _checked_levels(family, levels)
    rows: list[Row] = []
    for level, share in zip(ordered, spread(n, len(ordered)), strict=True):
        if share > 0:
            rows.extend(_level_rows(fam, level, share, seed, heldout_pct, seen))
    return rows


def _check_n(n: int) -> None:
    if n <= 0:
        raise SieveError(f"n must be a positive number of problems, got {n}")


def generate(
    family: str, levels: Sequence[int], n: int, seed: int, heldout_pct: float = 10.0
) -> pl.DataFrame:
    """n problems of `family` spread evenly over `levels`, unique by id, deterministic for seed.

    A level whose space is too small for its share gives fewer problems (never loops forever).
    """
    _check_n(n)
    check_heldout_pct(heldout_pct)
    return build_frame(_generate_rows(family, levels, n, seed, heldout_pct, set()))


def generate_mix(
    spec: Mapping[str, Sequence[int] | str] | None,
    n: int,
    seed: int,
    heldout_pct: float = 10.0,
) -> pl.DataFrame:
    """n problems spread evenly over families (then over each family's levels).

    `spec` maps family -> levels (a list, or a level spec such as "1-5" or "all");
    None means every family at every level.
    """
    _check_n(n)
    chosen = spec if spec is not None else {name: "all" for name in FAMILIES}
    plan = _mix_plan(chosen)
    counts = [
        (family, level, count)
        for (family, levels), share in zip(plan, spread(n, len(plan)), strict=True)
        for level, count in zip(levels, spread(share, len(levels)), strict=True)
    ]
    return generate_cells(counts, seed, heldout_pct)


def _mix_plan(spec: Mapping[str, Sequence[int] | str]) -> list[tuple[str, list[int]]]:
    """(family, its checked levels) for each family of a mix, in order."""
    if not spec:
        raise SieveError(f"no families given; valid: {', '.join(FAMILIES)}")
    plan = []
    for family, levels in spec.items():
        wanted = parse_levels(levels, family) if isinstance(levels, str) else levels
        plan.append((family, _checked_levels(family, wanted)))
    return plan


def mix_cells(spec: Mapping[str, Sequence[int] | str]) -> list[tuple[str, int, float]]:
    """(family, level, share) of every cell of a mix, in generation order; shares sum to 1.

    The share is what `generate_mix` gives the cell: families equally, then levels equally.
    """
    plan = _mix_plan(spec)
    return [(f, lv, 1.0 / (len(plan) * len(levels))) for f, levels in plan for lv in levels]


def generate_cells(
    counts: Sequence[tuple[str, int, int]], seed: int, heldout_pct: float = 10.0
) -> pl.DataFrame:
    """`count` problems of each (family, level, count) cell, unique by id, deterministic for seed.

    A cell draws from the same seeded stream as in `generate_mix`, so its first problems are the
    same whatever the other cells ask for.
    """
    check_heldout_pct(heldout_pct)
    seen: set[str] = set()
    rows: list[Row] = []
    for family, level, count in counts:
        if count > 0:
            rows.extend(_level_rows(get_family(family), level, count, seed, heldout_pct, seen))
    return build_frame(rows)
