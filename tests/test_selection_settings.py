"""A train recipe's selection fields (`pipeline.jobs.train.selection_settings`, issue 62 point 5):
checked in one line, kept out of a run's id at their defaults, handed by the trainer to the
difficulty model's collector (`posterior_collector` → `posterior_select` / `posterior_screen`:
its model, its score, the ledger's start prior), and read by `sieve plan`.

Test: `.venv/bin/pytest tests/test_selection_settings.py -q`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from grpo_core.config import GRPOConfig
from pipeline.core.errors import SieveError
from pipeline.jobs.analysis import policy_forecast as pp
from pipeline.jobs.train import trainee
from pipeline.jobs.train.curriculum_batches import curriculum_frame
from pipeline.jobs.train.selection_settings import PRIOR_SAMPLES
from pipeline.jobs.train.settings import TINY_RECIPE, TrainSettings, load_settings, train_recipe
from pipeline.selection.posterior import CellPrior, SelectionConfig
from pipeline.store import Ledger
from tests.cli_runner import run_cli


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('selection_model = "smart"\n', "selection_model must be one of ['static', 'learning']"),
        ('selection = "posterior"\nselection_score = "greedy"\n', "selection_score must be one"),
        ('selection = "posterior"\nselection_prior = "file"\n', "selection_prior must be one"),
        (
            'selection_model = "learning"\n',  # selection stays 'curriculum': nothing reads it
            "selection_model = 'learning' applies only where selection = 'posterior' or "
            "selection = 'posterior-screen' picks: set that",
        ),
    ],
)
def test_a_bad_selection_setting_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "train.toml"
    path.write_text(text)
    with pytest.raises(SieveError) as err:
        load_settings(path)
    assert message in str(err.value) and "\n" not in str(err.value)


AWAY = {"selection_model": "learning", "selection_score": "ucb", "selection_prior": "ledger",
        "selection_target_share": 0.3}  # fmt: skip


@pytest.mark.parametrize("selection", ["curriculum", "posterior", "posterior-screen"])
@pytest.mark.parametrize("name", sorted(AWAY))
def test_every_field_is_refused_where_its_selection_does_not_read_it(
    name: str, selection: str
) -> None:
    """Each field set away from its default, under each selection: accepted exactly where
    that selection reads it (READ_BY), else one line naming the selections that do."""
    from pipeline.jobs.train.selection_settings import READ_BY, SelectionSettings

    assert set(AWAY) == set(READ_BY)
    fields = {"selection": selection, name: AWAY[name]}
    if selection in READ_BY[name]:
        assert getattr(SelectionSettings(**fields), name) == AWAY[name]
        assert getattr(TrainSettings.model_validate(fields), name) == AWAY[name]
        return
    for model in (SelectionSettings, TrainSettings):
        with pytest.raises(ValueError) as err:
            model.model_validate(fields)
        line = str(err.value).splitlines()[1]
        assert f"{name} = {AWAY[name]!r} applies only where " in line
        assert all(f"selection = {s!r}" in line for s in READ_BY[name])


def test_options_replace_fields_and_keep_the_grpo_config() -> None:
    settings = TINY_RECIPE.model_copy(update={"selection": "posterior"})
    config = settings.grpo_config()
    given = settings.with_options({"selection_model": "learning", "selection_prior": "ledger"})
    assert (given.selection_model, given.selection_prior) == ("learning", "ledger")
    assert given.grpo_config() is config and settings.selection_model == "static"
    assert settings.with_options({}) is settings
    with pytest.raises(ValueError, match="selection_score must be one of") as err:
        settings.with_options({"selection_score": "best"})
    assert "\n" not in str(err.value)
    with pytest.raises(SieveError) as refused:
        train_recipe("unused", given=_recipe(TINY_RECIPE), options={"selection_model": "learning"})
    assert str(refused.value).startswith("--selection-model learning: selection_model = ")


def _recipe(settings: TrainSettings) -> Any:
    from pipeline.jobs.train.settings import Recipe

    return Recipe(Path("given.toml"), settings, "--config")


def test_run_ids_leave_the_selection_fields_out_at_their_defaults() -> None:
    night = TINY_RECIPE.model_copy(update={"selection": "posterior"})
    same = night.with_options({"selection_model": "static", "selection_score": "thompson"})
    assert trainee.train_id_for("c", "r", same) == trainee.train_id_for("c", "r", night)
    for field, value in [("selection_model", "learning"), ("selection_score", "ucb"),
                         ("selection_prior", "ledger")]:  # fmt: skip
        other = night.with_options({field: value})
        assert trainee.train_id_for("c", "r", other) != trainee.train_id_for("c", "r", night)


class Batches:
    """What `posterior_collector` reads of a curriculum's batches."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.keys = frame["problem_id"].to_list()

    def batch_prompts(self) -> int:
        return 2

    def candidates_all(self, step: int, n: int) -> list[Any]:
        return []


def _base_screen(ledger: Ledger, frame: pl.DataFrame) -> None:
    """Weights rev0 screened arith 1 (5 prompts x 8 samples, 20 right) and arith 2 (one
    prompt, 2 of 8): the ledger prior is arith 1 at 20 of 40 capped to 16 of 32, arith 2 at 2
    of 8."""
    one = frame.filter(pl.col("level") == 1)["problem_id"].to_list()[:5]
    two = frame.filter(pl.col("level") == 2)["problem_id"].to_list()[:1]
    runs = pl.DataFrame(
        [("s", "screen", "m", "rev0", "hf", 8, 1.0, "finished")],
        schema=["run_id", "purpose", "model", "model_revision", "backend", "group_size",
                "temperature", "status"],
        orient="row",
    )  # fmt: skip
    ledger.write("sampling_runs", runs)
    right = [(p, 4) for p in one] + [(p, 2) for p in two]
    rows = [("s", p, i, float(i < k), i < k) for p, k in right for i in range(8)]
    schema = ["run_id", "problem_id", "sample_idx", "reward", "correct"]
    ledger.write("rollouts", pl.DataFrame(rows, schema=schema, orient="row"))


