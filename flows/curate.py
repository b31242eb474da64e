"""The curation job, written once: `curate_flow` (a Prefect flow) and `curate` (the same
sequence called without a Prefect run), over the steps in `pipeline.jobs.curate.curation`.

generate + prior -> screen (one task per chunk) -> screen decisions -> refine (per chunk) ->
pooled stats -> curriculum -> the verifier audit's warning (one stderr line when a family's
audited verdicts disagree with math-verify above `audit_warn`; `pipeline.jobs.curate.audit`), and
one when the curriculum kept no prompt (it is recorded, but `latest` still names the newest
curriculum with items: `pipeline.store.ids.latest_curriculum`). The ledger
is the source of truth for resuming: every chunk task commits its rollouts (and their audit
rows) in one transaction, and `sample_run` starts a chunk task only for a chunk
whose rollouts are not all stored (and checks they are after it). Chunk tasks keep no Prefect
result cache: a persisted result keyed on the ledger's id once stood in for rows that a copied,
restored or partly deleted ledger lacked (such a ledger keeps its id), and that ledger curated
nothing and exited 0; the rows themselves are the only record of what is done. Runs left
`running` by a killed process are marked `crashed` at the start (a resumed run sets its own
status again).

The flow's ledger is transient (`Ledger.open(..., transient=True)`): it holds DuckDB's file lock
only while it reads or commits, so `sieve sql` and other readers work while a curation runs.
A `Runtime` (`flows.runtime`) may hand the flow an open ledger, a loaded policy and the progress
hook (one event per committed chunk).

`params.scale` (`flows.scale.ScaleConfig`) chooses where the chunks run: in this process
(`local`, the default: the loop above), or as tasks on a Dask or Ray cluster that write Parquet
shards, which this process commits as they finish (`flows.scale.sharded_stage`).

Run: `sieve curate` (Prefect's ephemeral local API; nothing to start).
Test: `pytest tests/flows tests/test_curate.py tests/test_curate_crash.py`; the clusters:
`make test-scale`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from pydantic import Field

from flows.runtime import PolicyParams, Runtime, in_flow_run, step
from flows.scale import Fanout, ScaleConfig, open_runner, sharded_stage
from pipeline.core.home import resolve_home
from pipeline.core.hooks import Progress
from pipeline.jobs.curate import audit, curation
from pipeline.jobs.curate.curation import CurateResult, Policy
from pipeline.jobs.curate.rollouts import RunInfo
from pipeline.jobs.curate.shards import PolicySpec
from pipeline.selection import CurateConfig, Screened, build_curriculum, screen_survivors
from pipeline.selection.rules import concat_rejections
from pipeline.store import Ledger, load_query
from pipeline.store.ids import curriculum_id


class CurateParams(PolicyParams):
    """Flow parameters (validated; unknown keys rejected)."""

    config: CurateConfig = Field(default_factory=CurateConfig)
    scale: ScaleConfig = Field(
        default_factory=ScaleConfig,
        description="Where the chunks run: this process (local) or a Dask / Ray cluster.",
    )


_POLICIES: dict[tuple[object, ...], Policy] = {}


def policy_key(params: CurateParams) -> tuple[object, ...]:
    """What makes two flow runs share one loaded policy: model, backend, servers, engine, and
    whether this process samples (runner local) or only commits what workers sample."""
    here = params.scale.runner == "local"
    return (params.model, params.backend, tuple(params.base_urls), params.engine, here)


def policy(params: CurateParams) -> Policy:
    """One loaded policy per `policy_key` in this process (the nightly loop's nights share it)."""
    key = policy_key(params)
    if key not in _POLICIES:
        _POLICIES[key] = curation.policy_for(
            params.model, params.backend, params.base_urls, params.engine, load=key[-1] is True
        )  # under dask / ray the workers load the model; this process only names it
    return _POLICIES[key]


# ---------------------------------------------------------------------- steps


@task(cache_policy=NO_CACHE)
def select_candidates(
    ledger: Ledger, cfg: CurateConfig, exclude: list[str]
) -> tuple[int, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(candidates generated, kept by the prior, rejected by it, the training counts of those
    it rejected as solved in training: `curation.solved_counts`)."""
    ledger.run(load_query("reconcile_running"))
    history = curation.load_history(ledger, exclude)
    cands = curation.candidates(ledger, cfg, history)
    kept, rejected = curation.prior(cands, cfg, history)
    return cands.height, kept, rejected, curation.solved_counts(history, rejected)


sample_chunk = task(
    name="sample_chunk", cache_policy=NO_CACHE, task_run_name="{info.purpose}-chunk-{index}"
)(curation.sample_chunk)


def sample_stage(
    ledger: Ledger,
    pol: Policy,
    problems: pl.DataFrame,
    info: RunInfo,
    cfg: CurateConfig,
    progress: Progress | None,
    fanout: Fanout | None = None,
) -> None:
    """The chunk loop of `pipeline.jobs.curate.curation.sample_run`, each chunk one step; with a
    `fanout`, the chunks as tasks on its runner, committed from their shards."""
    if fanout is not None:
        sharded_stage(ledger, problems, info, cfg, progress, fanout)
        return
    curation.sample_run(
        ledger,
        pol,
        problems,
        info,
        cfg,
        progress,
        run_chunk=lambda chunk, index: step(
            sample_chunk, ledger, pol, chunk, info, cfg.seed, index, cfg.audit_share
        ),
    )


@task(cache_policy=NO_CACHE)
def screen_decisions(ledger: Ledger, cfg: CurateConfig, run_id: str) -> tuple[Screened, list[int]]:
    stats = curation.run_stats(ledger, [run_id])
    return screen_survivors(stats, cfg), curation.histogram(stats)


@task(cache_policy=NO_CACHE)
def make_curriculum(
    ledger: Ledger,
    pol: Policy,
    cfg: CurateConfig,
    runs: list[str],
    screened: Screened,
    rejected: pl.DataFrame,
    solved_counts: pl.DataFrame,
    curriculum_id: str,
    by_prior: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The curriculum from the refined prompts' pooled counts, the replay pool and (`screen =
    "unknown"`) the unscreened candidates of known cells with their posteriors (`by_prior`)."""
    refined = screened.refine["problem_id"].implode()
    pooled = curation.run_stats(ledger, runs).filter(pl.col("problem_id").is_in(refined))
    easy, rejected, solved = curation.replay_pool(screened.all_correct, rejected, solved_counts)
    items, dropped = build_curriculum(pooled, easy, cfg, by_prior)
    solved_rest = pl.col("problem_id").is_in(solved.implode())  # not replayed: keep its reason
    dropped = dropped.with_columns(
        pl.when(solved_rest).then(pl.lit("solved_in_training")).otherwise("reason").alias("reason")
    )
    rejections = concat_rejections([rejected, screened.rejections, dropped])
    curation.write_curriculum(ledger, curriculum_id, pol, cfg, items, rejections)
    return items, rejections


# ---------------------------------------------------------------------- the sequence


def curate(
    ledger: Ledger,
    pol: Policy,
    cfg: CurateConfig,
    progress: Progress | None = None,
    fanout: Fanout | None = None,
) -> CurateResult:
    """The whole curation, resumable (see `pipeline.jobs.curate.curation`). Inside `curate_flow`
    each step is a Prefect task; called directly, the same steps run as plain functions. `fanout`:
    run the sampling chunks on that open task runner (`flows.scale`)."""
    key = curation.curation_key(cfg, pol.model_revision)
    screen = curation.run_info(pol, "screen", cfg.screen_g, key, cfg)
    refine = curation.run_info(pol, "refine", cfg.refine_g, key, cfg)
    runs = [screen.run_id, refine.run_id]
    n_cands, kept, rejected, solved = step(select_candidates, ledger, cfg, runs)
    kept, by_prior = curation.split_known_cells(ledger, kept, cfg, pol.model_revision, runs)
    sample_stage(ledger, pol, kept, screen, cfg, progress, fanout)
    screened, hist = step(screen_decisions, ledger, cfg, screen.run_id)
    to_refine = kept.filter(pl.col("problem_id").is_in(screened.refine["problem_id"].implode()))
    sample_stage(ledger, pol, to_refine, refine, cfg, progress, fanout)
    cid = curriculum_id(key)
    items, rejections = step(
        make_curriculum, ledger, pol, cfg, runs, screened, rejected, solved, cid, by_prior
    )
    spent = curation.rollouts_spent(ledger, runs)
    found = [audit.warning(ledger, runs, cfg.audit_warn, cid)]
    if items.is_empty():
        found.append(curation.empty_curriculum_note(ledger, cid))
    warnings = [line for line in found if line is not None]
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    return CurateResult(
        cid, screen.run_id, refine.run_id, n_cands, items, rejections, spent, hist, warnings
    )


@flow(name="sieve-curate", log_prints=True)
def curate_flow(params: CurateParams, runtime: Runtime | None = None) -> dict[str, Any]:
    """Curate a two-stage curriculum for the model; returns a summary."""
    rt = runtime or Runtime()
    pol = rt.policy or policy(params)
    ledger = rt.ledger or Ledger.open(params.home, transient=True)
    try:
        with open_runner(params.scale, worker_spec(params, pol), shard_root(params, ledger)) as fan:
            result = curate(ledger, pol, params.config, rt.progress, fan)
    finally:
        if rt.ledger is None:
            ledger.close()
    summary = summarise(result)
    if in_flow_run():
        logger = get_run_logger()
        logger.info("curriculum %s: %s", result.curriculum_id, summary["kept"])
        for line in result.warnings:
            logger.warning(line)
    return summary


def worker_spec(params: CurateParams, pol: Policy) -> PolicySpec:
    """What a distributed worker builds its policy from (checked against `pol`'s revision)."""
    folder = Path(params.model)  # absolute: workers may start elsewhere
    return PolicySpec(
        str(folder.resolve()) if folder.is_dir() else params.model,
        params.backend,
        tuple(params.base_urls),
        params.engine,
        params.scale.policy_factory,
        pol.model_revision,
    )


def shard_root(params: CurateParams, ledger: Ledger) -> str:
    """`scale.shard_root`, else `shards/` beside the ledger (the home's, for an in-memory one)."""
    if params.scale.shard_root:
        return params.scale.shard_root
    home = Path(ledger.path).parent if ledger.path else resolve_home(params.home)
    return str(home / "shards")


def summarise(result: CurateResult) -> dict[str, Any]:
    summary = curation.summarise(
        result.curriculum_id,
        result.items,
        result.rejections,
        result.screen_histogram,
        result.rollouts,
    )
    return {**summary, "warnings": list(result.warnings)}


def run(params: CurateParams, progress: Progress | None = None) -> dict[str, Any]:
    """Run the flow (on the ephemeral local API unless PREFECT_API_URL points at a server)."""
    return curate_flow(params, Runtime(progress=progress))


__all__ = ["CurateParams", "ScaleConfig", "curate", "curate_flow", "run"]
