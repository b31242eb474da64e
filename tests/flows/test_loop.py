"""`sieve loop`: nights chain through the ledger (wiring on a tiny budget, not the numbers)."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

from pipeline.loop import heldout_by_revision, loop
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from pipeline.train import TrainSettings

CURATE = CurateConfig(n_candidates=120, mix={"arith": "2-3"}, seed=2, chunk_size=64)
TRAIN = TrainSettings(
    grpo={"total_steps": 3, "checkpoint_every": 0, "max_new_tokens": 8},
    rollouts_per_step=32,
    eval_per_level=3,
    eval_samples=2,
    eval_families=["arith"],
)


def test_two_nights_chain_checkpoints_and_history(tmp_path: Path, partly_trained_dir: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(partly_trained_dir, home / "models" / "tiny")
    lines: list[str] = []
    nights = loop(home, 2, CURATE, TRAIN, date(2026, 11, 1), say=lines.append)
    assert [n["night"] for n in nights] == ["2026-11-01", "2026-11-02"]
    assert len(lines) == 2 and all("held-out sampled pass@1" in line for line in lines)
    first, second = nights[0]["train"], nights[1]["train"]
    # night 2 curated and trained from night 1's checkpoint
    assert nights[1]["model"] == first["checkpoint"]
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
        assert ledger.run("SELECT count(*) FROM train_runs WHERE status = 'finished'") == [(2,)]
