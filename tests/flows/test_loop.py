"""`sieve loop`: nights chain through the ledger (wiring on a tiny budget, not the numbers)."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl

from flows.loop import heldout_by_revision, loop
from pipeline.policy.model import folder_revision
from pipeline.recipes import TrainSettings
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
    nights = loop(home, 2, CURATE, TRAIN, date(2026, 11, 1), lines.append, model=str(base))
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
    again = loop(home, 2, CURATE, TRAIN, date(2026, 11, 1), lines.append, model=str(base))
    assert [n["done"]["train_id"] for n in again] == [first["train_id"], second["train_id"]]
    assert "done already" in lines[-1] and len(lines) == 4
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.run("SELECT count(*) FROM train_runs WHERE status = 'finished'") == [(3,)]
