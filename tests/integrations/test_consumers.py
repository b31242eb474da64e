"""Exports read by their consumers' own code: verl's RLHFDataset with Sieve's CurriculumSampler,
OpenRLHF's blending_datasets + PromptDataset (both from `.venv/consumers`, see
consumers_child.py), and the sampler's order, weights and per-prompt G on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from flows.curate import curate
from pipeline.integrations.verl import CurriculumSampler
from pipeline.jobs.data.export import curriculum_table, export_curriculum
from pipeline.policy.prompts import render_raw
from pipeline.problems import generate_mix
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.simulated import RATES, simulated_policy

pytestmark = pytest.mark.integration  # 21 s: verl / OpenRLHF loaders in a child

ROOT = Path(__file__).resolve().parents[2]
CONSUMERS = Path(sys.prefix) / "consumers"  # make install: verl, OpenRLHF there (--no-deps)
EVIDENCE = {"stage", "group_size", "weight", "p_mean", "p_low", "p_high", "n_samples",
            "n_correct", "model_revision", "verifier_version", "curriculum_id"}  # fmt: skip


def table(stage: list[int], weight: list[float], group_size: list[int]) -> pa.Table:
    info = pa.StructArray.from_arrays(
        [pa.array(stage), pa.array(weight), pa.array(group_size)],
        names=["stage", "weight", "group_size"],
    )
    return pa.table({"extra_info": info})


def test_stage_one_comes_first_and_no_seed_keeps_the_exported_order() -> None:
    sampler = CurriculumSampler(table([1, 1, 1, 2, 2], [1.0] * 5, [8] * 5))
    assert list(sampler) == [0, 1, 2, 3, 4] and len(sampler) == 5
    mixed = CurriculumSampler(table([2, 1, 2, 1], [1.0] * 4, [8] * 4), {"seed": 3})
    assert [mixed.stage[i] for i in mixed] == [1, 1, 2, 2]


def test_heavier_prompts_come_earlier_within_a_stage_and_weight_zero_last() -> None:
    weights = [4.0] * 10 + [1.0] * 10 + [0.0] * 2
    sampler = CurriculumSampler(table([1] * 22, weights, [8] * 22), {"seed": 0})
    ranks = []
    for epoch in range(200):
        sampler.set_epoch(epoch)
        order = sampler.order()
        assert set(order[-2:].tolist()) == {20, 21}  # weight 0: never before a weighted one
        rank = np.empty(22)
        rank[order] = np.arange(22)
        ranks.append((rank[:10].mean(), rank[10:20].mean()))
    heavy, light = np.mean(ranks, axis=0)
    assert heavy < light - 3  # Efraimidis-Spirakis: P(first) is proportional to the weight


def test_the_same_seed_gives_the_same_order() -> None:
    data = table([1] * 50, list(np.linspace(0.1, 2, 50)), [8] * 50)
    assert list(CurriculumSampler(data, {"seed": 7})) == list(CurriculumSampler(data, {"seed": 7}))
    assert list(CurriculumSampler(data, {"seed": 7})) != list(CurriculumSampler(data, {"seed": 8}))


def test_rollout_n_repeats_each_prompt_for_its_group_size() -> None:
    sampler = CurriculumSampler(table([1, 2, 2], [1.0] * 3, [8, 32, 4]), {"rollout_n": 8})
    assert list(sampler) == [0, 1, 1, 1, 1, 2] and len(sampler) == 6


def test_bad_extra_info_is_refused() -> None:
    with pytest.raises(ValueError, match="weight must be finite"):
        CurriculumSampler(table([1], [-1.0], [8]))
    with pytest.raises(KeyError):
        CurriculumSampler(pa.table({"prompt": ["x"]}))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pa.Table]:
    """A curriculum over arith and a reasoning-gym family, exported for verl and OpenRLHF."""
    pytest.importorskip("reasoning_gym")
    out = tmp_path_factory.mktemp("exports")
    mix = {"arith": "1-6", "rg:chain_sum": "1-4"}
    cfg = CurateConfig(n_candidates=120, mix=mix, seed=3, chunk_size=40)
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    with Ledger.memory() as ledger:
        curate(ledger, simulated_policy(problems, RATES), cfg)
        verl = export_curriculum(ledger, "latest", "verl", out / "verl").path
        openrlhf = export_curriculum(ledger, "latest", "openrlhf", out / "openrlhf").path
        items = curriculum_table(ledger, verl.name.split(".")[0])
    return verl, openrlhf, items


def run_consumer(kind: str, path: Path, tokenizer_dir: Path) -> dict:
    if not (CONSUMERS / kind).is_dir():
        pytest.skip(f"{kind} is not installed in {CONSUMERS} (make install puts it there)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(CONSUMERS), str(ROOT)])}
    child = ROOT / "tests" / "integrations" / "consumers_child.py"
    done = subprocess.run(
        [sys.executable, str(child), kind, str(path), str(tokenizer_dir)],
        capture_output=True, text=True, env=env, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_verls_rlhf_dataset_and_dataloader_read_the_export_in_curriculum_order(
    exported: tuple[Path, Path, pa.Table], tiny_model_dir: Path
) -> None:
    path, _, items = exported
    got = run_consumer("verl", path, tiny_model_dir)
    sizes = np.array(items["group_size"].to_pylist())
    assert got["rows"] == items.num_rows > 0
    assert got["yielded"] == got["sampler_len"] == int(np.maximum(1, np.rint(sizes / 8)).sum())
    assert got["stages"] == sorted(got["stages"]) and set(got["stages"]) == {1, 2}
    question = items["question"][0].as_py()
    assert got["first_prompt"] == [{"role": "user", "content": render_raw(question)}]
    assert got["ground_truth"] == items["answer"][0].as_py()
    assert set(got["first_extra_info"]) >= EVIDENCE
    assert got["first_extra_info"]["n_samples"] == items["n_samples"][0].as_py()
    assert {"extra_info", "reward_model", "raw_prompt"} <= set(got["batch_keys"])


def test_openrlhfs_prompt_dataset_reads_the_export_in_order(
    exported: tuple[Path, Path, pa.Table], tiny_model_dir: Path
) -> None:
    _, path, items = exported
    got = run_consumer("openrlhf", path, tiny_model_dir)
    assert got["rows"] == items.num_rows
    assert got["prompts"] == [render_raw(q) for q in items["question"].to_pylist()]
    assert got["labels"] == items["answer"].to_pylist()
    assert got["stages"] == items["stage"].to_pylist() == sorted(got["stages"])
    assert EVIDENCE - {"stage"} <= set(got["extra"])
