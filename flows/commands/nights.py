"""`sieve loop`, `sieve schedule` and `sieve demo`'s jobs: the nightly flow run back to back in
this process (`loop`, from the model `loop_start` decides), served as a Prefect deployment on a
cron (`schedule`, after its Prefect API is checked: `check_api_url`, `check_api_reachable`), or
run once on the embedded default after the foundation check (`demo`).

Test: `pytest tests/flows/test_loop.py tests/flows/test_schedule.py tests/test_demo.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.commands import common
from flows.commands.common import Night, Note, check_backend, check_folders, silent
from pipeline.core.errors import SieveError, check_range
from pipeline.core.hooks import Progress

if TYPE_CHECKING:
    from flows.loop import DemoRun
    from pipeline.sampling import EngineOptions
    from pipeline.selection import CurateConfig


def loop_config(config: Path | None, n: int | None) -> CurateConfig:
    """`--config FILE` (else the defaults), checked, with `--n` as its candidates."""
    from pipeline.selection import CurateConfig, check_samplable, load_curate_config

    cfg = load_curate_config(config) if config is not None else CurateConfig()
    check_samplable(cfg, config)
    if n is not None:
        if n < 1:
            raise SieveError(f"--n must be >= 1, got {n}")
        cfg = cfg.model_copy(update={"n_candidates": n})
    return cfg


def loop_start(
    model: Path | None, backend: str, home: Path | None, fresh: bool = False
) -> tuple[Path, str]:
    """The model the first night starts from (`night_start`), and why; one error line when
    there is none."""
    from pipeline.jobs.train.lineage import night_start

    local = backend != "openai"  # openai: --model may be a served name
    if model is not None and local and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    folder, why = night_start(home, str(model) if model is not None else None, fresh)
    if local and not (folder / "config.json").is_file():
        raise SieveError(f"no model at {folder}: run `sieve bootstrap` first, or pass --model")
    return folder, why


def loop(
    nights: int,
    config: Path | None,
    train_config: Path | None,
    n: int | None,
    steps: int | None,
    start: str | None,
    model: Path | None,
    backend: str,
    base_urls: Sequence[str],
    engine: EngineOptions,
    home: Path | None,
    again: bool = False,
    note: Note = silent,
    on_night: Night | None = None,
    train_options: Mapping[str, Any] | None = None,
    fresh: bool = False,
) -> Any:
    """`sieve loop`: `nights` nights back to back in this process (`flows.loop.loop`), the
    first on `start` (YYYY-MM-DD; None: today, UTC), from the model `loop_start` decides (with
    `fresh`, `model`'s folder itself: a new lineage beside earlier runs from it), with
    `train_config` (else the recipe for that model) and the fields `train_options` replaces in
    it (the `--selection*` options); `on_night` gets each night's number and summary once it
    is committed. Returns the held-out sampled pass@1 by revision afterwards
    (`pipeline.jobs.analysis.stats.heldout_by_revision`)."""
    from pipeline.jobs.train.settings import given_recipe, train_recipe

    if nights < 1:
        raise SieveError(f"--nights must be >= 1, got {nights}")
    check_folders(home, "checkpoints", "tensorboard")
    cfg = loop_config(config, n)
    try:
        first = date.fromisoformat(start) if start else None
    except ValueError:
        raise SieveError(f"--start {start!r} is not a YYYY-MM-DD date") from None
    check_backend(backend, list(base_urls))
    folder, why = loop_start(model, backend, home, fresh)
    given = given_recipe(train_config) if train_config is not None else None
    recipe, settings = train_recipe(folder, given, steps, train_options)
    note(f"loop: night 1 starts from {folder} ({why}); {recipe.line()}")
    keep = sorted(cfg.sampling.model_fields_set) if config is not None else []
    common.start_flows(home)
    from flows.loop import loop as run_nights
    from pipeline.jobs.analysis.stats import heldout_table

    run_nights(
        home,
        nights,
        cfg,
        settings,
        first,
        on_night,
        model=str(model) if model is not None else None,
        backend=backend,
        base_urls=base_urls,
        engine=engine,
        keep_sampling=keep,
        again=again,
        fresh=fresh,
    )
    return heldout_table(home)


def schedule(
    cron: str,
    name: str,
    config: Path | None,
    train_config: Path | None,
    model: Path | None,
    backend: str,
    base_urls: Sequence[str],
    home: Path | None,
    note: Note = silent,
) -> None:
    """`sieve schedule`: the nightly flow served as a Prefect deployment on `cron`
    (`flows.nightly.serve`, blocks until Ctrl-C), its settings checked first: $PREFECT_API_URL
    (`check_api_url`), the cron, the backend, the curation config (`check_samplable`, as `sieve
    curate` and `sieve loop` check it), the train settings (None: each night the recipe for its
    model), and last that a Prefect API answers at the URL (`check_api_reachable`)."""
    import os

    from pipeline.jobs.train.settings import load_settings
    from pipeline.selection import CurateConfig, check_samplable, load_curate_config

    if not os.environ.get("PREFECT_API_URL"):
        raise SieveError(
            "sieve schedule needs a Prefect server: run `prefect server start`, then "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    api = os.environ["PREFECT_API_URL"]
    check_api_url(api)  # before Prefect reads it (a malformed one fails in its settings)
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except Exception as exc:
        raise SieveError(f"invalid --cron {cron!r}: {' '.join(str(exc).split())[:160]}") from exc
    check_backend(backend, list(base_urls))
    cfg = load_curate_config(config) if config is not None else CurateConfig()
    check_samplable(cfg, config)
    settings = load_settings(train_config) if train_config is not None else None  # per model
    from flows.nightly import NightlyParams, serve

    params = NightlyParams(
        model=str(model.resolve()) if model is not None else None,
        backend=backend,
        base_urls=list(base_urls),
        home=str(Path(home).resolve()) if home is not None else None,
        config=cfg,
        train=settings,
        keep_sampling=sorted(cfg.sampling.model_fields_set) if config is not None else [],
    )
    check_api_reachable(api)  # the last check: every setting is refused without a server
    note(f"serving deployment sieve-nightly/{name} on cron {cron!r}; Ctrl-C stops it")
    serve(cron, params, name)


def demo(
    home: Path | None,
    model: str | None,
    n: int,
    bootstrap_steps: int,
    steps: int | None,
    note: Note = silent,
    on_night: Night | None = None,
    progress: Progress | None = None,
    on_start: Callable[[], None] | None = None,
) -> tuple[Path | None, DemoRun]:
    """`sieve demo`: the foundation check (the embedded problems in the ledger, the verifier's
    self-check on them: a failure is an error after its counts are noted), then one night of the
    nightly flow: on the tiny policy (`flows.loop.demo`, bootstrapped if missing; `n`
    candidates, `steps` training steps: None, the recipe's), or with `model` on vLLM
    (`flows.loop.demo_real`). `on_start` is called once the options are checked. Returns the
    ledger's path and the night."""
    from grpo_core.validate import MAX_COUNT
    from pipeline.jobs.data.demo import run_demo
    from pipeline.selection.config import MAX_CANDIDATES

    check_range("--n", n, 10, MAX_CANDIDATES)  # all three before the embedded problems go in
    check_range("--bootstrap-steps", bootstrap_steps, 1, MAX_COUNT)
    check_range("--steps", steps, 1, MAX_COUNT)
    if on_start is not None:
        on_start()
    found = run_demo(home, n=2000, seed=0)
    c = found.check
    note(
        f"1. problems: {int(found.counts['problems'].sum())} in the ledger ({found.new_problems} "
        f"new); verifier self-check: {c.own_correct}/{c.problems} own answers accepted, "
        f"{c.perturbed_rejected}/{c.problems} perturbed rejected"
    )
    if c.own_correct != c.problems or c.perturbed_rejected != c.problems:
        raise SieveError("verifier self-check failed: see the counts above")
    common.start_flows(home)
    from flows.loop import demo as tiny_night
    from flows.loop import demo_real

    if model is not None:
        note(f"2. {model} -> curate -> train -> eval (one night of the nightly flow, vLLM)")
        run = demo_real(home, model, say=note, progress=progress, on_night=on_night)
        return found.ledger, run
    note("2. policy -> curate -> train -> eval (one night of the nightly flow)")
    from flows.loop import DEMO_CURATE, DEMO_TRAIN

    config = DEMO_CURATE.model_copy(update={"n_candidates": n})
    settings = DEMO_TRAIN.with_steps(steps)
    run = tiny_night(home, bootstrap_steps, config, settings, say=note, on_night=on_night)
    return found.ledger, run


API_EXAMPLE = "http://127.0.0.1:4200/api"  # `prefect server start`'s API on this machine


def check_api_url(url: str) -> None:
    """One SieveError line naming $PREFECT_API_URL when it is not an http(s) URL with a host:
    Prefect failed on it deep inside (pydantic's traceback from its settings, or httpx's)."""
    from urllib.parse import urlsplit

    where = f"PREFECT_API_URL {url!r}"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a port out of range raises here
    except ValueError as exc:
        raise SieveError(f"{where} is not a URL ({exc}); e.g. {API_EXAMPLE}") from None
    if parts.scheme not in ("http", "https"):
        raise SieveError(f"{where} is not an http:// or https:// URL; e.g. {API_EXAMPLE}")
    if not parts.hostname:
        raise SieveError(f"{where} names no host; e.g. {API_EXAMPLE}")


def check_api_reachable(url: str, timeout_s: float = 5.0) -> None:
    """One SieveError line naming $PREFECT_API_URL when no Prefect API answers at it (`GET
    <url>/health`): Prefect's serve failed there with 100-130 lines of httpx's traceback."""
    import httpx

    where = f"PREFECT_API_URL {url!r}"
    try:
        answer = httpx.get(url.strip().rstrip("/") + "/health", timeout=timeout_s)
    except httpx.HTTPError as exc:
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise SieveError(
            f"{where}: cannot reach a Prefect server there ({reason}); start one with "
            "`prefect server start`, or fix the URL"
        ) from None
    if answer.status_code != 200:
        raise SieveError(
            f"{where}: no Prefect API there (GET /health answered {answer.status_code}); "
            f"a Prefect server's API URL ends in /api, e.g. {API_EXAMPLE}"
        )
