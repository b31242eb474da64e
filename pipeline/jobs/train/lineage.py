"""Which model a job starts from: the one a curriculum was curated with (`curriculum_model`),
or, for the nightly loop, the newest checkpoint of a model's lineage (`nightly_model`,
`lineage_head`): trained from it, or from a checkpoint trained from it, and so on; and which
nights of a lineage have finished (`finished_night`, `record_night`: a finished night is not run
again by `sieve loop`).

A training run is resolved once, into a `TrainJob` (`resolve_train_job`: curriculum id, model,
home, settings, from one open ledger): `sieve train` resolves it before Prefect starts and hands
it to the flow, which resolves nothing again.

Test: `pytest tests/flows/test_loop.py tests/cli/test_train_cli.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grpo_core.validate import STRICT
from pipeline.core.errors import SieveError
from pipeline.core.home import from_home, resolve_home
from pipeline.jobs.train.settings import Recipe, TrainSettings, train_recipe
from pipeline.policy.model import folder_revision
from pipeline.sampling.budget import SamplingConfig
from pipeline.store import Ledger, load_query
from pipeline.store.ids import resolve_curriculum


class TrainJob(BaseModel):
    """A training run with every default decided: what the train flow trains (a flow parameter,
    `flows.train.TrainParams.job`), and what `sieve train` checks and prints before it starts."""

    model_config = ConfigDict(**STRICT, frozen=True)

    curriculum_id: str = Field(description="The curriculum's id ('latest' resolved).")
    model: Path = Field(description="The starting model folder.")
    home: Path = Field(description="The Sieve home, decided once.")
    settings: TrainSettings = Field(description="The training settings (`--steps` applied).")
    model_why: str = Field(default="given", description="How the model was chosen.")
    recipe: str | None = Field(
        default=None, description="The recipe line (file and why); None: settings were given."
    )
    curated: SamplingConfig | None = Field(
        default=None,
        description="The sampling the curriculum was curated at; None: not recorded or not read.",
    )


def resolve_train_job(
    ledger: Ledger | None,
    curriculum: str,
    model: Path | None,
    home: str | Path | None,
    settings: TrainSettings | None = None,
    *,
    recipe: Recipe | None = None,
    steps: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> TrainJob:
    """The one place a training run is resolved, from one open ledger: the curriculum id
    (`resolve_curriculum`), the sampling it was curated at (`curated_sampling`), the model
    (`model`, else the one the curriculum was curated with: `curriculum_model`), the settings
    (`settings`, else `pipeline.jobs.train.settings.train_recipe`: `recipe`, a `--config` file, else
    the model's recipe, with `steps` and the fields `options` replaces) and the home
    (`resolve_home`). `ledger` None reads nothing: `model` must be given and `curriculum` stays
    as given (`sieve train --print-config --model`)."""
    if ledger is None:
        if model is None:
            raise SieveError("a train job without a ledger needs its model folder")
        cid, curated = curriculum, None
    else:
        cid = resolve_curriculum(ledger, curriculum)
        curated = curated_sampling(ledger, cid)
    if model is not None:
        folder, why = model, "given"
    else:
        assert ledger is not None
        folder, why = curriculum_model(ledger, cid, home)
    line = None
    if settings is None:
        chosen, settings = train_recipe(folder, recipe, steps, options)
        line = chosen.line()
    return TrainJob(
        curriculum_id=cid, model=folder, home=resolve_home(home), settings=settings,
        model_why=why, recipe=line, curated=curated,
    )  # fmt: skip


def curriculum_model(
    ledger: Ledger, curriculum_id: str, home: str | Path | None = None
) -> tuple[Path, str]:
    """The model folder a curriculum was curated with, and a note saying how it was chosen.

    Curricula record the model (`curricula.model`, relative to the home when inside it, and
    `model_revision`); ledgers from before that fall back to the newest registered checkpoint,
    else the tiny policy. One SieveError line when the folder is gone or was a served model."""
    rows = ledger.run(
        "SELECT model, model_revision FROM curricula WHERE curriculum_id = $c", {"c": curriculum_id}
    )
    model, revision = rows[0] if rows else (None, None)
    if not model:
        path = latest_model(ledger, home)
        if not (path / "config.json").is_file():
            raise SieveError(
                f"curriculum {curriculum_id} records no model and there is no tiny policy at "
                f"{path}: pass --model FOLDER"
            )
        what = "the tiny policy" if path == _tiny(home) else "the newest registered checkpoint"
        return path, f"curriculum {curriculum_id} records no model: using {what}"
    if str(revision or "").startswith("served:"):
        raise SieveError(
            f"curriculum {curriculum_id} was curated with the served model {model!r} (openai "
            "backend): pass --model FOLDER holding its weights"
        )
    folder = from_home(str(model), _home(ledger, home), _has_revision(revision))
    if not (folder / "config.json").is_file():
        raise SieveError(
            f"curriculum {curriculum_id} was curated with model folder {folder}, which is not a "
            "model folder here (moved, deleted, or relative to another directory): "
            "pass --model FOLDER"
        )
    note = f"the model curriculum {curriculum_id} was curated with"
    if revision and folder_revision(folder) != revision:
        note += f"; warning: its weights changed since (curated with revision {revision})"
    return folder, note


def lineage_head(ledger: Ledger, revision: str, home: str | Path | None = None) -> Path | None:
    """The newest checkpoint (of a finished run) descended from `revision`: trained from it, or
    from a checkpoint trained from it, and so on; None when there is none. One SieveError line
    when it is missing from disk (a night would otherwise continue from an older checkpoint or
    another model without a word); older ones may be gone (a run keeps its last K)."""
    rows = ledger.run(load_query("lineage_checkpoints"), {"revision": revision})
    return _on_disk(rows[0], _home(ledger, home), "of this lineage") if rows else None


def nightly_model(
    ledger: Ledger | None, model: str | None, home: str | Path | None = None
) -> tuple[Path, str]:
    """What a night curates and trains from, and a note saying why.

    Given a model folder: the newest checkpoint of its lineage, else the folder itself. Without
    one: the newest checkpoint of the lineage of the model the newest curriculum was curated
    with (else that model), so nights continue what the last one curated; on a fresh home (or a
    ledger whose curricula record no model) the newest registered checkpoint, else the tiny
    policy. A recorded checkpoint that is missing is one SieveError line, never a silent fall
    back to another model."""
    if ledger is None:  # a fresh home: nothing curated or trained yet
        if model is not None:
            return Path(model), "nothing trained from it yet"
        return _tiny(home), "a fresh home: the tiny policy"
    if model is not None:
        folder = Path(model)
        if not (folder / "config.json").is_file():
            return folder, "not a local folder (a served model): no lineage to follow"
        head = lineage_head(ledger, folder_revision(folder), home)
        if head is not None:
            return head, f"the newest checkpoint trained from {folder}"
        return folder, "nothing trained from it yet"
    rows = ledger.run(load_query("newest_curriculum_model"))
    if rows and rows[0][1] and not str(rows[0][2] or "").startswith("served:"):
        cid, name, revision = rows[0]
        head = lineage_head(ledger, str(revision), home) if revision else None
        folder = from_home(str(name), _home(ledger, home), _has_revision(revision))
        if head is not None:
            return head, f"the newest checkpoint trained from {folder} (curriculum {cid}'s model)"
        if (folder / "config.json").is_file():
            return folder, f"the model of the newest curriculum {cid}"
        made = ledger.run(
            "SELECT train_id, step FROM checkpoints WHERE model_revision = $r LIMIT 1",
            {"r": str(revision)},
        )
        if made:  # a checkpoint of this ledger's: not to be replaced by another model
            raise SieveError(
                f"the newest curriculum {cid} was curated with checkpoint {folder} (training "
                f"{made[0][0]}, step {made[0][1]}), which is missing: restore it (was the home "
                "moved or copied without it?), or pass --model FOLDER"
            )
    path = latest_model(ledger, home)
    if path == _tiny(home):
        return path, "nothing curated from a local model yet: the tiny policy"
    return path, "no curriculum names its model: the newest registered checkpoint"


def latest_model(ledger: Ledger, home: str | Path | None = None) -> Path:
    """The newest registered checkpoint, else the bootstrapped tiny policy; one SieveError line
    when that checkpoint is missing from disk."""
    rows = ledger.run(load_query("latest_checkpoints"))
    return _on_disk(rows[0], _home(ledger, home), "registered") if rows else _tiny(home)


def _on_disk(row: tuple[Any, ...], home: Path | None, which: str) -> Path:
    """The folder of a checkpoints row (path, model_revision, train_id, step), or one SieveError
    line naming it when it is not on disk."""
    path, revision, train_id, step = row
    folder = from_home(str(path), home, _has_revision(str(revision)), run=str(train_id))
    if not (folder / "config.json").is_file():
        raise SieveError(
            f"the newest checkpoint {which}, {folder} (training {train_id}, step {step}), is "
            "missing: restore it (was the home moved or copied without it?), or start from "
            "another model with --model"
        )
    return folder


def _has_revision(revision: str | None) -> Callable[[Path], bool] | None:
    """`from_home`'s check that a folder holds the model of `revision` (None: no check); a folder
    that holds no model does not."""
    if revision is None:
        return None

    def holds(folder: Path) -> bool:
        try:
            return folder_revision(folder) == revision
        except SieveError:
            return False

    return holds


def _home(ledger: Ledger, home: str | Path | None) -> Path | None:
    """The home that rows' relative folder names are relative to: the ledger's own folder."""
    if ledger.home is not None:
        return ledger.home
    return resolve_home(home) if home is not None else None


def _tiny(home: str | Path | None) -> Path:
    return resolve_home(home) / "models" / "tiny"


def finished_night(ledger: Ledger, night: date, revision: str) -> dict[str, Any] | None:
    """The `nights` row of `night` on the lineage that holds `revision` (the weights a night
    would start from now): its final weights are `revision` or an ancestor of it. None when
    that night has not finished there (a crashed night has no row: its re-run resumes it)."""
    frame = ledger.query("finished_night", night=night.isoformat(), revision=revision)
    return frame.row(0, named=True) if frame.height else None


def record_night(
    ledger: Ledger,
    night: date,
    start_revision: str,
    final_revision: str,
    curriculum_id: str | None,
    train_id: str | None,
) -> None:
    """A finished night in `nights` (a night run again with --again adds its own row)."""
    row = pl.DataFrame(
        {
            "night": [night],
            "start_revision": [start_revision],
            "final_revision": [final_revision],
            "curriculum_id": pl.Series([curriculum_id], dtype=pl.Utf8),
            "train_id": pl.Series([train_id], dtype=pl.Utf8),
            "finished_at": [datetime.now(UTC)],
        }
    )
    ledger.write("nights", row, on_conflict="replace")


def check_sampling(job: TrainJob, strict: bool) -> str | None:
    """The rule "train at the sampling the curriculum was curated at", for every entry point
    (`sieve train` before Prefect starts; the train flow when it resolves its own job: `sieve
    loop`, `schedule`, the demo, benchmarks): None when the run samples as the curriculum was
    curated (or the curriculum records nothing to compare with); otherwise one warning line
    naming each difference, or, with `strict`, a one-line SieveError. A prompt's pass rate, and
    so whether its group is informative, was measured at the curation's settings."""
    from pipeline.jobs.train.settings import folder_prompt_format
    from pipeline.sampling.budget import training_mismatch

    if job.curated is None:
        return None
    cfg = job.settings.grpo_config()
    fmt = folder_prompt_format(job.model)
    differences = training_mismatch(job.curated, fmt, cfg.temperature, cfg.max_new_tokens)
    if not differences:
        return None
    line = (
        f"curriculum {job.curriculum_id} was curated at other sampling settings than this run "
        f"trains at: {'; '.join(differences)} (its pass rates were measured there"
    )
    if strict:
        raise SieveError(f"{line}; set them alike in the recipe, or drop --strict)")
    return f"warning: {line}; --strict refuses)"


def curated_sampling(ledger: Ledger, curriculum_id: str) -> SamplingConfig | None:
    """The sampling settings a curriculum was curated at (its recorded CurateConfig's
    `[sampling]`); None where the curriculum records none (ledgers from before it was kept, or a
    curriculum written by hand): nothing to compare with."""
    rows = ledger.run("SELECT config FROM curricula WHERE curriculum_id = $c", {"c": curriculum_id})
    try:
        recorded = json.loads(rows[0][0]).get("sampling") if rows and rows[0][0] else None
        return SamplingConfig.model_validate(recorded) if recorded is not None else None
    except (ValueError, ValidationError, AttributeError):
        return None


def night_start(
    home: str | Path | None, model: str | None, fresh: bool = False
) -> tuple[Path, str]:
    """What a night starts from, and why: `current_model`, or with `fresh` the model folder
    itself (a new lineage beside the runs trained from it: a second run, a sweep member), even
    where the ledger records newer checkpoints of its lineage. One SieveError line when `fresh`
    names no model folder."""
    if not fresh:
        return current_model(home, model)
    if model is None or not (Path(model) / "config.json").is_file():
        raise SieveError("--fresh starts a new lineage from a model folder: pass --model FOLDER")
    return Path(model), "--fresh: a new lineage from the folder itself"


def current_model(home: str | Path | None, model: str | None = None) -> tuple[Path, str]:
    """`nightly_model` for `home`, read from its ledger when there is one (a fresh home: the
    tiny policy, or `model`'s own folder): what a night, `sieve curate` or `sieve eval` without
    `--model` starts from, and why."""
    from pipeline.core.home import ledger_path

    if not ledger_path(home).exists():
        return nightly_model(None, model, home)
    with Ledger.open(home, read_only=True) as ledger:
        return nightly_model(ledger, model, home)
