"""The Prefect curation flow: thin tasks over `pipeline.curate`.

generate + prior -> screen (one task per chunk) -> screen decisions -> refine (per chunk) ->
pooled stats -> curriculum. The ledger is the source of truth for resuming: every chunk task
commits its rollouts in one transaction, and `sample_run` starts a chunk task only for a chunk
whose rollouts are not all stored (and checks they are after it). Chunk tasks keep no Prefect
result cache: a persisted result keyed on the ledger's id once stood in for rows that a copied,
restored or partly deleted ledger lacked (such a ledger keeps its id), and that ledger curated
nothing and exited 0; the rows themselves are the only record of what is done. Runs left
`running` by a killed process are marked `crashed` at the start (a resumed run sets its own
status again).

The flow's ledger is transient (`Ledger.open(..., transient=True)`): it holds DuckDB's file lock
only while it reads or commits, so `sieve sql` and other readers work while a curation runs.

Run: `sieve curate` (Prefect's ephemeral local API; nothing to start).
Test: `pytest tests/flows`.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel, ConfigDict, Field

from pipeline import curate as core
from pipeline.sampling import EngineOptions
from pipeline.selection import CurateConfig, Screened, build_curriculum, screen_survivors
from pipeline.selection.rules import concat_rejections
from pipeline.store import Ledger, load_query


class CurateParams(BaseModel):
    """Flow parameters (validated; unknown keys rejected)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Model folder (for openai: also the served model name).")
    backend: str = Field(default="hf", description="hf, vllm or openai.")
    base_urls: list[str] = Field(default_factory=list, description="openai backend servers.")
    home: str | None = Field(default=None, description="Sieve home (ledger).")
    config: CurateConfig = Field(default_factory=CurateConfig)
    engine: EngineOptions | None = Field(
        default=None, description="vllm/openai engine options (memory, dtype, parallelism)."
    )


_POLICIES: dict[tuple[object, ...], core.Policy] = {}
_LEDGERS: dict[str, Ledger] = {}


def policy_key(params: CurateParams) -> tuple[object, ...]:
    """What makes two flow runs share one loaded policy: model, backend, servers, engine."""
    return (params.model, params.backend, tuple(params.base_urls), params.engine)


def policy(params: CurateParams) -> core.Policy:
    """One loaded policy per `policy_key` in this process."""
    key = policy_key(params)
    if key not in _POLICIES:
        _POLICIES[key] = core.policy_for(
            params.model, params.backend, params.base_urls, params.engine
        )
    return _POLICIES[key]


def release_policies() -> None:
    """Drop the loaded policies and stop their engines (a vLLM engine holds its memory until
    closed): the nightly flow calls it before training starts its own engine."""
    while _POLICIES:
        close = getattr(_POLICIES.popitem()[1].sampler, "close", None)
        if callable(close):
            close()


def ledger(home: str | None) -> Ledger:
    key = str(home)
    if key not in _LEDGERS:
        _LEDGERS[key] = Ledger.open(home, transient=True)
    return _LEDGERS[key]


def close_ledgers() -> None:
    while _LEDGERS:
        _LEDGERS.popitem()[1].close()


@task(cache_policy=NO_CACHE)
def select_candidates(
    params: CurateParams, exclude: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    led = ledger(params.home)
    led.run(load_query("reconcile_running"))
    history = core.load_history(led, exclude)
    cands = core.candidates(led, params.config, history)
    return core.prior(cands, params.config, history)


@task(cache_policy=NO_CACHE, task_run_name="{info.purpose}-chunk-{index}")
def sample_chunk(params: CurateParams, chunk: pl.DataFrame, info: core.RunInfo, index: int) -> int:
    return core.sample_chunk(
        ledger(params.home), policy(params), chunk, info, params.config.seed, index
    )


def sample_stage(params: CurateParams, problems: pl.DataFrame, info: core.RunInfo) -> None:
    """The plain chunk loop of `pipeline.curate`, with each chunk run as a Prefect task."""
    core.sample_run(
        ledger(params.home),
        policy(params),
        problems,
        info,
        params.config,
        run_chunk=lambda chunk, index: sample_chunk(params, chunk, info, index),
    )


@task(cache_policy=NO_CACHE)
def screen_decisions(params: CurateParams, run_id: str) -> tuple[Screened, list[int]]:
    stats = core.run_stats(ledger(params.home), [run_id])
    return screen_survivors(stats, params.config), core.histogram(stats)


@task(cache_policy=NO_CACHE)
def make_curriculum(
    params: CurateParams,
    runs: list[str],
    screened: Screened,
    rejected: pl.DataFrame,
    curriculum_id: str,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    led = ledger(params.home)
    refined = screened.refine["problem_id"].implode()
    pooled = core.run_stats(led, runs).filter(pl.col("problem_id").is_in(refined))
    items, dropped = build_curriculum(pooled, screened.all_correct, params.config)
    rejections = concat_rejections([rejected, screened.rejections, dropped])
    core.write_curriculum(led, curriculum_id, policy(params), params.config, items, rejections)
    return items, rejections


@flow(name="sieve-curate", log_prints=True)
def curate_flow(params: CurateParams) -> dict[str, Any]:
    """Curate a two-stage curriculum for the model; returns a summary."""
    cfg, pol = params.config, policy(params)
    key = core.curation_key(cfg, pol.model_revision)
    screen = core.run_info(pol, "screen", cfg.screen_g, key, cfg)
    refine = core.run_info(pol, "refine", cfg.refine_g, key, cfg)
    try:
        kept, rejected = select_candidates(params, [screen.run_id, refine.run_id])
        sample_stage(params, kept, screen)
        screened, hist = screen_decisions(params, screen.run_id)
        to_refine = kept.filter(pl.col("problem_id").is_in(screened.refine["problem_id"].implode()))
        sample_stage(params, to_refine, refine)
        runs = [screen.run_id, refine.run_id]
        items, rejections = make_curriculum(params, runs, screened, rejected, f"cur-{key}")
        spent = core.rollouts_spent(ledger(params.home), runs)
    finally:
        close_ledgers()
    summary = core.summarise(f"cur-{key}", items, rejections, hist, spent)
    get_run_logger().info("curriculum %s: %s", f"cur-{key}", summary["kept"])
    return summary


def run(params: CurateParams) -> dict[str, Any]:
    """Run the flow (on the ephemeral local API unless PREFECT_API_URL points at a server)."""
    return curate_flow(params)


curate = core.curate  # moving here: the plain-call entry of the same sequence

__all__ = ["CurateParams", "curate", "curate_flow", "run"]
