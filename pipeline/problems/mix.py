"""Problem mixes read from TOML: which families and levels to generate.

```toml
[families]          # family = levels ("all", "3", "1-5", "1,3,5")
arith = "1-10"
word = "all"
```
Test: `pytest tests/problems/test_mix.py`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.errors import SieveError
from pipeline.problems import FAMILIES, parse_levels


class MixConfig(BaseModel):
    """A problem mix; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: dict[str, str]

    def levels(self) -> dict[str, list[int]]:
        """family -> validated level list (SieveError on unknown family or level)."""
        return {family: parse_levels(spec, family) for family, spec in self.families.items()}


DEFAULT_MIX = MixConfig(families={name: "all" for name in FAMILIES})


def load_mix(path: Path) -> MixConfig:
    """Read and validate a mix file; every problem is reported as one line naming the file."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SieveError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SieveError(f"{path}: invalid TOML ({exc})") from None
    try:
        mix = MixConfig.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise SieveError(f"{path}: {where}: {first['msg']}") from None
    try:
        mix.levels()
    except SieveError as exc:
        raise SieveError(f"{path}: {exc}") from None
    return mix