@pytest.mark.parametrize("selection", ["posterior", "posterior-screen"])
def test_the_trainer_hands_the_recipes_model_score_and_prior_to_the_collector(
    ledger: Ledger,
    write_curriculum: Callable[[Ledger], object],
    monkeypatch: pytest.MonkeyPatch,
    selection: str,
) -> None:
    write_curriculum(ledger)
    frame = curriculum_frame(ledger, "cur-test")
    _base_screen(ledger, frame)
    calls: list[dict[str, Any]] = []
    collector = "posterior_select" if selection == "posterior" else "posterior_screen"
    monkeypatch.setattr(trainee, collector, lambda *a, **kw: calls.append(kw) or "collect")

    def collected(**fields: str) -> dict[str, Any]:
        settings = TrainSettings.model_validate({"selection": selection, **fields})
        run = trainee.TrainPlan("train-x", "cur-test", Path("m"), "rev0", settings,
                                GRPOConfig(), frame, Path("root"))  # fmt: skip
        batches: Any = Batches(frame)
        assert trainee.posterior_collector(ledger, run, batches) == "collect"
        return calls.pop()

    plain = collected()
    assert plain["select"] == SelectionConfig() and plain["prior"] is None
    got = collected(selection_model="learning", selection_score="ucb", selection_prior="ledger")
    assert got["select"] == SelectionConfig(model="learning", score="ucb")
    prior = got["prior"]
    assert isinstance(prior, CellPrior) and prior.update == 0  # rev0: a base model, clock 0
    assert prior.cells == {"arith 1": (16.0, PRIOR_SAMPLES), "arith 2": (2.0, 8.0)}
    if selection != "posterior":
        return
    assert plain["shares"] is None  # no loop: nothing read
    # the closed loop: a resumed run steers on the informative shares its steps recorded
    # (step 0: one of two groups informative, step 1: both; a skipped prompt is no group)
    pids = frame["problem_id"].to_list()
    rewards = {(0, pids[0]): [1.0, 0.0], (0, pids[1]): [1.0, 1.0], (1, pids[0]): [0.0, 1.0],
               (1, pids[2]): [1.0, 0.0]}  # fmt: skip
    rows = [("train-x", step, pid, i, "rev0", float(r), bool(r))
            for (step, pid), rs in rewards.items() for i, r in enumerate(rs)]  # fmt: skip
    cols = ["train_id", "step", "problem_id", "sample_idx", "policy", "reward", "correct"]
    ledger.write("train_rollouts", pl.DataFrame(rows, schema=cols, orient="row"))
    looped = collected(selection_target_share=0.3)
    assert looped["select"] == SelectionConfig(target_share=0.3)
    assert looped["shares"] == [0.5, 1.0]


def test_sieve_plan_picks_with_the_model_the_recipe_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_plan import write_pool

    recipe = tmp_path / "train.toml"
    recipe.write_text('selection = "posterior"\nselection_model = "learning"\n')
    assert pp.plan_selection(None, None) == SelectionConfig()
    assert pp.plan_selection(recipe, None) == SelectionConfig(model="learning")
    both = pp.plan_selection(recipe, None, {"selection_score": "ucb"})
    assert both == SelectionConfig(model="learning", score="ucb")
    with pytest.raises(SieveError, match="sieve plan: "):
        pp.plan_selection(None, None, {"selection_model": "oracle"})
    seen: list[SelectionConfig] = []
    arm = pp.arms.posterior_arm

    def spy(*args: Any, select: SelectionConfig | None = None, **kw: Any) -> Any:
        seen.append(select or SelectionConfig())
        return arm(*args, select=select, **kw)

    monkeypatch.setattr(pp.arms, "posterior_arm", spy)
    pool = tmp_path / "pool.parquet"
    write_pool(pool)
    argv = ["plan", "--pool", str(pool), "--json", "--train-config", str(recipe)]
    code, out, err = run_cli([*argv, "--home", str(tmp_path)], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert (payload["selection_model"], payload["selection_score"]) == ("learning", "thompson")
    row = next(r for r in payload["rows"] if r["policy"] == "posterior")
    assert row["label"] == "posterior (learning)" and row["training_groups"]
    assert seen and set(seen) == {SelectionConfig(model="learning")}
    code, out, err = run_cli(
        [*argv[:4], "--selection-score", "ucb", "--home", str(tmp_path)], capsys
    )
    assert code == 0, err
    assert json.loads(out)["selection_score"] == "ucb" and seen[-1] == SelectionConfig(score="ucb")


def test_the_options_and_the_recipe_share_one_definition() -> None:
    """`--selection*` are made from `SelectionSettings`, whose fields are the recipe's own:
    same types, descriptions and defaults."""
    import typer

    from flows.cli import app
    from pipeline.jobs.train.selection_settings import SelectionSettings

    params = {p.opts[0]: p for p in typer.main.get_group(app).commands["train"].params}
    for name, info in SelectionSettings.model_fields.items():
        mine = TrainSettings.model_fields[name]
        assert (mine.annotation, mine.description, mine.default) == (
            info.annotation, info.description, info.default
        )  # fmt: skip
        assert str(info.description) in str(params[f"--{name.replace('_', '-')}"].help)
