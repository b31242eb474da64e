"""SieveCurriculumSampler under verl's own code (verl_posterior_child.py): built by verl 0.7.1's
`create_rl_sampler` from `data.sampler.class_path` over verl's RLHFDataset and updated with
DataProto batches as verl's trainer holds them; on verl 0.9.1, fed through the dataset's
`on_batch_end`. Every group lands in the ledger, and each step is drawn from the curation's
evidence and the groups of the steps before it. `batch_samples` (what `update` reads of a batch)
is also checked on its own, without verl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch

from flows.curate import curate
from pipeline.integrations.ledger_run import LedgerRun
from pipeline.integrations.verl_posterior import batch_samples
from pipeline.jobs.data.export import export_curriculum
from pipeline.policy.model import folder_revision
from pipeline.problems import generate_mix
from pipeline.selection import CurateConfig
from pipeline.selection.stats import learnability
from pipeline.store import Ledger
from tests.simulated import RATES, simulated_policy

ROOT = Path(__file__).resolve().parents[2]
# make install: verl 0.9.1 with tensordict in consumers, verl 0.7.1 (the class-path interface)
# in consumers-verl07, all --no-deps
CONSUMERS = Path(sys.prefix) / "consumers"
VERL07 = Path(sys.prefix) / "consumers-verl07"


def test_batch_samples_reads_rewards_verdicts_and_responses() -> None:
    """Scores summed over tokens, `acc` before the reward threshold, the response under its
    mask, a NaN score a failed verifier, a full response cut at the budget."""
    tok = SimpleNamespace(batch_decode=lambda rows, **_: [" ".join(map(str, r)) for r in rows])
    batch = SimpleNamespace(
        batch={
            "token_level_scores": torch.tensor(
                [[0.0, 1.0, 0.0], [0.0, 0.2, 0.0], [float("nan"), 0.0, 0.0]]
            ),
            "responses": torch.tensor([[5, 6, 0], [7, 8, 9], [4, 0, 0]]),
            "response_mask": torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]]),
        },
        non_tensor_batch={"extra_info": np.array([{"problem_id": "p"}] * 3, dtype=object)},
    )
    got = batch_samples(batch, tok, correct_at=1.0)
    assert got["reward"].to_list() == [1.0, pytest.approx(0.2), None]
    assert got["correct"].to_list() == [True, False, None]
    assert got["completion"].to_list() == ["5 6", "7 8 9", "4"]
    assert got["finish_reason"].to_list() == ["stop", "length", "stop"]
    batch.non_tensor_batch["acc"] = np.array([False, True, True], dtype=object)
    assert batch_samples(batch, tok, 1.0)["correct"].to_list() == [False, True, None]


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[Path, Path]:
    """A Sieve home whose ledger holds a curation by the tiny model's weights, and its verl
    export."""
    out = tmp_path_factory.mktemp("verl_posterior")
    cfg = CurateConfig(n_candidates=60, mix={"arith": "2-5"}, seed=3, chunk_size=30)
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    policy = simulated_policy(problems, RATES, folder_revision(tiny_model_dir))
    with Ledger.open(out / "home") as ledger:
        curate(ledger, policy, cfg)
        path = export_curriculum(ledger, "latest", "verl", out / "verl", prompt_format="raw").path
    return out / "home", path


def run_child(mode: str, verl: Path, curated: tuple[Path, Path], model: Path) -> dict:
    for folder in (verl / "verl", CONSUMERS / "tensordict"):
        if not folder.is_dir():
            pytest.skip(f"{folder} is not installed (make install puts it there)")
    paths = [str(verl), str(CONSUMERS), str(ROOT)]  # omegaconf, tensordict: consumers
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    child = ROOT / "tests" / "integrations" / "verl_posterior_child.py"
    home, path = curated
    done = subprocess.run(
        [sys.executable, str(child), mode, str(home), str(path), str(model)],
        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def recorded(
    curated: tuple[Path, Path], model: Path, train_id: str
) -> tuple[pl.DataFrame, LedgerRun, list[str]]:
    """The run's groups in the ledger, the run read back (its picks recomputable) and the
    export's problem id of each row."""
    home, path = curated
    ids = pl.read_parquet(path)["extra_info"].struct.field("problem_id").to_list()
    with Ledger.open(home) as ledger:
        groups = ledger.sql(
            "SELECT step, problem_id, k, n FROM train_group_stats WHERE train_id = $t "
            "ORDER BY step",
            {"t": train_id},
        )
        return groups, LedgerRun(ledger, ids, folder_revision(model), train_id), ids


def check_draws(
    groups: pl.DataFrame, run: LedgerRun, ids: list[str], picked: list[list[str]]
) -> None:
    """Each step trained what verl's loader delivered, every group whole, and the ledger gives
    the same pick again from the groups of the steps before it."""
    assert groups.height == 3 * len(picked) and set(groups["n"]) == {4}
    for step, rows in enumerate(picked):
        assert sorted(groups.filter(pl.col("step") == step)["problem_id"]) == sorted(rows)
        assert [ids[i] for i in run.pick(step, 3, upto=step - 1)] == rows


# in `make test` (~25 s: the child imports verl's dataset code, tensordict and torch): the
# class-path loading is what a verl user configures
def test_verls_class_path_sampler_records_each_step_and_draws_from_it(
    curated: tuple[Path, Path], tiny_model_dir: Path
) -> None:
    got = run_child("class_path", VERL07, curated, tiny_model_dir)
    assert "AbstractCurriculumSampler" in got["bases"]  # what verl's trainer calls update on
    assert got["prior"] > 0  # the curation's groups by the same weights are evidence
    groups, run, ids = recorded(curated, tiny_model_dir, got["train_id"])
    check_draws(groups, run, ids, got["picked"])
    flat = groups.filter(pl.col("k") == 0)["problem_id"][0]  # an all-wrong group
    cell, now = [run.cell_of[flat]], run.clock + 3
    after = learnability(*run.model(run.evidence(2), [flat], cell, now))[0]
    assert after < learnability(*run.model(run.evidence(-1), [flat], cell, now))[0]


@pytest.mark.integration  # ~20 s, as above
def test_on_newer_verl_the_dataset_hook_records_each_step(
    curated: tuple[Path, Path], tiny_model_dir: Path
) -> None:
    got = run_child("on_batch_end", CONSUMERS, curated, tiny_model_dir)
    assert "AbstractCurriculumSampler" not in got["bases"]  # verl 0.9.1 has none
    groups, run, ids = recorded(curated, tiny_model_dir, got["train_id"])
    check_draws(groups, run, ids, got["picked"])
    assert set(groups["k"]) <= {0, 2}  # the batch's `acc`: even answers 2 of 4 right
