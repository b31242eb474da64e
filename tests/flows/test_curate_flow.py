"""The Prefect curation flow: runs, a two-stage curriculum, reasons; a re-run adds nothing."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from flows import curate as curate_flow
from pipeline.store import Ledger

_spec = importlib.util.spec_from_file_location(
    "curate_child", Path(__file__).parents[1] / "curate_child.py"
)
assert _spec and _spec.loader
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)

TABLES = ("sampling_runs", "rollouts", "curricula", "curriculum_items", "rejections", "problems")


def params(home: Path) -> curate_flow.CurateParams:
    p = curate_flow.CurateParams(model="simulated", home=str(home), config=child.CFG)
    curate_flow._POLICIES[curate_flow.policy_key(p)] = child.simulated_policy(child.CFG)
    return p


def test_flow_leaves_runs_stages_and_reasons_and_reruns_add_nothing(tmp_path: Path) -> None:
    summary = curate_flow.run(params(tmp_path))
    assert set(summary["kept"]) == {"stage1", "stage2"}
    assert summary["rejected"]["heldout"] > 0 and summary["rejected"]["all_wrong"] > 0
    assert summary["rollouts_spent"]["screen"] > 0 and summary["rollouts_spent"]["refine"] > 0
    with Ledger.open(tmp_path, read_only=True) as led:
        runs = led.sql("SELECT purpose, group_size, status FROM sampling_runs ORDER BY 1").rows()
        g = led.sql("SELECT stage, min(group_size) AS lo FROM curriculum_items GROUP BY 1")
        before = {t: led.checksum(t) for t in TABLES}
    assert runs == [("refine", 32, "finished"), ("screen", 8, "finished")]
    g_by_stage = dict(g.iter_rows())
    assert g_by_stage[1] == child.CFG.stage1_g and g_by_stage[2] > child.CFG.stage1_g
    curate_flow.run(params(tmp_path))
    with Ledger.open(tmp_path, read_only=True) as led:
        assert {t: led.checksum(t) for t in TABLES} == before


def test_flow_with_nothing_informative_reports_an_empty_curriculum(tmp_path: Path) -> None:
    cfg = child.CFG.model_copy(update={"mix": {"arith": "1"}, "n_candidates": 50})
    p = curate_flow.CurateParams(model="simulated-easy", home=str(tmp_path), config=cfg)
    curate_flow._POLICIES[curate_flow.policy_key(p)] = child.simulated_policy(cfg)
    summary = curate_flow.run(p)
    assert summary["kept"].get("stage2", 0) == 0
    assert set(summary["rejected"]) <= {"all_correct", "heldout", "duplicate"}


def test_flow_on_a_briefly_trained_tiny_policy(tmp_path: Path, partly_trained_dir: Path) -> None:
    """The real hf path: a tiny policy trained for a few hundred steps is partly right."""
    from pipeline.selection import CurateConfig

    model_dir = tmp_path / "tiny"
    shutil.copytree(partly_trained_dir, model_dir)
    curate_cfg = CurateConfig(n_candidates=120, mix={"arith": "2-3"}, seed=2, chunk_size=64)
    p = curate_flow.CurateParams(model=str(model_dir), home=str(tmp_path), config=curate_cfg)
    summary = curate_flow.run(p)
    assert summary["rollouts_spent"]["screen"] > 0 and summary["rollouts_spent"]["refine"] > 0
    with Ledger.open(tmp_path, read_only=True) as led:
        runs = led.sql("SELECT purpose, backend FROM sampling_runs ORDER BY 1").rows()
        stages = led.sql("SELECT stage, min(group_size) AS g FROM curriculum_items GROUP BY 1")
        reasons = set(led.sql("SELECT DISTINCT reason FROM rejections")["reason"])
    assert runs == [("refine", "hf"), ("screen", "hf")]
    g = dict(stages.iter_rows())  # the policy is partly right: both stages fill
    assert set(g) == {1, 2} and g[1] == curate_cfg.stage1_g and g[2] > g[1]
    assert "heldout" in reasons
