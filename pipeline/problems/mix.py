"""Problem mixes read from TOML: which families and levels to generate.

```toml
[families]          # family = levels ("all", "3", "1-5", "1,3,5")
arith = "1-10"
word = "all"
```
Test: `pytest tests/problems/test_code_family.py tests/cli/test_bad_inputs.py` (the default mix;
a `--mix` path that is not a file).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from grpo_core.validate import STRICT
from pipeline.errors import SieveError
from pipeline.problems import FAMILIES, parse_levels
from pipeline.tomlconfig import load_toml


class MixConfig(BaseModel):
    """A problem mix; unknown keys are rejected."""

    model_config = STRICT | ConfigDict(frozen=True)

    families: dict[str, str]

    def levels(self) -> dict[str, list[int]]:
        """family -> validated level list (SieveError on unknown family or level)."""
        return {family: parse_levels(spec, family) for family, spec in self.families.items()}


DEFAULT_MIX = MixConfig(families={name: "all" for name in FAMILIES})


def load_mix(path: Path) -> MixConfig:
    """Read and validate a mix file; every problem is reported as one line naming the file."""
    mix = load_toml(path, MixConfig)
    try:
        mix.levels()
    except SieveError as exc:
        raise SieveError(f"{path}: {exc}") from None
    return mix
