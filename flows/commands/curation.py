"""`sieve curate`'s job: the request as given (`CurateRequest`), the config it makes
(`curate_config`: a bad one writes nothing), the model and the recipe's sampling decided and
checked, then the Prefect flow `flows.curate.curate_flow` (`run_curate`, its sampling plan said
as a line first).

Test: `pytest tests/cli/test_curate_defaults.py tests/test_curate_ingested.py`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.commands import common
from flows.commands.common import Note, command_model, silent, validated
from pipeline.core.errors import SieveError
from pipeline.core.hooks import Progress, ProgressEvent

if TYPE_CHECKING:
    from flows.scale import ScaleConfig
    from pipeline.sampling import EngineOptions
    from pipeline.selection import CurateConfig


@dataclass(frozen=True)
class CurateRequest:
    """`sieve curate` as given: `--config` (None: the defaults), the flags that override it
    (`n_candidates`, `seed`: None where not given), the [sampling] values given as flags, the
    model (None: `command_model`'s default), the backend and where chunks run (`scale`:
    `flows.scale.ScaleConfig`'s fields)."""

    config: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    model: Path | None = None
    backend: str = "hf"
    base_urls: Sequence[str] = ()
    engine: EngineOptions | None = None
    scale: dict[str, Any] = field(default_factory=dict)


def curate_config(request: CurateRequest) -> tuple[CurateConfig, list[str]]:
    """`--config FILE` (else the defaults) with the flags applied, checked (`check_samplable`);
    and the [sampling] fields the user set (the flags' and the file's)."""
    from pipeline.selection import CurateConfig, check_samplable, load_curate_config

    path = request.config
    cfg = load_curate_config(path) if path is not None else CurateConfig()
    chosen = set(request.sampling) | (cfg.sampling.model_fields_set if path else set())
    given: dict[str, Any] = {k: v for k, v in request.overrides.items() if v is not None}
    if request.sampling:
        given["sampling"] = {**cfg.sampling.model_dump(), **request.sampling}
    if given:
        cfg = validated(CurateConfig, {**cfg.model_dump(), **given})
    check_samplable(cfg, path)
    return cfg, sorted(chosen)


def curate(
    request: CurateRequest,
    home: Path | None,
    note: Note = silent,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`sieve curate`: the config checked (`curate_config`; a bad one writes nothing), the model
    decided, the recipe's sampling taken for what the user did not set (one line), the config
    checked again, the upper bounds of what it samples (one line, and an estimate after the
    first screen chunk), then the Prefect flow `flows.curate.curate_flow`."""
    from pipeline.core.runlog import quiet_prefect
    from pipeline.jobs.train.settings import curation_sampling
    from pipeline.selection import check_samplable

    cfg, chosen = curate_config(request)
    quiet_prefect(home)  # after the config checks (a bad one writes nothing), before flows.scale
    from flows.scale import ScaleConfig  # imports Prefect, which reads this home's set-up

    where = validated(ScaleConfig, request.scale)
    folder = command_model(request.model, home, note)
    if request.backend != "openai" and not folder.exists():
        raise SieveError(f"model folder {folder} does not exist (run `sieve bootstrap` first?)")
    cfg, line = curation_sampling(cfg, folder, chosen)
    if line:
        note(line)
    check_samplable(cfg, request.config)
    return run_curate(
        str(folder), request.backend, list(request.base_urls), home, cfg, request.engine, where,
        note, progress,
    )  # fmt: skip


def sampling_plan(cfg: CurateConfig, folder: str) -> Any:
    """The upper bounds of what curating `folder` with `cfg` samples (a `SamplingPlan`)."""
    from pipeline.core.hooks import SamplingPlan
    from pipeline.jobs.train.settings import folder_prompt_format

    return SamplingPlan(
        cfg.n_candidates,
        cfg.screen_g,
        cfg.refine_g,
        cfg.sampling.budget(folder_prompt_format(folder)),
    )


def run_curate(
    model: str,
    backend: str,
    base_urls: list[str],
    home: Path | None,
    cfg: CurateConfig,
    engine: EngineOptions | None = None,
    scale: ScaleConfig | None = None,
    note: Note = silent,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The curation flow `flows.curate.curate_flow` on a decided config: its sampling plan as a
    line, and after the first screen chunk the estimate of the whole run."""
    common.start_flows(home)
    from flows.curate import CurateParams, curate_flow
    from flows.runtime import Runtime

    params = CurateParams(
        model=model,
        backend=backend,
        base_urls=base_urls,
        home=str(home) if home is not None else None,
        config=cfg,
        engine=engine,
        **({"scale": scale} if scale is not None else {}),
    )
    plan = sampling_plan(cfg, model) if backend != "openai" else None
    if plan is not None:
        note(plan.line())
    started = time.monotonic()

    def update(e: ProgressEvent) -> None:  # one event per committed chunk
        if plan is not None and e.stage == "screen" and e.done == 1:
            note(plan.estimate(time.monotonic() - started, e.total))
        if progress is not None:
            progress(e)

    return curate_flow(params, Runtime(progress=update))
