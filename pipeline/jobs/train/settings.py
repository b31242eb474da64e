"""Training settings and recipes: what `sieve train` trains with.

`TrainSettings` is the `--config FILE` schema: top-level keys, GRPO knobs in a `[grpo]` table, a
knob the table leaves out taking GRPOConfig's documented default. The table is kept as written
(it is part of a run's id, `pipeline.jobs.train.trainee.train_id_for`), and the `GRPOConfig` it
gives is built once, when the settings are validated, and kept with them: `grpo_config()` hands out
that one object, so a train job is resolved once. A recipe is such a file,
shipped in the package (`pipeline/recipes/`, `pipeline.core.tomlconfig.RECIPES`): `tiny_train.toml`
for raw-prompt models (the built-in tiny policy) and `real_train.toml` for chat models
(`recipe_for`), unless `--config` names another (a file, or a shipped recipe by name); it is read
alone on top of GRPOConfig's defaults — nothing is merged in. `train_recipe` is the one
place a run's recipe is chosen (a given file, else the model's). `settings_toml` writes the
effective settings back out (`sieve train --print-config`).

Test: `pytest tests/test_tiny_recipe.py tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from grpo_core.config import GRPOConfig
from grpo_core.validate import MAX_COUNT, STRICT, AtLeastOne, Count, FieldError
from pipeline.core.errors import SieveError
from pipeline.core.tomlconfig import RECIPES, first_error, load_toml, recipe_file
from pipeline.jobs.train.selection_settings import (
    Selection,
    SelectionModel,
    SelectionPrior,
    SelectionScore,
    SelectionTargetShare,
    check_selection,
)
from pipeline.policy.model import read_meta
from pipeline.policy.prompts import PromptFormat, prompt_format
from pipeline.problems import FAMILIES, OPT_IN_FAMILIES, parse_levels
from pipeline.problems.rg import is_rg

GRPO_FIELDS = {f.name for f in dataclasses.fields(GRPOConfig)}


@dataclass(frozen=True, eq=False)
class _Built:
    """The GRPOConfig a settings object's `[grpo]` table gives, with the very dict it was built
    from (a `model_copy` that replaces the table is noticed by identity). It is derived from the
    fields, so it never makes two settings unequal (pydantic compares private attributes)."""

    table: dict[str, Any] | None = None
    config: GRPOConfig | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Built)


class TrainSettings(BaseModel):
    """`sieve train --config FILE`: top-level keys here, GRPO knobs in a `[grpo]` table; a knob
    the table leaves out takes GRPOConfig's default."""

    model_config = STRICT

    grpo: dict[str, Any] = Field(default_factory=dict, description="GRPOConfig fields.")
    rollouts_per_step: int = Field(
        default=128,
        ge=2,
        le=MAX_COUNT,
        description="Completions per step; items are drawn until it is met.",
    )
    eval_every: Count = Field(default=0, description="Held-out eval every N steps; 0: end.")
    eval_per_level: AtLeastOne = Field(default=10, description="Held-out problems per level.")
    eval_samples: AtLeastOne = Field(default=4, description="Samples per held-out problem.")
    eval_families: list[str] | dict[str, str] | None = Field(
        default=None,
        description="Families to evaluate (every level), or a table family -> levels as in a "
        'mix ({arith = "1-2"}); default every family (the whole mix).',
    )
    tensorboard: bool = Field(default=True, description="Also write TensorBoard event files.")
    replay_curation: bool = Field(
        default=False,
        description="Each curriculum prompt's first visit trains on its stored screen/refine "
        "samples (re-tokenised, importance-weighted π_θ/π_ref, exact at step 0) instead of "
        "fresh ones: curation's rollouts count twice (off until measured on a real "
        "model, benchmarks/curriculum.py arm sieve_every_rollout on the tiny one). With "
        "selection = 'posterior', a prompt's first pick replays them.",
    )
    skip_zero_variance: bool = Field(
        default=False,
        description="GRESO-style skip (Zheng et al. 2025): a prompt whose recent groups in the "
        "ledger, curation and training, were all zero-variance is skipped with a probability "
        "growing with that streak (at most 0.9, so it is re-explored); counted as "
        "skipped_zero_var. Off until measured.",
    )

    # how a step picks its prompts: pipeline/jobs/train/selection_settings.py (one definition, which
    # the --selection* options are made from)
    selection: Selection = "curriculum"
    selection_model: SelectionModel = "static"
    selection_score: SelectionScore = "thompson"
    selection_prior: SelectionPrior = "none"
    selection_target_share: SelectionTargetShare = None

    carry_over: bool = Field(
        default=False,
        description="A run that starts from a checkpoint of an earlier run in the ledger (a "
        "night after the first) continues it: AdamW moments, the lr and β schedules (counted "
        "in the lineage's updates) and the KL reference (the lineage's first weights) carry "
        "over, so N nights of K updates train as one run of N x K updates would on the same "
        "batches. Off: each night is a fresh run from its start weights (moments zero, "
        "schedules from step 0, the night's start as reference).",
    )

    _grpo: _Built = PrivateAttr(default_factory=_Built)

    @model_validator(mode="wrap")
    @classmethod
    def _grpo_once(cls, data: Any, handler: ModelWrapValidatorHandler[TrainSettings]) -> Any:
        """The `[grpo]` table checked by building its GRPOConfig, before the other fields (its
        errors come first, one line each: `grpo.lr must be ...`), and that config kept."""
        built = None
        table = data.get("grpo") if isinstance(data, dict) else None
        if isinstance(table, dict) and all(isinstance(k, str) for k in table):
            unknown = sorted(k for k in table if k not in GRPO_FIELDS)
            if unknown:
                raise ValueError(
                    f"grpo: unknown key {unknown[0]!r}; GRPOConfig has {sorted(GRPO_FIELDS)}"
                )
            built = grpo_config(table)  # type and range checks, one line each
        settings = handler(data)
        if built is not None and settings.grpo == table:
            settings._grpo = _Built(settings.grpo, built)
        return settings

    @model_validator(mode="after")
    def _one_selection(self) -> TrainSettings:
        if self.selection != "curriculum" and self.skip_zero_variance:
            raise ValueError(
                f"selection = {self.selection!r} does not combine with skip_zero_variance (the "
                "posterior already passes over flat prompts): turn it off, or use selection = "
                "'curriculum'"
            )
        if self.selection == "posterior-screen" and self.replay_curation:
            raise ValueError(
                "selection = 'posterior-screen' does not combine with replay_curation yet (its "
                "screens are its own): use selection = 'posterior' to replay the curation"
            )
        check_selection(self)
        return self

    @field_validator("eval_families")
    @classmethod
    def _known_families(
        cls, value: list[str] | dict[str, str] | None
    ) -> list[str] | dict[str, str] | None:
        if value is None:
            return None
        known = [*FAMILIES, *OPT_IN_FAMILIES]
        if not value:
            raise ValueError(f"give at least one family, or leave it unset for all; {known}")
        for name in value:
            if name not in known and not is_rg(name):
                raise ValueError(f"unknown family {name!r}; valid: {', '.join(known)}")
            try:  # a reasoning-gym name is checked against its installed datasets
                spec = value[name] if isinstance(value, dict) else "all"
                parse_levels(spec, name)
            except SieveError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return value

    def grpo_config(self, **overrides: Any) -> GRPOConfig:
        """The GRPOConfig of these settings: the one built when they were validated (built here
        once if the table was replaced since, e.g. by `model_copy`); with `overrides`, a copy
        with those fields replaced (`dataclasses.replace`, checked as on creation)."""
        built = self._grpo
        if built.config is None or built.table is not self.grpo:
            built = self._grpo = _Built(self.grpo, grpo_config(self.grpo))
        assert built.config is not None
        return replaced(built.config, overrides) if overrides else built.config

    def with_steps(self, total_steps: int | None) -> TrainSettings:
        """These settings with `total_steps` replaced (`--steps`); unchanged for None. A value
        GRPOConfig refuses is one ValueError line (`grpo.total_steps must be ...`)."""
        if total_steps is None:
            return self
        if total_steps < 1:
            raise SieveError(f"--steps must be >= 1, got {total_steps}")
        config = self.grpo_config(total_steps=total_steps)
        table = {**self.grpo, "total_steps": total_steps}
        copy = self.model_copy(update={"grpo": table})
        copy._grpo = _Built(table, config)
        return copy

    def with_options(self, options: Mapping[str, Any] | None) -> TrainSettings:
        """These settings with the top-level fields in `options` replaced (`sieve train` and
        `sieve loop`'s `--selection*` options), checked as a recipe file's are (the `[grpo]`
        table and the GRPOConfig built from it kept as they are); unchanged for none. A value
        refused is one ValueError line naming the field."""
        if not options:
            return self
        try:
            checked = TrainSettings.model_validate({**self.model_dump(exclude={"grpo"}), **options})
        except ValidationError as exc:
            raise ValueError(first_error(exc, TrainSettings)) from None
        return self.model_copy(update={k: getattr(checked, k) for k in options})


