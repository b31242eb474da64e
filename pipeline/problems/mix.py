"""Problem mixes read from TOML: which families and levels to generate.

```toml
[families]          # family = levels ("all", "3", "1-5", "1,3,5")
arith = "1-10"
word = "all"
```
A curate config's `[mix]` table is a mix too (`sieve generate --mix data/configs/curate.toml`
generates what that config curates from), so the mix is written once, where curation reads it.
Test: `pytest tests/problems/test_code_family.py tests/cli/test_bad_inputs.py` (the default mix;
a `--mix` path that is not a file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from grpo_core.validate import STRICT
from pipeline.errors import SieveError
from pipeline.problems.registry import FAMILIES, parse_levels
from pipeline.tomlconfig import read_toml, validate_toml


class MixConfig(BaseModel):
    """A problem mix; unknown keys are rejected."""

    model_config = STRICT | ConfigDict(frozen=True)

    families: dict[str, str]

    def levels(self) -> dict[str, list[int]]:
        """family -> validated level list (SieveError on unknown family or level)."""
        return {family: parse_levels(spec, family) for family, spec in self.families.items()}


DEFAULT_MIX = MixConfig(families={name: "all" for name in FAMILIES})


def load_mix(path: Path) -> MixConfig:
    """Read and validate a mix file, or a curate config's `[mix]`; every problem is reported as
    one line naming the file. The file is read once."""
    raw = read_toml(path)
    if _is_curate_config(raw):
        from pipeline.selection.config import CurateConfig

        return MixConfig(families=dict(validate_toml(Path(path), raw, CurateConfig).mix))
    mix = validate_toml(Path(path), raw, MixConfig)
    try:
        mix.levels()
    except SieveError as exc:
        raise SieveError(f"{path}: {exc}") from None
    return mix


def _is_curate_config(raw: dict[str, Any]) -> bool:
    """Parsed TOML without `[families]` whose keys are a curate config's (its `[mix]`, or
    CurateConfig's default mix when it has none)."""
    from pipeline.selection.config import CurateConfig

    return "families" not in raw and bool(raw.keys() & CurateConfig.model_fields.keys())
