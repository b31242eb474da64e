"""Training rollouts in the ledger (`pipeline.jobs.train.recorder.Recorder`, migration 0010): every
group a step sampled lands in `train_rollouts` with its step, policy and verdicts; a resumed run
rewriting a step does not duplicate it; `train_group_stats` / `train_prompt_trajectory` count what
the table holds; `rollouts` (and so `prompt_stats`) holds no training rows."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl
import pytest

from flows.train import train
from grpo_core import checkpoint as ckpt
from grpo_core.advantages import is_uninformative
from grpo_core.trainer import Item, Sample, Scores
from pipeline.jobs.train.settings import TrainSettings
from pipeline.store import Ledger

STEPS = 4
SETTINGS = TrainSettings(
    grpo={"total_steps": STEPS, "checkpoint_every": 2, "max_new_tokens": 4, "lr": 1e-3},
    rollouts_per_step=16,
    eval_per_level=1,
    eval_samples=1,
    eval_families=["arith"],
)


def even_length(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    """Correct when the completion has an even number of characters."""
    ok = [len(s.text) % 2 == 0 for s in samples]
    return Scores([float(x) for x in ok], list(ok))


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_model_dir: Path,
    write_curriculum: Callable[[Ledger], object],
) -> tuple[Path, Path, str, list[dict[str, float]]]:
    """One 4-step run (built once for this file; a test that writes copies its home first)."""
    home = tmp_path_factory.mktemp("train-rollouts") / "home"
    model = home / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
        result = train(ledger, "cur-test", model, SETTINGS, home, reward=even_length)
    return home, model, result.train_id, result.history


def test_every_step_writes_its_groups_with_policy_and_verdicts(
    trained: tuple[Path, Path, str, list[dict[str, float]]],
) -> None:
    home, _, train_id, history = trained
    with Ledger.open(home) as ledger:
        rows = ledger.sql("SELECT * FROM train_rollouts ORDER BY step, problem_id, sample_idx")
        ckpts = dict(ledger.run("SELECT step, model_revision FROM checkpoints"))
        base = ledger.run("SELECT base_revision FROM train_runs")[0][0]
        train_rows = ledger.run(
            "SELECT count(*) FROM rollouts JOIN sampling_runs USING (run_id) "
            "WHERE purpose <> 'eval'"
        )
    per_step = rows.group_by("step").len().sort("step")
    assert per_step["step"].to_list() == list(range(STEPS))
    assert per_step["len"].to_list() == [int(h["rollouts"]) for h in history]
    assert set(rows["train_id"]) == {train_id}
    # the reward function's verdicts, read back from the stored completions
    even = rows["completion"].str.len_chars() % 2 == 0
    assert rows["correct"].to_list() == even.to_list()
    assert 0 < rows["correct"].sum() < rows.height  # both verdicts occur
    assert rows["reward"].to_list() == even.cast(pl.Float64).to_list()
    # the policy: the base at step 0, checkpoint 2's revision at step 2, else <train_id>@<step>
    policy = dict(rows.select("step", "policy").unique().iter_rows())
    assert policy == {0: base, 1: f"{train_id}@1", 2: ckpts[2], 3: f"{train_id}@3"}
    assert rows["behaviour_logprob"].null_count() == 0 and rows["behaviour_logprob"].max() <= 0
    assert set(rows["finish_reason"]) <= {"stop", "length"}
    assert train_rows == [(0,)]  # training never writes to rollouts (nor prompt_stats)


def test_a_resumed_run_rewrites_its_steps_without_duplicates(
    trained: tuple[Path, Path, str, list[dict[str, float]]], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(trained[0], home)
    model, train_id = home / "models" / "tiny", trained[2]
    with Ledger.open(home) as ledger:
        before = ledger.checksum("train_rollouts")
    shutil.rmtree(ckpt.step_dir(home / "checkpoints" / train_id, STEPS))  # back to step 2
    with Ledger.open(home) as ledger:
        again = train(ledger, "cur-test", model, SETTINGS, home, resume=True, reward=even_length)
        assert again.resumed_from == 2
        assert ledger.checksum("train_rollouts") == before  # steps 2-3 replaced, same rows


def test_the_views_count_what_the_table_holds(
    trained: tuple[Path, Path, str, list[dict[str, float]]],
) -> None:
    home, *_, history = trained
    with Ledger.open(home) as ledger:
        rows = ledger.sql("SELECT * FROM train_rollouts")
        groups = ledger.sql("SELECT * FROM train_group_stats ORDER BY step, problem_id")
        paths = ledger.sql("SELECT * FROM train_prompt_trajectory ORDER BY problem_id")
    keys = ["step", "problem_id"]
    expect = (
        rows.group_by(keys)
        .agg(
            pl.len().alias("n"),
            pl.col("correct").sum().alias("k"),
            (~is_uninformative(pl.col("reward").max(), pl.col("reward").min())).alias("inf"),
        )
        .sort(keys)
    )
    assert groups.select(*keys, "n", "k", "informative").rows() == expect.rows()
    # the trainer's own count of zero-variance groups, step by step
    share = groups.group_by("step").agg((~pl.col("informative")).mean()).sort("step")
    assert share["informative"].to_list() == pytest.approx([h["zero_var_share"] for h in history])
    assert set(groups["n"]) <= {4, 8}  # the curriculum's group sizes
    trajectory = (
        expect.sort("step")
        .group_by("problem_id")
        .agg(
            pl.len().alias("steps_drawn"),
            pl.col("step").filter(pl.col("k") > 0).min().alias("first_step_solved"),
            (~pl.col("inf")).sum().alias("steps_zero_variance"),
            (pl.col("k") / pl.col("n")).alias("pass_rate_by_step"),
        )
        .sort("problem_id")
    )
    got = paths.select(trajectory.columns)
    assert got.cast(trajectory.schema).rows() == trajectory.rows()