def grpo_config(values: dict[str, Any]) -> GRPOConfig:
    """GRPOConfig from plain values (GRPOConfig checks types and ranges,
    `grpo_core.validate`); an error is one line naming the field: `grpo.lr must be ...`."""
    try:
        return GRPOConfig(**values)
    except FieldError as exc:
        raise ValueError(f"grpo.{exc}") from None
    except ValueError as exc:
        raise ValueError(f"grpo: {exc}") from None


def replaced(config: GRPOConfig, overrides: dict[str, Any]) -> GRPOConfig:
    """`config` with `overrides` (`dataclasses.replace`; errors as `grpo_config`'s)."""
    try:
        return dataclasses.replace(config, **overrides)
    except FieldError as exc:
        raise ValueError(f"grpo.{exc}") from None
    except ValueError as exc:
        raise ValueError(f"grpo: {exc}") from None


def load_settings(path: str | Path) -> TrainSettings:
    return load_toml(path, TrainSettings)


# ---------------------------------------------------------------------- recipes

# The built-in tiny policy's recipe exists once, as pipeline/recipes/tiny_train.toml (its comments
# say why each value); these names are read from that file for the demo and the benchmarks. At 128
# rollouts per step lr 1e-4 was the largest that did not lose held-out accuracy; with 512 rollouts
# per step (64 prompts × G = 8) it trains at 2e-4 after a 20-step warm-up (benchmarks/curriculum.py
# measured its headline with exactly this file: tests/test_tiny_recipe.py).
TINY_RECIPE = load_settings(RECIPES / "tiny_train.toml")
TINY_GRPO: dict[str, Any] = dict(TINY_RECIPE.grpo)
TINY_RECIPE_GRPO: dict[str, Any] = {k: TINY_GRPO[k] for k in ("lr", "lr_warmup_steps")}
TINY_RECIPE_ROLLOUTS_PER_STEP = TINY_RECIPE.rollouts_per_step


