"""Each long `sieve` command's job below the CLI, one function per command.

A command of `flows/cli/` parses its options, calls one function here and prints what it
returns. The function decides what an unset option means (the model a command takes by default:
`command_model`; the sampling a chat model curates at: `pipeline.jobs.recipes.curation_sampling`;
the train job: `pipeline.jobs.lineage.resolve_train_job`), checks everything checkable before a
flow starts (a bad option writes nothing, not even Prefect's state), and runs the job: a
Prefect flow of this package. What a user should read on the way goes to `note` (one line each,
in the order the job decides it); progress goes to `progress` (`pipeline.core.hooks`), so the
CLI draws the bars and every entry point gets the same rules.

This module imports neither Prefect nor torch when it is imported: `quiet_prefect` must run
before Prefect is, and `sieve train --print-config` never loads a model.

Test: `pytest tests/cli tests/test_demo.py tests/flows/test_loop.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import SieveError, check_range
from pipeline.core.hooks import Progress, ProgressEvent

if TYPE_CHECKING:
    from flows.loop import DemoRun
    from flows.scale import ScaleConfig
    from pipeline.jobs.curate import Policy
    from pipeline.jobs.lineage import TrainJob
    from pipeline.jobs.recipes import Recipe
    from pipeline.sampling import EngineOptions
    from pipeline.sampling.budget import EvalConfig
    from pipeline.selection import CurateConfig

Note = Callable[[str], None]
Night = Callable[[int, dict[str, Any]], None]  # a night's number (from 1) and its summary


def _silent(line: str) -> None:
    """A `Note` that shows nothing."""


def start_flows(home: str | Path | None) -> None:
    """Before a command runs Prefect flows: Prefect set up for this home, its logs (a failed
    task's traceback among them) in <home>/logs/prefect.log unless verbose, and its temporary API
    server started tied to this process, so a killed run leaves no server behind
    (`pipeline.core.procs`)."""
    from pipeline.core.procs import start_prefect_server
    from pipeline.core.runlog import quiet_prefect

    start_prefect_server(quiet_prefect(home))


# ---------------------------------------------------------------------- the model


def tiny_model(home: Path | str | None) -> Path:
    """Where the built-in tiny policy lives in this home."""
    from pipeline.core.home import resolve_home

    return resolve_home(home) / "models" / "tiny"


def command_model(model: Path | None, home: Path | None, note: Note = _silent) -> Path:
    """`--model`, else what the nightly flow would use: the newest checkpoint of the lineage of
    the newest curriculum's model (else that model; on a fresh home the tiny policy), named in
    one line, so `sieve curate --model M` -> `sieve train` -> `sieve eval` needs M only once."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.lineage import current_model

    if model is not None:
        return model
    if not ledger_path(home).exists():
        return tiny_model(home)
    folder, why = current_model(home)
    note(f"model: {folder} ({why})")
    return folder


# ---------------------------------------------------------------------- curation


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
    note: Note = _silent,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """`sieve curate`: the config checked (`curate_config`; a bad one writes nothing), the model
    decided, the recipe's sampling taken for what the user did not set (one line), the config
    checked again, the upper bounds of what it samples (one line, and an estimate after the
    first screen chunk), then the Prefect flow `flows.curate.curate_flow`."""
    from pipeline.core.runlog import quiet_prefect
    from pipeline.jobs.recipes import curation_sampling
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
    from pipeline.jobs.recipes import folder_prompt_format

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
    note: Note = _silent,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The curation flow `flows.curate.curate_flow` on a decided config: its sampling plan as a
    line, and after the first screen chunk the estimate of the whole run."""
    start_flows(home)
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


# ---------------------------------------------------------------------- evaluation


def eval_config(**values: Any) -> EvalConfig:
    """`EvalConfig(**values)`, a value out of range as one line naming its option."""
    from grpo_core.validate import FieldError
    from pipeline.sampling.budget import MAX_GROUP_SIZE, EvalConfig

    try:
        cfg = EvalConfig(**values)
    except FieldError as exc:
        field, _, rest = str(exc).partition(" ")
        raise SieveError(f"--{field.replace('_', '-')} {rest}") from None
    if cfg.samples > MAX_GROUP_SIZE:
        raise SieveError(
            f"--samples {cfg.samples} is more samples of one prompt than a sampler holds at "
            f"once; at most {MAX_GROUP_SIZE}"
        )
    return cfg


def evaluate(
    model: Path | None,
    home: Path | None,
    values: dict[str, Any],
    sampling: dict[str, Any],
    backend: str = "hf",
    base_urls: Sequence[str] = (),
    engine: EngineOptions | None = None,
    note: Note = _silent,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], EvalConfig]:
    """`sieve eval`: the model decided (`command_model`), the evaluation settings checked
    (`values`: EvalConfig's fields, `sampling`: SamplingConfig's), the policy loaded, then the
    Prefect flow `flows.evaluate.eval_flow`. Returns its result and the settings it ran at."""
    from pipeline.jobs.curate import policy_for
    from pipeline.sampling.budget import SamplingConfig

    folder = command_model(model, home, note)
    cfg = eval_config(**values, sampling=validated(SamplingConfig, sampling))
    policy = policy_for(folder, backend, base_urls or (), engine)  # loads the model
    return run_eval(policy, cfg, home, progress), cfg


def run_eval(
    policy: Policy, cfg: EvalConfig, home: Path | None, progress: Progress | None = None
) -> dict[str, Any]:
    """The Prefect flow `flows.evaluate.eval_flow` on `policy`."""
    start_flows(home)
    from flows.evaluate import EvalParams, eval_flow
    from flows.runtime import Runtime

    params = EvalParams(
        model=policy.sampler.model_name,
        home=str(home) if home is not None else None,
        per_level=cfg.per_level,
        samples=cfg.samples,
        seed=cfg.seed,
        sampling=cfg.sampling,
    )
    return eval_flow(params, Runtime(policy=policy, progress=progress))


def bootstrap(
    settings: dict[str, Any],
    values: dict[str, Any],
    home: Path | None,
    note: Note = _silent,
    train_progress: Progress | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], EvalConfig]:
    """`sieve bootstrap`: the built-in tiny policy trained from scratch (`settings`:
    `BootstrapConfig`'s fields, its defaults elsewhere; its seed seeds the data, the weights and
    the evaluation), saved to this home, then evaluated (`values`: EvalConfig's fields). Both
    are checked before training, a bad value as one line naming its option."""
    from grpo_core.validate import FieldError
    from pipeline.jobs.bootstrap import BootstrapConfig, save_atomically, train_tiny
    from pipeline.jobs.curate import policy_for

    steps = settings.get("max_steps")
    if steps is not None and steps < 1:  # a cap of 0 steps would train nothing
        raise SieveError(f"--max-steps must be >= 1, got {steps}")
    try:
        cfg = BootstrapConfig(**settings)
    except FieldError as exc:
        field, _, rest = str(exc).partition(" ")
        raise SieveError(f"--{field.replace('_', '-')} {rest}") from None
    evaluated = eval_config(**values, seed=cfg.seed)
    folder = tiny_model(home)
    result = train_tiny(cfg, progress=train_progress)
    revision = save_atomically(result, folder, cfg)
    note(
        f"trained {result.steps} steps in {result.seconds / 60:.1f} min "
        f"(loss {result.final_loss:.3f}); saved {folder} (revision {revision})"
    )
    return run_eval(policy_for(folder), evaluated, home, progress), evaluated


# ---------------------------------------------------------------------- training


@dataclass(frozen=True)
class TrainRequest:
    """`sieve train` as given: `--config` (None: the recipe for the model), the starting model
    (None: the one the curriculum was curated with), `--steps` (the recipe's total replaced),
    `--max-steps` (stop early), the recipe fields its options replace (`options`: the
    `--selection*` options given), and how it runs."""

    curriculum: str = "latest"
    config: Path | None = None
    model: Path | None = None
    steps: int | None = None
    max_steps: int | None = None
    resume: bool = False
    strict: bool = False
    backend: str = "hf"
    base_urls: Sequence[str] = ()
    engine: EngineOptions | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


def check_train_request(request: TrainRequest) -> Recipe | None:
    """The checks that need neither a model nor the ledger, in the order they report; the
    `--config` file, read here once (None when not given)."""
    from grpo_core.validate import MAX_COUNT
    from pipeline.jobs.recipes import given_recipe

    max_steps, steps = request.max_steps, request.steps
    if max_steps is not None and max_steps < 1:
        raise SieveError(f"--max-steps must be >= 1, got {max_steps}")
    check_range("--steps", steps, 1, MAX_COUNT)
    given = given_recipe(request.config) if request.config is not None else None  # fails first
    check_backend(request.backend, request.base_urls)
    return given


def train_job(
    request: TrainRequest, home: Path, given: Recipe | None, *, read_ledger: bool = True
) -> TrainJob:
    """The job (`pipeline.jobs.lineage.resolve_train_job`), checked before Prefect starts, from one
    read-only open of the ledger (none when `read_ledger` is off: `--print-config --model`)."""
    from pipeline.core.home import LEDGER_NAME
    from pipeline.jobs.lineage import resolve_train_job
    from pipeline.store import Ledger

    def resolve(ledger: Ledger | None) -> TrainJob:
        return resolve_train_job(
            ledger, request.curriculum, request.model, home,
            recipe=given, steps=request.steps, options=request.options,
        )  # fmt: skip

    if not read_ledger:
        return resolve(None)
    path = home / LEDGER_NAME
    if not path.exists():
        raise SieveError(f"no ledger at {path}: run `sieve curate` first")
    with Ledger.open(home, read_only=True) as ledger:
        return resolve(ledger)


def check_resumable(job: TrainJob, backend: str) -> str | None:
    """What `--resume` resumes, checked before Prefect starts: a SieveError when it finds no
    checkpoint of this run (the curriculum, model, settings and backend name it; it trained a
    fresh run without a word), and the line to say instead of training when the ledger records
    the run as finished (resuming it ran both evaluations again, and a failure there marked a
    finished run failed); None when there is something to resume."""
    from grpo_core import checkpoint as ckpt
    from pipeline.jobs.trainee import train_id_for
    from pipeline.policy.model import folder_revision
    from pipeline.store import Ledger

    cid, folder = job.curriculum_id, job.model
    train_id = train_id_for(cid, folder_revision(folder), job.settings, backend)
    root = job.home / "checkpoints" / train_id
    steps = ckpt.list_steps(root)
    if not steps:
        raise SieveError(
            f"--resume: training {train_id} (curriculum {cid}, model {folder}, these settings) "
            f"has no checkpoint in {root}, so there is nothing to resume; drop --resume to "
            "start it"
        )
    with Ledger.open(job.home, read_only=True) as ledger:
        rows = ledger.run("SELECT status FROM train_runs WHERE train_id = $t", {"t": train_id})
    if not rows or rows[0][0] != "finished":
        return None
    step, final = steps[-1]
    return (
        f"training {train_id} is already finished (step {step}, checkpoint {final}); nothing "
        "to resume (more steps: --steps N, a run of its own)"
    )


def train(
    request: TrainRequest,
    home: Path,
    *,
    print_config: bool = False,
    note: Note = _silent,
    warn: Note = _silent,
    progress: Progress | None = None,
) -> dict[str, Any] | str | None:
    """`sieve train`: everything decided before Prefect starts, once, into a `TrainJob` (the
    curriculum, the starting model, the recipe); with `print_config` the effective settings as
    TOML (a `--config` file; nothing on disk touched, no ledger read when the model is given),
    else the sampling checked against the curriculum's (`pipeline.jobs.lineage.check_sampling`:
    a `warn` line, or the error with `strict`), the checkpoint `resume` needs (a finished run
    is a `note` and None: nothing runs), then the Prefect flow `flows.train.train_flow` (its
    summary returned)."""
    from pipeline.core.runlog import quiet_prefect
    from pipeline.jobs.lineage import check_sampling

    given = check_train_request(request)  # before anything is written
    check_folders(home, "checkpoints", "tensorboard")
    if not print_config:  # --print-config touches nothing on disk (no <home>/.prefect)
        quiet_prefect(home)  # before Prefect is imported: this home's own state
    if request.model is not None and not (request.model / "config.json").is_file():
        raise SieveError(f"model folder {request.model} has no config.json")
    ledgerless = print_config and request.model is not None  # no ledger needed to show settings
    job = train_job(request, home, given, read_ledger=not ledgerless)
    if print_config:
        from pipeline.jobs.recipes import settings_toml

        header = [f"sieve train: effective settings for {job.model} ({job.model_why})"]
        header += [job.recipe or "", f"backend {request.backend}"]
        return settings_toml(job.settings, header)
    line = check_sampling(job, request.strict)
    if line is not None:
        warn(line)
    if request.resume and (finished := check_resumable(job, request.backend)) is not None:
        note(finished)
        return None
    note(f"train {job.curriculum_id}: model {job.model} ({job.model_why}); {job.recipe}")
    start_flows(job.home)
    from flows.runtime import Runtime
    from flows.train import TrainParams, train_flow

    params = TrainParams(
        job=job,
        backend=request.backend,
        base_urls=list(request.base_urls),
        engine=request.engine,
        max_steps=request.max_steps,
        resume=request.resume,
    )
    return train_flow(params, Runtime(progress=progress))


# ---------------------------------------------------------------------- nights


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
    from pipeline.jobs.lineage import night_start

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
    note: Note = _silent,
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
    (`pipeline.jobs.stats.heldout_by_revision`)."""
    from pipeline.jobs.recipes import given_recipe, train_recipe

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
    start_flows(home)
    from flows.loop import loop as run_nights
    from pipeline.jobs.stats import heldout_table

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
    note: Note = _silent,
) -> None:
    """`sieve schedule`: the nightly flow served as a Prefect deployment on `cron`
    (`flows.nightly.serve`, blocks until Ctrl-C), its settings checked first: $PREFECT_API_URL
    (`check_api_url`), the cron, the backend, the curation config (`check_samplable`, as `sieve
    curate` and `sieve loop` check it), the train settings (None: each night the recipe for its
    model), and last that a Prefect API answers at the URL (`check_api_reachable`)."""
    import os

    from pipeline.jobs.recipes import load_settings
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
    note: Note = _silent,
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
    from pipeline.jobs.demo import run_demo
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
    start_flows(home)
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


# ---------------------------------------------------------------------- shared checks


def validated(model: type[Any], values: dict[str, object]) -> Any:
    """`model.model_validate(values)` with a pydantic error as one SieveError line."""
    from pydantic import ValidationError

    from pipeline.core.tomlconfig import first_error

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise SieveError(f"invalid option: {first_error(exc)}") from None


def check_folders(home: Path | None, *names: str) -> None:
    """SieveError when `<home>/<name>`, a folder the command writes into, exists and is not a
    folder (a file there failed deep inside the run, as a traceback)."""
    from pipeline.core.home import resolve_home

    root = resolve_home(home)
    for name in names:
        path = root / name
        if (path.exists() or path.is_symlink()) and not path.is_dir():
            raise SieveError(f"{path} is not a folder; this command writes its {name} there")


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


def check_backend(backend: str, base_url: Sequence[str] | None) -> None:
    """One line for an unknown backend, or the openai backend without a server."""
    from pipeline.sampling import BACKENDS

    if backend not in BACKENDS:
        raise SieveError(f"unknown --backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "openai" and not base_url:
        raise SieveError("the openai backend needs --base-url (repeat it for several servers)")
