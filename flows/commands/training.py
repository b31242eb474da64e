"""`sieve train`'s job: the request as given (`TrainRequest`), checked before anything is written
(`check_train_request`), resolved once into a `TrainJob` (`train_job`), what `--resume` resumes
(`check_resumable`), then the Prefect flow `flows.train.train_flow`.

Test: `pytest tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.commands import common
from flows.commands.common import Note, check_backend, check_folders, silent
from pipeline.core.errors import SieveError, check_range
from pipeline.core.hooks import Progress

if TYPE_CHECKING:
    from pipeline.jobs.train.lineage import TrainJob
    from pipeline.jobs.train.settings import Recipe
    from pipeline.sampling import EngineOptions


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
    from pipeline.jobs.train.settings import given_recipe

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
    """The job (`pipeline.jobs.train.lineage.resolve_train_job`), checked before Prefect starts,
    from one read-only ledger open (none when `read_ledger` is off: `--print-config --model`)."""
    from pipeline.core.home import LEDGER_NAME
    from pipeline.jobs.train.lineage import resolve_train_job
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
    from pipeline.jobs.train.trainee import train_id_for
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
    note: Note = silent,
    warn: Note = silent,
    progress: Progress | None = None,
) -> dict[str, Any] | str | None:
    """`sieve train`: everything decided before Prefect starts, once, into a `TrainJob` (the
    curriculum, the starting model, the recipe); with `print_config` the effective settings as
    TOML (a `--config` file; nothing on disk touched, no ledger read when the model is given),
    else the sampling checked against the curriculum's
    (`pipeline.jobs.train.lineage.check_sampling`: a `warn` line, or the error with `strict`), the
    checkpoint `resume` needs (a finished run is a `note` and None: nothing runs), then the Prefect
    flow `flows.train.train_flow` (its summary returned)."""
    from pipeline.core.runlog import quiet_prefect
    from pipeline.jobs.train.lineage import check_sampling

    given = check_train_request(request)  # before anything is written
    check_folders(home, "checkpoints", "tensorboard")
    if not print_config:  # --print-config touches nothing on disk (no <home>/.prefect)
        quiet_prefect(home)  # before Prefect is imported: this home's own state
    if request.model is not None and not (request.model / "config.json").is_file():
        raise SieveError(f"model folder {request.model} has no config.json")
    ledgerless = print_config and request.model is not None  # no ledger needed to show settings
    job = train_job(request, home, given, read_ledger=not ledgerless)
    if print_config:
        from pipeline.jobs.train.settings import settings_toml

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
    common.start_flows(job.home)
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
