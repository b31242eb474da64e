"""Problem mixes read from TOML: which families and levels to generate.

```toml
[families]          # family = levels ("all", "3", "1-5", "1,3,5")
arith = "1-10"
word = "all"
```
A curate config's `[mix]` table is a mix too (`sieve generate --mix curate.toml`
generates what that config curates from), so the mix is written once, where curation reads it;
`pipeline.selection.config.load_mix` reads either kind of file.
Test: `pytest tests/problems/test_code_family.py tests/cli/test_bad_inputs.py` (the default mix;
a `--mix` path that is not a file).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from grpo_core.validate import STRICT
from pipeline.problems.registry import FAMILIES, parse_levels


class MixConfig(BaseModel):
    """A problem mix; unknown keys are rejected."""

    model_config = STRICT | ConfigDict(frozen=True)

    families: dict[str, str]

    def levels(self) -> dict[str, list[int]]:
        """family -> validated level list (SieveError on unknown family or level)."""
        return {family: parse_levels(spec, family) for family, spec in self.families.items()}


DEFAULT_MIX = MixConfig(families={name: "all" for name in FAMILIES})
