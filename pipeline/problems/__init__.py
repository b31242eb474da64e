"""Problem families and seeded generation of verifiable short-answer problems.

`FAMILIES` maps a family name to a module with `NAME`, `LEVELS` and `make(level, rng)` (and an
optional `VERIFIER`, default "math"); add a family by importing its module and listing it there.
`OPT_IN_FAMILIES` ("code") are generated only when named (`--family code`, a mix file): they stay
out of every default mix, curation and evaluation, which iterate over `FAMILIES`. So do the
reasoning-gym families `rg:<dataset>` (pipeline/problems/rg.py, the optional `gym` extra), made
on demand by `get_family`.
`generate` makes n problems of one family spread over levels, `generate_mix` over several
families; both are deterministic for a seed (except `created_at`) and return `PROBLEM_SCHEMA`
frames. Each (seed, family, level) has its own random stream, so the first k problems of a level
are the same whatever n is. External problem files are read by `pipeline.problems.ingest`.
Test: `.venv/bin/pytest tests/problems -q`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import polars as pl

from grpo_core.seeds import derive_seed
from pipeline.errors import SieveError
from pipeline.problems import arith, code, linear, modular, rg, word
from pipeline.problems.base import (
    PROBLEM_SCHEMA,
    Family,
    Row,
    build_frame,
    check_heldout_pct,
    check_level,
    make_row,
    params_json,
    problem_id,
    split_for,
)

__all__ = [
    "FAMILIES",
    "OPT_IN_FAMILIES",
    "PROBLEM_SCHEMA",
    "family_levels",
    "generate",
    "generate_cells",
    "generate_mix",
    "mix_cells",
    "parse_levels",
    "problem_id",
    "split_for",
]

FAMILIES: dict[str, Family] = {m.NAME: m for m in (arith, linear, modular, word)}
# The tiny character model cannot write code: the code family is never in a default.
OPT_IN_FAMILIES: dict[str, Family] = {code.NAME: code}

# Give up on a level after this many duplicates in a row (its space is nearly exhausted) ...
MAX_MISSES_IN_A_ROW = 1000
# ... or after this many draws per problem asked for.
MAX_DRAWS_PER_PROBLEM = 20


def get_family(family: str) -> Family:
    """The family registered as `family`; `SieveError` listing the valid names otherwise."""
    if rg.is_rg(family):
        return rg.family(family)
    found = FAMILIES.get(family) or OPT_IN_FAMILIES.get(family)
    if found is None:  # opt-in families are accepted but not advertised
        raise SieveError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    return found


def family_levels(family: str) -> list[int]:
    """The levels of `family`, ascending."""
    return sorted(get_family(family).LEVELS)


def _parse_part(part: str, spec: str, family: str, valid: dict[int, str]) -> list[int]:
    """One comma-separated piece of a level spec: `3` or `1-5` (its ends checked against the
    family's levels before the range is listed, so `1-99999999999` fails at once)."""
    low, sep, high = part.partition("-")
    try:
        start = int(low)
        end = int(high) if sep else start
    except ValueError:
        raise SieveError(f"invalid level spec {spec!r}; use e.g. 3, 1-5, 1,3,5 or all") from None
    if end < start:
        raise SieveError(f"invalid level range {part!r} in {spec!r}; write it low-high")
    check_level(family, valid, start)
    check_level(family, valid, end)
    return list(range(start, end + 1))


def parse_levels(spec: str, family: str) -> list[int]:
    """Levels from text: "3", "1-5", "1,3,5" (pieces may mix), or "all"; sorted, unique."""
    valid = get_family(family).LEVELS
    text = spec.strip().lower()
    if text == "all":
        return sorted(valid)
    parts = [part.strip() for part in text.split(",")]
    levels = sorted({level for part in parts for level in _parse_part(part, spec, family, valid)})
    for level in levels:
        check_level(family, valid, level)
    return levels


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
