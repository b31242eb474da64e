"""The curation knobs (`CurateConfig`) and reading them from TOML (`load_curate_config`; a mix
file or a curate config's `[mix]`: `load_mix`).

Every field says what it trades off and where its default comes from. The file holds the fields
as top-level keys, the problem mix as a `[mix]` table (family = level spec) and the decoding
budget as a `[sampling]` table (`pipeline.sampling.budget.SamplingConfig`):

```toml
screen_g = 8
refine_g = 32
[mix]
arith = "all"
[sampling]
max_new_tokens = 512
```
An unknown key or a bad value is one `SieveError` line naming the file and the key.

Test: `.venv/bin/pytest tests/selection/test_config.py -q`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from grpo_core.validate import MAX_COUNT, STRICT, Seed
from pipeline.core.errors import SieveError
from pipeline.core.tomlconfig import CONFIGS, load_toml, read_config_text, read_toml, validate_toml
from pipeline.problems import FAMILIES, parse_levels
from pipeline.problems.mix import MixConfig
from pipeline.sampling.budget import MAX_GROUP_SIZE, SamplingConfig

# The curation the built-in tiny policy learns with exists once, as data/configs/tiny_curate.toml
# (its comments say why: stage 2 off, the stage-1 band opened to [0.02, 1], half as many replayed
# solved prompts, no refine of 0/G prompts, a refine of G = 8 more); `sieve demo` and
# benchmarks/curriculum.py read it through these names (without its n_candidates).
TINY_CURATE_FILE = CONFIGS / "tiny_curate.toml"
TINY_CURATE: dict[str, float | int] = {
    k: v
    for k, v in tomllib.loads(read_config_text(TINY_CURATE_FILE)).items()
    if k != "n_candidates"
}


# Candidates per curation: ten million problems is a ledger of gigabytes and weeks of screening;
# past that a value is a typo (2**63 - 1 would only grow memory until the machine gives out).
MAX_CANDIDATES = 10_000_000
MAX_REPLAY_WEIGHT = 1e3  # weight of a replayed item; main items average 1
GROUP_FIELDS = ("screen_g", "refine_g", "stage1_g", "max_group_size")  # `check_samplable`


def _all_families() -> dict[str, str]:
    return {name: "all" for name in FAMILIES}


class CurateConfig(BaseModel):
    """Knobs of one curation (generate → prior → screen → refine → select → curriculum)."""

    model_config = STRICT | ConfigDict(frozen=True)

    n_candidates: int = Field(
        default=2000,
        ge=1,
        le=MAX_CANDIDATES,
        description="Problems generated per curation: more finds more informative prompts but "
        "costs screen_g rollouts each. Default: sized for one night on the CPU demo.",
    )
    mix: dict[str, str] = Field(
        default_factory=_all_families,
        description="family -> level spec ('all', '1-5', '1,3'): which problems are generated. "
        "Default: every family at every level.",
    )
    ingested: list[str] = Field(
        default_factory=list,
        description="Families of problems already in the ledger (`sieve ingest`, family "
        "'external' unless the file or --family named one) to curate from instead of "
        "generating `mix`: up to n_candidates of their train-split problems, drawn by seed. "
        "Default: none (generate).",
    )
    seed: Seed = Field(
        default=0,
        description="Seed of generation and of every random choice (stable_uniform); vary it "
        "per night so re-exploration picks different prompts. Default: 0.",
    )
    allocate_by_history: bool = Field(
        default=True,
        description="Spread the candidates over family x level cells by how often each cell's "
        "groups were informative (mixed outcomes) for recent revisions in the ledger, instead "
        "of evenly: screens fewer prompts from levels the policy always or never solves. No "
        "history: the even spread. Default: on (GRESO skips prompts predicted zero-variance, "
        "Zheng et al. 2025; this does it per cell, before generation).",
    )
    explore_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="With allocate_by_history, the share of candidates still spread evenly "
        "over every cell, so a cell that turns informative as the policy changes is found "
        "again: higher explores more at more screening cost. Default: 0.2, about the fifth "
        "of zero-variance prompts that turn informative again (docs/architecture.md, curation "
        "step 2).",
    )
    screen_g: int = Field(
        default=8,
        ge=2,
        le=MAX_COUNT,
        description="Group size of the cheap screen: smaller is cheaper but calls more prompts "
        "all-wrong by chance. Default: open-r1 filters at G = 8.",
    )
    refine_g: int = Field(
        default=32,
        ge=2,
        le=MAX_COUNT,
        description="Group size of the refine pass on screen survivors: larger narrows the "
        "posterior interval at more cost. Default: G = 32, the large group of the two-stage "
        "design (docs/architecture.md, curation step 5).",
    )
    uncertain_hard_share: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="Share of 0/G screened prompts still refined: 0/8 is weak evidence "
        "(P(all wrong | p = 0.1, G = 8) = 0.43); higher recovers more hard prompts at more "
        "cost. Default: 0.25 (docs/architecture.md, curation step 4).",
    )
    history_revisions: int = Field(
        default=3,
        ge=1,
        le=MAX_COUNT,
        description="How many recent model revisions the history prior looks at: more "
        "revisions trust older evidence longer. Default: 3 (docs/architecture.md, curation "
        "step 2).",
    )
    history_skip_prob: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description="Probability that a prompt zero-variance in every recent revision is "
        "skipped; the rest are re-explored, since about a fifth of them turn informative again "
        "as the policy changes. Default: 0.8 (docs/architecture.md, curation step 2).",
    )
    band_low: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Stage 1 needs the posterior 5 % quantile p_low >= band_low: higher keeps "
        "fewer, more surely solvable prompts. Default: open-r1 keeps 0.1 < p < 0.9 at G = 8 "
        "(Pilot-Commit: 0.125).",
    )
    band_high: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="Stage 1 needs the posterior 95 % quantile p_high <= band_high: lower drops "
        "more near-solved prompts. Default: open-r1 0.9 (Pilot-Commit: 0.75).",
    )
    stage1_g: int = Field(
        default=8,
        ge=2,
        le=MAX_COUNT,
        description="Training group size of stage 1 (mid-band prompts, informative at small G). "
        "Default: open-r1's G = 8.",
    )
    informative_target: float = Field(
        default=0.9,
        gt=0.0,
        lt=1.0,
        description="Stage-2 G per prompt is the smallest G with 1 - p^G - (1-p)^G >= target: "
        "higher wastes fewer groups but samples more. Default: 0.9 (docs/architecture.md, "
        "curation step 7).",
    )
    max_group_size: int = Field(
        default=64,
        ge=2,
        le=MAX_COUNT,
        description="Cap on a stage-2 group size; prompts needing more are out_of_band. "
        "Default: 64, the cap in the brief (Pilot-Commit commits at 48).",
    )
    hard_max_p: float = Field(
        default=0.2,
        gt=0.0,
        le=1.0,
        description="Stage 2 takes prompts solved at least once whose posterior mean is below "
        "this, and, at a pooled n where it takes any, those between it and the band (p_low < "
        "band_low, p_high <= band_high), so the kept counts never skip a k: higher admits "
        "more, costlier hard prompts. Default: 0.2, which alone closes the gap below stage 1 "
        "at n = 40 pooled samples (see benchmarks/selection.py).",
    )
    replay_share: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="All-correct prompts replayed in stage 1, as a share of its size: keeps "
        "easy data for stability at some compute. Default: 0.1 (MiMo / Polaris keep easy data).",
    )
    replay_weight: float = Field(
        default=0.1,
        ge=0.0,
        le=MAX_REPLAY_WEIGHT,
        description="Weight of a replayed item (main items average 1): higher leans more on "
        "easy data. Default: 0.1.",
    )
    max_error_share: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Screen groups with a larger share of verifier errors are rejected "
        "verifier_error: lower trusts fewer broken problems. Default: 0.5 (a majority vote).",
    )
    sampling: SamplingConfig = Field(
        default_factory=SamplingConfig,
        description="Decoding of the screen and refine samples ([sampling] table: "
        "max_new_tokens, temperature, top_p, stop). Default: the model's own budget (16 tokens "
        "for the tiny policy, 512 for chat models) at temperature 1.",
    )
    process_signal: bool = Field(
        default=False,
        description="Keep prompts whose outcomes all agree (zero outcome variance) but whose "
        "step verdicts vary across the group (rollout_steps; pipeline/scoring/steps.py): they "
        "are refined and enter stage 1 with reason process_informative, for a fragment-level "
        "(process) reward. Off: such prompts are rejected as all_correct / all_wrong, as an "
        "outcome-only GRPO sees no signal in them. Default: off (seeds/003's fragment-level "
        "reward is optional in Sieve).",
    )
    screen: Literal["all", "unknown"] = Field(
        default="all",
        description="Which candidates the screen samples. all: every one the prior keeps. "
        "unknown: the night refreshes the difficulty model instead of re-measuring it — a "
        "candidate of a cell whose evidence in the model's lineage (the difficulty model's "
        "decayed, capped samples, pipeline/selection/posterior.py) reaches known_cell_samples "
        "joins the curriculum unscreened (reason cell_prior: stage 2, its posterior's mean, "
        "the smallest G informative with probability >= informative_target, max_group_size "
        "where none is: cell_prior_explore), and only the others are screened and refined. "
        "Meant for selection = 'posterior' training, which picks among them before sampling. "
        "Default: all.",
    )
    known_cell_samples: float = Field(
        default=32.0,
        gt=0.0,
        le=MAX_COUNT,
        allow_inf_nan=False,
        description="With screen = 'unknown', the weighted samples a cell needs in the "
        "lineage's evidence to go by its prior. Default: 32 (four groups of 8).",
    )
    chunk_size: int = Field(
        default=256,
        ge=1,
        le=MAX_COUNT,
        description="Prompts per sampling chunk, the unit of crash-resume: smaller loses less "
        "work on a crash, larger batches better. Default: 256.",
    )
    # The verifier audit (pipeline/jobs/curate/audit.py) observes, never decides: its two fields are
    # out of the curation key (pipeline.jobs.curate.curation.curation_key): they change no run id.
    audit_share: float = Field(
        default=0.02,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Share of screen/refine verdicts re-judged by math-verify on the raw "
        "completion (table verifier_audit, `sieve audit`), on top of every verdict the fast path "
        "guessed: more catches rarer verifier disagreements at one math-verify call each. "
        "0: the guessed verdicts only. Default: 0.02 (about 320 calls for a 2,000-prompt "
        "screen at G = 8).",
    )
    audit_warn: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="A family whose audited verdicts disagree with math-verify more often than "
        "this makes the curation print one warning line: lower warns on smaller verifier "
        "problems, and on more noise. Default: 0.05.",
    )

    @field_validator("mix")
    @classmethod
    def _check_mix(cls, mix: dict[str, str]) -> dict[str, str]:
        if not mix:
            raise ValueError(f"give at least one family; valid: {', '.join(FAMILIES)}")
        for family, spec in mix.items():
            try:
                parse_levels(spec, family)
            except SieveError as exc:
                raise ValueError(str(exc)) from None
        return mix

    @field_validator("refine_g")
    @classmethod
    def _refine_not_smaller(cls, refine_g: int, info: ValidationInfo) -> int:
        screen_g = info.data.get("screen_g")
        if screen_g is not None and refine_g < screen_g:
            raise ValueError(f"must be >= screen_g ({screen_g}); raise refine_g or lower screen_g")
        return refine_g

    @field_validator("band_high")
    @classmethod
    def _band_ordered(cls, band_high: float, info: ValidationInfo) -> float:
        band_low = info.data.get("band_low")
        if band_low is not None and band_high <= band_low:
            raise ValueError(
                f"must be greater than band_low ({band_low}); raise band_high or lower band_low"
            )
        return band_high

    @field_validator("max_group_size")
    @classmethod
    def _cap_fits_stage1(cls, cap: int, info: ValidationInfo) -> int:
        stage1_g = info.data.get("stage1_g")
        if stage1_g is not None and cap < stage1_g:
            raise ValueError(f"must be >= stage1_g ({stage1_g}); raise max_group_size")
        return cap

    def mix_levels(self) -> dict[str, list[int]]:
        """family -> level list, as `pipeline.problems.generate_mix` takes it."""
        return {family: parse_levels(spec, family) for family, spec in self.mix.items()}


def load_curate_config(path: str | Path) -> CurateConfig:
    """Read and validate a curate TOML file; any problem is one `SieveError` line."""
    return load_toml(path, CurateConfig)


def check_samplable(cfg: CurateConfig, config: str | Path | None = None) -> None:
    """One SieveError line (`config` names the file) when a group size of `cfg` is past
    `MAX_GROUP_SIZE` (the config allows up to 2^31 - 1, which no machine samples at once), or
    when it samples at temperature 0: greedy samples of a prompt are all alike, so no group
    can disagree and the curation would write an empty curriculum, exit 0, as `latest`. Every
    entry point that curates checks it (sieve curate, loop, schedule: `flows.commands`)."""
    where = f"{config}: " if config is not None else ""
    for name in GROUP_FIELDS:
        value = getattr(cfg, name)
        if value > MAX_GROUP_SIZE:
            raise SieveError(
                f"{where}{name} = {value} is more samples of one prompt than a sampler holds at "
                f"once; at most {MAX_GROUP_SIZE}"
            )
    if cfg.sampling.sampling_temperature == 0:
        raise SieveError(
            f"{where}temperature 0 (greedy) samples every prompt alike, so no group can "
            "disagree and the curriculum would be empty; curate at a temperature > 0"
        )


def load_mix(path: Path) -> MixConfig:
    """Read and validate a mix file, or a curate config's `[mix]`; every problem is reported as
    one line naming the file. The file is read once."""
    raw = read_toml(path)
    if _is_curate_config(raw):
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
    return "families" not in raw and bool(raw.keys() & CurateConfig.model_fields.keys())
