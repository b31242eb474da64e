"""reasoning-gym datasets as problem families: `rg:<dataset>` (the optional `gym` extra).

`pip install .[gym]` installs reasoning-gym (PyPI `reasoning-gym`, procedural generators with
their own `score_answer`). `family("rg:leg_counting")` is a `Family` like arith's: its levels
are Sieve's names for a dataset's difficulty settings (`LEVEL_CONFIGS`, one dict of
reasoning-gym config fields per level, easiest first, documented in `describe`), and
`make(level, rng)` draws one item. Only the datasets listed here have levels; any other
registered reasoning-gym dataset is refused with the list of those that do.

Reproducible source: every problem's `params` JSON holds `rg_version` (the installed package
version), `dataset`, `config` (the full keyword config, `seed` and `size` included) and `index`;
`item(params)` rebuilds it with `reasoning_gym.create_dataset(dataset, **config)[index]`, which
is what the "rg" verifier (pipeline/scoring/rg.py) scores against; that rebuilding lives in
pipeline/scoring/rg_source.py, which both sides import. The dataset seed is fixed
per config (`RG_SEED`); Sieve's seed picks the index through the family's random stream, so the
same Sieve seed gives the same problems, as for every family.

reasoning-gym is imported only when an `rg:` family is used (it takes seconds to import).
Test: `.venv/bin/pytest tests/problems/test_rg.py -q`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.core.errors import SieveError
from pipeline.scoring.rg_source import item, rg_version

PREFIX = "rg:"
VERIFIER = "rg"
RG_SEED = 0  # the dataset seed of every config; the index varies with Sieve's seed
RG_SIZE = 2**31 - 1  # the virtual dataset size: indices are drawn below it
MAX_EMPTY_DRAWS = 100  # items with an empty gold answer skipped in a row before giving up

# Level -> reasoning-gym config fields, easiest first. Level 1 of the arithmetic-style datasets
# is within reach of a 135 M model (single digits, one operation, one animal, short words).
LEVEL_CONFIGS: dict[str, dict[int, dict[str, Any]]] = {
    "basic_arithmetic": {
        1: {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1,
            "operators": ["+", "-"], "allow_parentheses": False, "allow_negation": False},
        2: {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2,
            "operators": ["+", "-", "*"], "allow_parentheses": False, "allow_negation": False},
        3: {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 2},
        4: {"min_terms": 2, "max_terms": 6, "min_digits": 1, "max_digits": 4},
    },
    "chain_sum": {
        1: {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        2: {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
        3: {"min_terms": 3, "max_terms": 5, "min_digits": 2, "max_digits": 3},
        4: {"min_terms": 4, "max_terms": 6, "min_digits": 3, "max_digits": 4},
    },
    "products": {
        1: {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        2: {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2},
        3: {"min_terms": 2, "max_terms": 2, "min_digits": 2, "max_digits": 3},
        4: {"min_terms": 3, "max_terms": 3, "min_digits": 1, "max_digits": 2},
    },
    "leg_counting": {
        1: {"min_animals": 1, "max_animals": 1, "min_instances": 1, "max_instances": 2},
        2: {"min_animals": 2, "max_animals": 2, "min_instances": 1, "max_instances": 4},
        3: {"min_animals": 3, "max_animals": 5, "min_instances": 1, "max_instances": 8},
        4: {"min_animals": 3, "max_animals": 10, "min_instances": 1, "max_instances": 15},
    },
    "gcd": {
        1: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 20},
        2: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 100},
        3: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 1000},
        4: {"min_numbers": 3, "max_numbers": 3, "min_value": 1, "max_value": 1000},
    },
    "lcm": {
        1: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 10},
        2: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 30},
        3: {"min_numbers": 2, "max_numbers": 2, "min_value": 1, "max_value": 100},
        4: {"min_numbers": 3, "max_numbers": 3, "min_value": 1, "max_value": 100},
    },
    "count_bits": {
        1: {"min_n": 1, "max_n": 15},
        2: {"min_n": 1, "max_n": 1000},
        3: {"min_n": 1, "max_n": 1_000_000},
        4: {"min_n": 1, "max_n": 2_147_483_647},
    },
    "prime_factorization": {
        1: {"min_value": 2, "max_value": 30},
        2: {"min_value": 2, "max_value": 100},
        3: {"min_value": 2, "max_value": 1000},
        4: {"min_value": 2, "max_value": 10_000},
    },
    "fraction_simplification": {
        1: {"min_value": 1, "max_value": 10, "min_factor": 1, "max_factor": 5, "styles": ["plain"]},
        2: {"min_value": 1, "max_value": 100, "min_factor": 1, "max_factor": 20,
            "styles": ["plain"]},
        3: {"min_value": 1, "max_value": 1000, "min_factor": 1, "max_factor": 100},
    },
    "simple_equations": {
        1: {"min_terms": 2, "max_terms": 2, "min_value": 1, "max_value": 10,
            "operators": ["+", "-"], "operators_weights": [0.5, 0.5]},
        2: {"min_terms": 2, "max_terms": 3, "min_value": 1, "max_value": 50,
            "operators": ["+", "-", "*"], "operators_weights": [0.4, 0.4, 0.2]},
        3: {"min_terms": 2, "max_terms": 4, "min_value": 1, "max_value": 100},
    },
    "base_conversion": {
        1: {"min_base": 2, "max_base": 10, "min_value": 1, "max_value": 31},
        2: {"min_base": 2, "max_base": 16, "min_value": 1, "max_value": 255},
        3: {"min_base": 2, "max_base": 16, "min_value": 1, "max_value": 1000},
        4: {"min_base": 2, "max_base": 36, "min_value": 1, "max_value": 10_000},
    },
    "letter_counting": {
        1: {"min_words": 5, "max_words": 7},
        2: {"min_words": 8, "max_words": 12},
        3: {"min_words": 13, "max_words": 19},
    },
    "spell_backward": {
        1: {"min_word_len": 3, "max_word_len": 4},
        2: {"min_word_len": 5, "max_word_len": 6},
        3: {"min_word_len": 7, "max_word_len": 8},
        4: {"min_word_len": 9, "max_word_len": 10},
    },
    "number_sorting": {
        1: {"min_numbers": 3, "max_numbers": 4, "min_decimals": 0, "max_decimals": 0,
            "min_value": 0.0, "max_value": 100.0},
        2: {"min_numbers": 5, "max_numbers": 7, "min_decimals": 0, "max_decimals": 0,
            "min_value": -100.0, "max_value": 100.0},
        3: {"min_numbers": 3, "max_numbers": 10, "min_decimals": 0, "max_decimals": 2},
    },
}  # fmt: skip


def dataset_name(family_name: str) -> str:
    """`leg_counting` for `rg:leg_counting`; SieveError for a dataset without levels here."""
    name = family_name.removeprefix(PREFIX)
    if name not in LEVEL_CONFIGS:
        known = ", ".join(f"{PREFIX}{n}" for n in sorted(LEVEL_CONFIGS))
        if _in_reasoning_gym(name):  # it exists: say that Sieve has no levels for it
            raise SieveError(
                f"reasoning-gym dataset {name!r} has no levels in Sieve (LEVEL_CONFIGS in "
                f"pipeline/problems/rg.py); families with levels: {known}"
            )
        raise SieveError(f"unknown reasoning-gym family {family_name!r}; with levels: {known}")
    return name


def _in_reasoning_gym(name: str) -> bool:
    """True when the installed reasoning-gym has a dataset `name` (False when not installed)."""
    try:
        rg_version()
        from reasoning_gym.factory import DATASETS
    except (SieveError, ImportError):
        return False
    return name in DATASETS


def level_config(dataset: str, level: int) -> dict[str, Any]:
    """The full keyword config of one cell: its level fields plus the fixed seed and size."""
    return {**LEVEL_CONFIGS[dataset][level], "seed": RG_SEED, "size": RG_SIZE}


def describe(dataset: str, level: int) -> str:
    """One line naming a level's reasoning-gym settings, e.g. `min_terms=2, max_terms=2`."""
    return ", ".join(f"{k}={v}" for k, v in LEVEL_CONFIGS[dataset][level].items()) or "defaults"


