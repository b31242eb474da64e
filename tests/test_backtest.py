"""`pipeline.jobs.analysis.backtest` and `sieve backtest`: each policy on a hand-made pool whose
answers fix every count; refusal (naming how many samples) when a policy needs more than is stored;
the CLI over a curated home, checked against the ledger's own views.

Test: `.venv/bin/pytest tests/test_backtest.py -q`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.analysis import backtest as bt
from pipeline.jobs.analysis import backtest_arms as arms
from pipeline.jobs.analysis import backtest_pool as bp
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.cli_runner import error_line, run_cli
from tests.simulated import RATES, reachable_problems, simulated_policy

# eight samples per prompt, in draw order (1 = correct)
ANSWERS = {
    "a": "11111111",  # always right
    "b": "00000000",  # never
    "c": "10101010",  # every pair disagrees
    "d": "00001111",  # each half agrees, the whole disagrees
    "e": "10000000",  # one early success
}
BAND = {"c", "d", "e"}  # pass rate over all 8 in [0.1, 0.9]
CFG = CurateConfig(uncertain_hard_share=0.0)  # band [0.1, 0.9]


def pool() -> pl.DataFrame:
    rows = [(p, i, int(x)) for p, text in ANSWERS.items() for i, x in enumerate(text)]
    frame = pl.DataFrame(rows, schema=["problem_id", "sample_idx", "r"], orient="row")
    return frame.select(
        "problem_id",
        "sample_idx",
        pl.col("r").cast(pl.Float64).alias("reward"),
        (pl.col("r") == 1).alias("correct"),
    )


def picked(arm: arms.Arm) -> set[str]:
    return set(arm.selected.to_list())


def test_uniform_counts_every_group() -> None:
    arm = arms.uniform_arm(pool(), 4)  # samples 0-3: c and e disagree
    assert (arm.rollouts, arm.informative_groups, arm.per_informative) == (20, 2, 10.0)
    assert picked(arm) == set(ANSWERS)
    assert arms.uniform_arm(pool(), 8).informative_groups == 3  # d disagrees over all 8


def test_dapo_draws_until_the_batch_is_full() -> None:
    full = arms.dapo_arm(pool(), 2, batch=2, seed=0)  # c and e are the informative pairs
    assert full.informative_groups == 2 and full.report["batch_filled"]
    assert picked(full) == {"c", "e"} and full.rollouts == 2 * full.report["groups_drawn"]
    short = arms.dapo_arm(pool(), 2, batch=3, seed=0)  # only two exist: every prompt is drawn
    assert (short.rollouts, short.informative_groups, short.report["batch_filled"]) == (
        10,
        2,
        False,
    )


def test_greso_skips_zero_variance_prompts_in_epoch_two() -> None:
    skip = arms.greso_arm(pool(), 2, explore=0.0, seed=0)  # epoch 2 samples c, e on 2-3
    assert (skip.rollouts, skip.informative_groups, picked(skip)) == (14, 3, {"c"})
    again = arms.greso_arm(pool(), 2, explore=1.0, seed=0)  # nothing skipped
    assert (again.rollouts, again.informative_groups, again.report["epoch2_skipped"]) == (20, 3, 0)


def test_speed_and_pilot_commit() -> None:
    speed = arms.speed_arm(pool(), init=2, cont=2)  # c, e continued to 4 samples
    assert (speed.rollouts, speed.informative_groups, picked(speed)) == (14, 2, {"c", "e"})
    pilot = arms.pilot_arm(pool(), pilot=4, g=4, band=(0.1, 0.9))  # c (0.5), e (0.25) committed
    assert (pilot.rollouts, pilot.informative_groups, picked(pilot)) == (28, 1, {"c", "e"})


def test_sieve_screens_refines_and_judges_on_unseen_samples() -> None:
    cfg = CFG.model_copy(update={"screen_g": 2, "refine_g": 2, "stage1_g": 2})
    arm = arms.sieve_arm(pool(), cfg)
    assert arm.report["refined"] == 2  # c and e: the mixed screens
    kept = picked(arm)
    assert "c" in kept and kept <= {"c", "e"}
    assert arm.rollouts == 5 * 2 + 2 * 2 + 2 * len(kept)  # screen, refine, training groups
    # training groups are samples 4-5: c (1, 0) informative, e (0, 0) not
    assert arm.informative_groups == int("c" in kept)


def test_the_table_scores_recall_and_precision_on_the_band() -> None:
    specs = [bt.Spec.parse("uniform:g=4"), bt.Spec.parse("speed:init=2,cont=2")]
    table = bt.backtest(pool(), specs, CFG)
    assert set(bt.in_band(pool(), (0.1, 0.9)).to_list()) == BAND
    rows = {r["policy"]: r for r in table.to_dicts()}
    assert rows["uniform g=4"]["recall"] == 1.0 and rows["uniform g=4"]["precision"] == 3 / 5
    assert rows["speed init=2 cont=2"]["recall"] == 2 / 3
    assert rows["speed init=2 cont=2"]["precision"] == 1.0


def test_a_policy_needing_more_samples_is_refused_saying_how_many() -> None:
    with pytest.raises(bp.NotEnoughSamples, match=r"needs 16 samples of 5 prompts; 5 .*fewest 8"):
        arms.uniform_arm(pool(), 16)
    # only the continued prompts need init + cont: c and e, of which both hold 8
    with pytest.raises(bp.NotEnoughSamples, match=r"needs 10 samples of 2 prompts; 2 .*fewest 8"):
        arms.speed_arm(pool(), init=2, cont=8)
    table = bt.backtest(pool(), [bt.Spec.parse("uniform:g=9")], CFG)  # default list: a row
    assert table["note"][0].startswith("refused: uniform (g=9) needs 9 samples")
    with pytest.raises(bp.NotEnoughSamples):
        bt.backtest(pool(), [bt.Spec.parse("uniform:g=9")], CFG, strict=True)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ppo", "unknown policy 'ppo'; valid: uniform, dapo"),
        ("dapo:g", "write parameters as key=value"),
        ("dapo:size=4", "policy dapo has no parameter 'size'; valid: g, batch, seed"),
        ("uniform:g=x", "policy uniform: g='x' is not a number"),
        ("speed:cont=0", "group sizes and batch must be positive"),
        ("greso:explore=2", "explore is a probability"),
        ("sieve:refine_g=2", "policy sieve: refine_g: must be >= screen_g"),
        ("sieve:train_g=-1", "train_g='-1' is not a positive whole number"),
    ],
)
def test_bad_policies_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(SieveError, match=re.escape(message)):
        bt.backtest(pool(), [bt.Spec.parse(spec)], CFG)


CURATE = CurateConfig(n_candidates=60, mix={"arith": "1-6"}, seed=3, chunk_size=60)


def test_the_cli_replays_a_curated_home(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: None)
    with Ledger.open(home) as ledger:
        result = curate(ledger, simulated_policy(reachable_problems(CURATE), RATES), CURATE)
        screen = ledger.sql(
            "SELECT count(*) AS n, count(*) FILTER (WHERE NOT zero_variance) AS inf, "
            "any_value(model_revision) AS rev FROM group_stats WHERE run_id = $r",
            {"r": result.screen_run},
        ).row(0)
        refined = ledger.run(
            "SELECT count(DISTINCT problem_id) FROM rollouts WHERE run_id = $r",
            {"r": result.refine_run},
        )[0][0]
    capsys.readouterr()
    png = tmp_path / "bt.png"
    g = CURATE.screen_g
    argv = ["backtest", "--home", str(home), "--format", "json", "--png", str(png)]
    code, out, err = run_cli([*argv, "--policy", f"uniform:g={g}"], capsys)
    assert code == 0 and err == "", err
    (row,) = json.loads(out)
    assert (row["rollouts"], row["informative_groups"]) == (screen[0] * g, screen[1])
    assert png.stat().st_size > 0
    # the curation's own config: its kept prompts have no samples after refine_g to train on
    config = tmp_path / "curate.toml"
    config.write_text('n_candidates = 60\nseed = 3\nchunk_size = 60\n[mix]\narith = "1-6"\n')
    code, _, err = run_cli([*argv, "--policy", "sieve", "--config", str(config)], capsys)
    line = error_line(code, err)
    stored = CURATE.screen_g + CURATE.refine_g
    assert f"needs {stored + CURATE.stage1_g} samples of" in line and f"(fewest {stored})" in line
    smaller = f"sieve:refine_g={CURATE.refine_g - CURATE.stage1_g}"  # leaves stage1_g unseen
    code, out, err = run_cli([*argv, "--policy", smaller, "--config", str(config)], capsys)
    assert code == 0 and err == "", err
    (row,) = json.loads(out)
    assert row["policy"].startswith(f"sieve screen_g={g} refine_g=24")
    assert (
        row["rollouts"] - row["trained_prompts"] * CURATE.stage1_g == screen[0] * g + refined * 24
    )
    code, _, err = run_cli([*argv, "--revision", "nope"], capsys)
    assert "no screen or refine rollouts of revision nope" in error_line(code, err)
    code, _, err = run_cli([*argv, "--policy", "ppo"], capsys)
    assert "unknown policy 'ppo'" in error_line(code, err)
    assert screen[2] == "rev-sim"


def test_a_ledger_without_screen_runs_is_one_line() -> None:
    with pytest.raises(SieveError, match="holds no screen runs to backtest"):
        bp.ledger_samples(Ledger.memory())