@dataclass(frozen=True)
class Recipe:
    path: Path
    settings: TrainSettings
    why: str  # why this file: "--config", or the model's prompt format

    def line(self) -> str:
        return f"recipe {_shown(self.path)} ({self.why})"


def recipe_for(model_dir: str | Path) -> Recipe:
    """The recipe file for a model: raw prompts (the built-in tiny policy) -> tiny_train.toml;
    a chat model -> real_train.toml (small instruct models)."""
    fmt = folder_prompt_format(model_dir)
    if fmt == "raw":
        path, why = RECIPES / "tiny_train.toml", "raw prompts: the built-in tiny policy's recipe"
    else:
        path, why = RECIPES / "real_train.toml", "chat model: the small instruct model recipe"
    if not path.is_file():
        raise SieveError(f"recipe {path} is missing: pass --config FILE")
    return Recipe(path, load_settings(path), f"{why}; --config FILE picks another")


def given_recipe(path: Path) -> Recipe:
    """The `--config` recipe: a file, or a shipped recipe by name (`recipe_file`)."""
    file = recipe_file(path)
    return Recipe(file, load_settings(file), "--config")


def train_recipe(
    model_dir: str | Path,
    given: Recipe | None = None,
    steps: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Recipe, TrainSettings]:
    """The one place a run's recipe is chosen: `given` (a `--config` file, `given_recipe`, read
    by the caller once), else the recipe for the model (`recipe_for`); (that recipe, its
    settings with `--steps` as total_steps and the fields `options` names replaced: the
    `--selection*` options). A `--steps` GRPOConfig refuses, or an option the settings refuse,
    is one SieveError line naming it."""
    recipe = given if given is not None else recipe_for(model_dir)
    try:
        settings = recipe.settings.with_steps(steps)
    except ValueError as exc:  # `grpo.total_steps must be ...`: what --steps gave
        raise SieveError(f"--steps {steps}: {exc}") from None
    try:
        return recipe, settings.with_options(options)
    except ValueError as exc:
        shown = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in (options or {}).items())
        raise SieveError(f"{shown}: {exc}") from None


