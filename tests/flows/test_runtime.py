"""Each job's sequence is written once (`flows.runtime.step`): the flow runs its steps as
Prefect tasks, the plain call runs the same steps as functions, and both leave the same ledger;
the flows report progress through the one protocol (`pipeline.core.hooks`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from prefect import flow, task
from prefect.context import TaskRunContext

from flows.curate import CurateParams, curate, curate_flow
from flows.evaluate import EvalParams, eval_flow, evaluate_model
from flows.runtime import Runtime, in_flow_run, step
from pipeline.core.hooks import ProgressEvent
from pipeline.jobs.analysis.evaluate import heldout_set
from pipeline.store import Ledger
from tests.simulated import RATES, simulated_policy

_spec = importlib.util.spec_from_file_location(
    "curate_child", Path(__file__).parents[1] / "curate_child.py"
)
assert _spec and _spec.loader
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)

TABLES = ("rollouts", "curriculum_items", "rejections", "problems")
HEAD = "SELECT curriculum_id, model, model_revision, config, status FROM curricula"


@task
def where(x: int) -> tuple[bool, int]:
    return TaskRunContext.get() is not None, x + 1


@flow
def two_steps() -> tuple[bool, int]:
    return step(where, 1)


def test_a_step_is_a_task_inside_a_flow_run_and_a_function_outside() -> None:
    assert not in_flow_run()
    assert step(where, 1) == (False, 2)
    assert two_steps() == (True, 2)


@pytest.mark.integration  # 6 s
def test_the_flow_and_the_plain_call_leave_the_same_ledger(tmp_path: Path) -> None:
    policy = child.simulated_policy(child.CFG)
    events: list[ProgressEvent] = []
    with Ledger.open(tmp_path / "flow", transient=True) as led:
        params = CurateParams(model="simulated", config=child.CFG)
        summary = curate_flow(params, Runtime(ledger=led, policy=policy, progress=events.append))
    with Ledger.open(tmp_path / "flow", read_only=True) as led:
        by_flow = {t: led.checksum(t) for t in TABLES} | {"head": led.sql(HEAD).rows()}
    with Ledger.open(tmp_path / "plain") as led:
        result = curate(led, policy, child.CFG)
        by_call = {t: led.checksum(t) for t in TABLES} | {"head": led.sql(HEAD).rows()}
    assert by_flow == by_call
    assert summary["curriculum_id"] == result.curriculum_id
    assert summary["rollouts_spent"] == result.rollouts
    # one event per committed chunk, screen then refine, each counting to its own total
    stages = [e.stage for e in events]
    assert stages == sorted(stages, key=["screen", "refine"].index) and set(stages) == {
        "screen",
        "refine",
    }
    for stage in ("screen", "refine"):
        mine = [e for e in events if e.stage == stage]
        assert [e.done for e in mine] == list(range(1, len(mine) + 1))
        assert all(e.total == len(mine) and e.job == "curate" for e in mine)
    n_screen = -(-result.rollouts["screen"] // (child.CFG.screen_g * child.CFG.chunk_size))
    assert len([e for e in events if e.stage == "screen"]) == n_screen


def test_the_eval_flow_records_what_the_plain_call_records(tmp_path: Path) -> None:
    policy = simulated_policy(heldout_set(2), RATES)
    params = EvalParams(model="simulated", home=str(tmp_path / "a"), per_level=2, samples=2)
    events: list[ProgressEvent] = []
    out = eval_flow(params, Runtime(policy=policy, progress=events.append))
    with Ledger.open(tmp_path / "b") as led:
        table = evaluate_model(led, policy, params.eval_config())
    assert out["model_revision"] == "rev-sim"
    assert out["table"] == table.to_dicts() and table.height > 0
    assert [(e.stage, e.done, e.total) for e in events] == [("greedy", 1, 2), ("sampled", 2, 2)]
    with Ledger.open(tmp_path / "a", read_only=True) as led:
        runs = led.sql("SELECT purpose, group_size FROM sampling_runs ORDER BY group_size")
    assert runs.rows() == [("eval", 1), ("eval", 2)]


def test_prefect_records_a_runtime_without_walking_into_what_it_holds() -> None:
    """Prefect stores a flow run's parameters through FastAPI's jsonable_encoder, which
    deep-copies any dataclass it reaches: a Runtime holding an engine must stay opaque."""
    import dataclasses

    from flows.curate import curate_flow

    @dataclasses.dataclass
    class Engine:  # stands in for a loaded model: copying it is the bug
        weights: list[int]

        def __deepcopy__(self, memo: object) -> Engine:
            raise AssertionError("the engine was deep-copied")

    rt = Runtime(engine=Engine([1, 2]), progress=lambda e: None)
    assert curate_flow.serialize_parameters({"runtime": rt}) == {"runtime": "<Runtime>"}
    assert not hasattr(rt, "__dict__")