@dataclass
class RgFamily:
    """One reasoning-gym dataset as a Sieve family (see the module docstring)."""

    NAME: str
    LEVELS: dict[int, str]
    VERIFIER: str = VERIFIER

    @property
    def dataset(self) -> str:
        return self.NAME.removeprefix(PREFIX)

    def make(self, level: int, rng: random.Random) -> tuple[str, str, dict[str, Any]]:
        """One item at a random index; an item with an empty gold answer (base_conversion of
        0 gives "") is skipped for the next draw, as nothing could be judged against it."""
        config = level_config(self.dataset, level)
        params = {"rg_version": rg_version(), "dataset": self.dataset, "config": config}
        for _ in range(MAX_EMPTY_DRAWS):
            index = rng.randrange(RG_SIZE)
            entry = item({**params, "index": index})
            if str(entry["answer"]).strip():
                return str(entry["question"]), str(entry["answer"]), {**params, "index": index}
        raise SieveError(f"{self.NAME} level {level}: {MAX_EMPTY_DRAWS} empty answers in a row")


@cache
def family(family_name: str) -> RgFamily:
    """The family `rg:<dataset>` (SieveError for a dataset without levels or no package)."""
    dataset = dataset_name(family_name)
    rg_version()
    levels = {lv: describe(dataset, lv) for lv in LEVEL_CONFIGS[dataset]}
    return RgFamily(NAME=f"{PREFIX}{dataset}", LEVELS=levels)


def is_rg(family_name: str) -> bool:
    return family_name.startswith(PREFIX)
