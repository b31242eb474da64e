"""`sieve loop`: nights chain through the ledger (wiring on a tiny budget, not the numbers)."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl

from flows.cli.summary import night_line
from flows.loop import loop
from pipeline.jobs.analysis.stats import heldout_by_revision
from pipeline.jobs.train.settings import TrainSettings
from pipeline.policy.model import folder_revision
from pipeline.selection import CurateConfig
from pipeline.store import Ledger

CURATE = CurateConfig(n_candidates=120, mix={"arith": "2-3"}, seed=2, chunk_size=64)
TRAIN = TrainSettings(
    grpo={
        "total_steps": 3,
        "checkpoint_every": 0,
        "max_new_tokens": 8,
        "beta_schedule": "fixed",
        "beta": 0.02,
    },
    rollouts_per_step=32,
    eval_per_level=3,
    eval_samples=2,
    eval_families=["arith"],
)


def foreign_checkpoint(home: Path, model_dir: Path, tmp_path: Path) -> Path:
    """A finished training of another model, registered as the newest checkpoint of all."""
    path = tmp_path / "foreign" / "step-000001"
    shutil.copytree(model_dir, path)
    future = datetime(2100, 1, 1, tzinfo=UTC)
    with Ledger.open(home) as ledger:
        ledger.write(
            "train_runs",
            pl.DataFrame(
                {
                    "train_id": ["train-foreign"], "curriculum_id": ["cur-foreign"],
                    "base_model": ["another"], "base_revision": ["another-model"],
                    "config": ["{}"], "started_at": [future], "finished_at": [future],
                    "status": ["finished"],
                }
            ),
        )  # fmt: skip
        row = {
            "train_id": ["train-foreign"], "step": [1], "path": [str(path)],
            "model_revision": [folder_revision(path)], "metrics": ["{}"], "created_at": [future],
        }  # fmt: skip
        ledger.write("checkpoints", pl.DataFrame(row))
    return path


def test_two_nights_on_a_model_continue_its_own_lineage(
    tmp_path: Path, partly_trained_dir: Path, tiny_model_dir: Path
) -> None:
    home = tmp_path / "home"
    base = tmp_path / "base"  # not <home>/models/tiny: the nights must follow --model
    shutil.copytree(partly_trained_dir, base)
    foreign = foreign_checkpoint(home, tiny_model_dir, tmp_path)
    lines: list[str] = []

    def said(index: int, night: dict[str, Any]) -> None:  # what `sieve loop` prints a night
        lines.append(night_line(index, night))

    nights = loop(home, 2, CURATE, TRAIN, date(2026, 11, 1), said, model=str(base))
    assert [n["night"] for n in nights] == ["2026-11-01", "2026-11-02"]
    assert len(lines) == 2 and all("held-out sampled pass@1" in line for line in lines)
    first, second = nights[0]["train"], nights[1]["train"]
    # night 1 starts from the given model, night 2 from night 1's checkpoint, never from the
    # newer checkpoint of another lineage
    assert nights[0]["model"] == str(base)
    assert first["base_revision"] == folder_revision(base)
    assert nights[1]["model"] == first["checkpoint"] != str(foreign)
    assert second["base_revision"] == first["final_revision"]
    assert nights[0]["curate"]["curriculum_id"] != nights[1]["curate"]["curriculum_id"]
    report = Path(nights[1]["report"])
    assert report.is_file() and "<img" in report.read_text()
    with Ledger.open(home, read_only=True) as ledger:
        curricula = ledger.sql("SELECT model_revision FROM curricula ORDER BY created_at")
        assert curricula["model_revision"].to_list()[1] == first["final_revision"]
        wide = heldout_by_revision(ledger)
        assert wide.columns[2:] == [
            first["base_revision"],
            first["final_revision"],
            second["final_revision"],
        ]
        assert ledger.run("SELECT count(*) FROM train_runs WHERE status = 'finished'") == [(3,)]
    # the same dates again: both finished on this lineage, so neither runs again (issue 47: a
    # re-run trained night 1 again, from the weights night 2 had made)
    again = loop(home, 2, CURATE, TRAIN, date(2026, 11, 1), said, model=str(base))
    assert [n["done"]["train_id"] for n in again] == [first["train_id"], second["train_id"]]
    assert "done already" in lines[-1] and len(lines) == 4
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.run("SELECT count(*) FROM train_runs WHERE status = 'finished'") == [(3,)]


def test_nights_that_refresh_the_difficulty_model(tmp_path: Path, partly_trained_dir: Path) -> None:
    """The product's night as a refresh (issue 46 point 4), through `sieve loop`'s code: night 1
    screens its candidates (no evidence yet); night 2 screens none of the cells night 1
    measured, takes their candidates by the cell's posterior, and trains with the posterior
    reading night 1's training groups; every rollout a night's training samples trains and
    lands in train_rollouts; the nights are one run (carry_over)."""
    from pipeline.selection.evidence import lineage_observations
    from pipeline.store.ids import curation_runs

    home = tmp_path / "home"
    base = tmp_path / "base"
    shutil.copytree(partly_trained_dir, base)
    # replay needs the curation sampled as training samples (8 tokens here, not the tiny
    # policy's 16): the trainer refuses stored samples drawn under other settings
    sampling = CURATE.sampling.model_copy(update={"max_new_tokens": 8})
    curate = CURATE.model_copy(
        update={"screen": "unknown", "known_cell_samples": 4.0, "sampling": sampling}
    )
    train = TRAIN.model_copy(
        update={"selection": "posterior", "replay_curation": True, "carry_over": True}
    )
    nights = loop(home, 2, curate, train, date(2026, 11, 1), model=str(base))
    first, second = nights[0], nights[1]
    assert first["curate"]["rollouts_spent"].get("screen", 0) > 0
    assert second["curate"]["rollouts_spent"].get("screen", 0) == 0  # both cells known
    with Ledger.open(home, read_only=True) as ledger:
        reasons = ledger.sql(
            "SELECT DISTINCT reason FROM curriculum_items WHERE curriculum_id = $c",
            {"c": second["curate"]["curriculum_id"]},
        )["reason"].to_list()
        assert set(reasons) <= {"cell_prior", "cell_prior_explore"} and reasons
        screen, _ = curation_runs(second["curate"]["curriculum_id"])
        assert (
            ledger.sql("SELECT count(*) FROM rollouts WHERE run_id = $r", {"r": screen}).item() == 0
        )
        t1, t2 = first["train"]["train_id"], second["train"]["train_id"]
        obs, now = lineage_observations(ledger, second["train"]["base_revision"], t2)
        steps = ledger.sql(
            "SELECT count(DISTINCT step) FROM train_group_stats WHERE train_id = $t", {"t": t1}
        ).item()
        assert now == steps  # night 2 starts on the clock where night 1 ended
        mine = ledger.sql(
            "SELECT problem_id, sum(n_samples) AS n FROM train_group_stats "
            "WHERE train_id = $t GROUP BY ALL",
            {"t": t1},
        )
        assert obs.filter(pl.col("update") < now)["n"].sum() >= mine["n"].sum()
        for tid in (t1, t2):  # fresh samples = samples stored; replayed ones were curation's
            m = dict(
                ledger.sql(
                    "SELECT name, sum(value) FROM train_metrics WHERE train_id = $t "
                    "AND name IN ('rollouts', 'replayed_rollouts') GROUP BY name",
                    {"t": tid},
                ).rows()
            )
            stored = ledger.sql(
                "SELECT sum(n_samples) FROM train_group_stats WHERE train_id = $t", {"t": tid}
            ).item()
            assert m["rollouts"] + m.get("replayed_rollouts", 0.0) == stored