def folder_prompt_format(model_dir: str | Path) -> PromptFormat:
    """The prompt format of a model folder without loading its weights; a name that is not a
    local folder (a served model) counts as chat."""
    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        return "chat"
    declared = read_meta(folder).get("prompt_format")
    if declared in ("raw", "chat"):
        return "raw" if declared == "raw" else "chat"
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:  # transformers raises many types for broken folders
        raise SieveError(f"cannot load the tokenizer of {folder}: {_one_line(exc)}") from exc
    return prompt_format(folder, tokenizer)


def settings_toml(settings: TrainSettings, header: Sequence[str] = ()) -> str:
    """The effective settings as a file `--config` reads back: TrainSettings at the top level and
    the resolved GRPOConfig, every field, in `[grpo]` (`sieve train --print-config`)."""
    lines = [f"# {h}" for h in header]
    lines += [_toml_line(k, v) for k, v in settings.model_dump(exclude={"grpo"}).items()]
    lines += ["", "[grpo]"]
    lines += [_toml_line(k, v) for k, v in dataclasses.asdict(settings.grpo_config()).items()]
    return "\n".join(lines) + "\n"


def _toml_line(key: str, value: Any) -> str:
    return f"# {key}: unset" if value is None else f"{key} = {_toml_value(value)}"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # TOML reads Python's float repr (2e-06, inf, nan) as it is
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]


# what a curation takes from the training it curates for (training samples at top-p 1 always,
# which is [sampling]'s default: GRPOConfig has no top_p)
CHAT_SAMPLING_KEYS = ("temperature", "max_new_tokens")


def chat_sampling_defaults(model_dir: str | Path) -> tuple[dict[str, Any], Recipe | None]:
    """The sampling values a curation of `model_dir` takes from its training recipe when the
    user sets none: a chat model curates at the temperature and answer budget it trains at
    (real_train.toml: T 0.6, 256 tokens) instead of [sampling]'s generic T 1 / 512; the raw-format
    tiny policy keeps [sampling]'s own defaults (empty, None)."""
    if folder_prompt_format(model_dir) == "raw":
        return {}, None
    recipe = recipe_for(model_dir)
    grpo = recipe.settings.grpo
    return {k: grpo[k] for k in CHAT_SAMPLING_KEYS if k in grpo}, recipe


def curation_sampling(
    cfg: Any, model_dir: str | Path, keep: Sequence[str] = (), settings: TrainSettings | None = None
) -> tuple[Any, str | None]:
    """The one rule "curate at the sampling training will use", for every
    entry point (sieve curate, loop, schedule, demo, the nightly flow): `cfg` (a CurateConfig)
    with [sampling]'s temperature and max_new_tokens taken from `settings` (the run's training
    settings; None: the model's recipe) for a chat model, except the fields named in `keep` (set
    by the user: a flag or the config file). Returns the config and one line naming what was
    taken (None when nothing was). A raw-format model (the tiny policy) keeps [sampling]."""
    from pipeline.sampling.budget import SamplingConfig

    if settings is None:
        values, recipe = chat_sampling_defaults(model_dir)
        source = recipe.line() if recipe is not None else ""
    elif folder_prompt_format(model_dir) == "raw":
        values, source = {}, ""
    else:
        values = {k: settings.grpo[k] for k in CHAT_SAMPLING_KEYS if k in settings.grpo}
        source = "run's training settings"
    taken = {k: v for k, v in values.items() if k not in keep and getattr(cfg.sampling, k) != v}
    if not taken:
        return cfg, None
    sampling = SamplingConfig.model_validate({**cfg.sampling.model_dump(), **taken})
    shown = ", ".join(f"{k} {v}" for k, v in taken.items())
    return cfg.model_copy(update={"sampling": sampling}), f"sampling: {shown} from the {source}"
