"""The evaluation job, written once: `eval_flow` (a Prefect flow) and `evaluate_model` (the same
sequence called without a Prefect run): held-out pass@1 by family x level, greedy and sampled,
both runs recorded in the ledger (purpose `eval`).

load the policy -> draw the held-out set (`pipeline.jobs.analysis.evaluate.heldout_set`) -> render
its prompts in the model's format -> sample and record greedy, then sampled -> read the table back
from the `heldout_pass1` view. The ledger is transient (locked only while a run is committed),
so readers work while an evaluation samples. Training evaluates through the same step
(`pipeline.jobs.analysis.evaluate.evaluate`) from its recorder.

Run: `sieve eval`.
Test: `pytest tests/flows/test_runtime.py tests/policy/test_evaluate.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from flows.runtime import PolicyParams, Runtime, step
from grpo_core.validate import AtLeastOne, Seed
from pipeline.core.hooks import Progress
from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, heldout_set
from pipeline.jobs.curate.curation import Policy, policy_for
from pipeline.sampling.budget import SamplingConfig
from pipeline.store import Ledger


def _eval_field(name: str) -> Any:
    """A flow parameter with `EvalConfig`'s default and help for its field `name` (one default,
    whichever entry point: the CLI's options come from the same fields)."""
    (spec,) = [f for f in dataclasses.fields(EvalConfig) if f.name == name]
    return Field(default=spec.default, description=spec.metadata["help"])


class EvalParams(PolicyParams):
    """Flow parameters (validated; unknown keys rejected)."""

    per_level: AtLeastOne = _eval_field("per_level")
    samples: AtLeastOne = _eval_field("samples")
    seed: Seed = _eval_field("seed")
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)

    def eval_config(self) -> EvalConfig:
        return EvalConfig(self.per_level, self.samples, self.sampling, self.seed)


@task(cache_policy=NO_CACHE)
def evaluate_policy(
    ledger: Ledger, pol: Policy, cfg: EvalConfig, progress: Progress | None
) -> pl.DataFrame:
    problems = heldout_set(cfg.per_level)
    questions = problems["question"].to_list()
    prompts_of = dict(zip(questions, pol.render(questions), strict=True))
    return evaluate(
        pol.sampler, ledger, pol.model_revision, prompts_of, cfg, problems, pol.prompt_format,
        progress,
    )  # fmt: skip


def evaluate_model(
    ledger: Ledger, pol: Policy, cfg: EvalConfig, progress: Progress | None = None
) -> pl.DataFrame:
    """Held-out pass@1 of the policy by family x level (family, level, problems, greedy,
    sampled, errors); inside `eval_flow` the step is a Prefect task."""
    return step(evaluate_policy, ledger, pol, cfg, progress)


@flow(name="sieve-eval", log_prints=True)
def eval_flow(params: EvalParams, runtime: Runtime | None = None) -> dict[str, Any]:
    """Evaluate the model on the held-out set; returns its revision and table (as rows)."""
    rt = runtime or Runtime()
    pol = rt.policy or policy_for(params.model, params.backend, params.base_urls, params.engine)
    ledger = rt.ledger or Ledger.open(params.home, transient=True)
    try:
        table = evaluate_model(ledger, pol, params.eval_config(), rt.progress)
    finally:
        if rt.ledger is None:
            ledger.close()
    return {"model_revision": pol.model_revision, "table": table.to_dicts()}


__all__ = ["EvalParams", "eval_flow", "evaluate_model"]
