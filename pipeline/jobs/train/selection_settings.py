"""How a training step picks its prompts: the `selection` fields of a train recipe
(`pipeline.jobs.train.settings.TrainSettings` declares them with these types), kept apart from the
training code so that `sieve train`, `sieve loop` and `sieve plan` make their options from these
fields (`flows.cli.options.SELECTION`) without importing torch or transformers.

- `selection`: the curriculum's weighted draws, or Sieve's difficulty model before sampling;
- `selection_model`, `selection_score`, `selection_prior`: which difficulty model, how a
  candidate's posterior becomes its score, and what the model knows of each cell at the start
  (`pipeline.selection.batch_choice.SelectionConfig`, `posterior.CellPrior`); they apply only
  where the difficulty model picks (`check_selection`);
- `selection_target_share`: the closed loop on the realised informative share (selection
  'posterior' only).

Test: `.venv/bin/pytest tests/test_selection_settings.py -q`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from grpo_core.validate import STRICT

if TYPE_CHECKING:
    from pipeline.selection.batch_choice import SelectionConfig

# the most samples a cell's start prior counts for: a cell the prior alone makes "known" (the
# curate config's known_cell_samples default, four groups of 8) and no more, so a big screen or
# evaluation of the start weights does not outweigh the run's own groups
PRIOR_SAMPLES = 32.0

Selection = Annotated[
    Literal["curriculum", "posterior", "posterior-screen"],
    Field(
        description="How a step picks its prompts. curriculum: weighted draws from the "
        "curriculum's stage. posterior: Sieve's difficulty model (pipeline/selection/"
        "posterior.py) over the curriculum's curation groups and this run's own training "
        "groups picks the batch with the largest learnability p(1 - p) (selection_score) from "
        "8x as many candidates, before any rollout is sampled. posterior-screen: "
        "the same pick, then two stages inside the step: a prompt the model is sure of goes "
        "straight to the smallest G (≥ its item's) informative with probability ≥ 0.9, the "
        "others are screened with 4 samples and, if those disagree, continued to their G "
        "with the screen's samples in the group; flat screens are replaced by the next "
        "candidates, sampled straight at their G."
    ),
]
SelectionModel = Annotated[
    Literal["static", "learning"],
    Field(
        description="The difficulty model that picks (selection 'posterior' or "
        "'posterior-screen'). static: each prompt's Beta posterior shrunk to its cell, "
        "evidence decaying 0.9 per update (its SQL twin is the prompt_posterior view). "
        "learning: evidence that moves with training, a drift per cell fitted on the run's "
        "revisits (after DPS, arXiv 2603.10887; pipeline/selection/learning.py; "
        "benchmarks/forecast.py scores both on recorded runs)."
    ),
]
SelectionScore = Annotated[
    Literal["thompson", "ucb"],
    Field(
        description="How a candidate's posterior becomes its score. thompson: p(1 - p) of a "
        "Beta draw (MoPPS, arXiv 2507.04632). ucb: E[p(1 - p)] plus one standard deviation of "
        "it (after InSight, arXiv 2603.01907): the mean belief plus what more evidence is "
        "worth, no noisy draw."
    ),
]
SelectionPrior = Annotated[
    Literal["none", "ledger"],
    Field(
        description="What the model knows of each family x level cell before the run's own "
        "groups. none: only the lineage's curation and training groups. ledger: also the "
        "pass rate the ledger measured for the start weights in each cell (every sampled run "
        "of them, screens and held-out evaluations: the cell_prior query), worth at most "
        f"{PRIOR_SAMPLES:g} samples a cell; their screens are also prompt evidence, so those "
        "samples count twice in their cells, up to that cap."
    ),
]

SelectionTargetShare = Annotated[
    Annotated[float, Field(gt=0, lt=1)] | None,
    Field(
        description="A closed loop on the realised informative share (selection 'posterior'): "
        "after each step, the share of the next batch spent on the least-visited prompts "
        "ranked below it moves by 0.25 x (the step's informative share - this target), "
        "between 0 and half the batch (after GRESO, arXiv 2506.02177; "
        "pipeline/selection/batch_choice.py). Unset: every prompt of a batch is picked by "
        "its score."
    ),
]

# the fields a step's pick reads besides `selection`, with their defaults (today's behaviour)
MODEL_DEFAULTS: dict[str, str | None] = {
    "selection_model": "static",
    "selection_score": "thompson",
    "selection_prior": "none",
    "selection_target_share": None,
}
# the selections that read each of them (the loop steers only the one-stage pick)
READ_BY: dict[str, tuple[str, ...]] = {
    name: ("posterior", "posterior-screen") for name in MODEL_DEFAULTS
} | {"selection_target_share": ("posterior",)}


def check_selection(values: Any) -> None:
    """A ValueError, saying how to fix it, when a `selection_*` field is set away from its
    default while `selection` is one that does not read it (`READ_BY`)."""
    for name, default in MODEL_DEFAULTS.items():
        value = getattr(values, name)
        if value != default and values.selection not in READ_BY[name]:
            allowed = " or ".join(f"selection = {s!r}" for s in READ_BY[name])
            raise ValueError(
                f"{name} = {value!r} applies only where {allowed} picks: set that, or leave "
                f"{name} out"
            )


class SelectionSettings(BaseModel):
    """The selection fields of a train recipe on their own: what `sieve train`, `sieve loop`
    and `sieve plan` make their `--selection*` options from (TrainSettings has the same fields,
    of the same types, and the same check)."""

    model_config = STRICT

    selection: Selection = "curriculum"
    selection_model: SelectionModel = "static"
    selection_score: SelectionScore = "thompson"
    selection_prior: SelectionPrior = "none"
    selection_target_share: SelectionTargetShare = None

    @model_validator(mode="after")
    def _applies(self) -> SelectionSettings:
        check_selection(self)
        return self


def selection_config(settings: Any) -> SelectionConfig:
    """The `SelectionConfig` that the `selection_model`, `selection_score` and
    `selection_target_share` of `settings` (a TrainSettings or SelectionSettings) name; its
    other fields at their defaults."""
    from pipeline.selection.batch_choice import SelectionConfig

    return SelectionConfig(
        model=settings.selection_model,
        score=settings.selection_score,
        target_share=settings.selection_target_share,
    )
