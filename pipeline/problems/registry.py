"""The family registry: which problem families exist, their levels, and level specs.

`FAMILIES` maps a family name to a module with `NAME`, `LEVELS` and `make(level, rng)` (and an
optional `VERIFIER`, default "math"); add a family by importing its module and listing it there.
`OPT_IN_FAMILIES` ("code") are accepted only when named (`--family code`, a mix file): they stay
out of every default mix, curation and evaluation, which iterate over `FAMILIES`. So do the
reasoning-gym families `rg:<dataset>` (pipeline/problems/rg.py, the optional `gym` extra), which
`get_family` builds on demand. `parse_levels` reads a level spec ("3", "1-5", "1,3,5", "all")
against a family's levels.

Test: `.venv/bin/pytest tests/problems -q`.
"""

from __future__ import annotations

from pipeline.core.errors import SieveError
from pipeline.problems import arith, code, linear, modular, rg, word
from pipeline.problems.base import Family, check_level

FAMILIES: dict[str, Family] = {m.NAME: m for m in (arith, linear, modular, word)}
# The tiny character model cannot write code: the code family is never in a default.
OPT_IN_FAMILIES: dict[str, Family] = {code.NAME: code}


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
