"""`sieve bootstrap`, `sieve eval`, `sieve curate`: a policy, its held-out score, its curriculum.

Without `--model`, eval and curate take what the nightly flow would: the newest checkpoint of
the newest curriculum's model (`current_model`). The calls into the jobs are `run_curate` (the
Prefect curation flow, `flows.curate.curate_flow`) and `run_eval` (`flows.evaluate.eval_flow`).

Test: `pytest tests/cli/test_cli.py tests/cli/test_train_cli.py tests/cli/test_bad_inputs.py`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from flows.cli.common import (
    bold,
    committed,
    err,
    out,
    progress,
    show,
    start_flows,
    validated,
)
from flows.cli.options import (
    ENGINE,
    EVAL,
    SAMPLING,
    BackendOpt,
    BaseUrlOpt,
    ConfigOpt,
    HomeOpt,
    ModelOpt,
    OptionBlock,
    eval_block,
    option_blocks,
)
from pipeline.core.errors import SieveError

if TYPE_CHECKING:
    from flows.scale import ScaleConfig
    from pipeline.core.hooks import ProgressEvent, SamplingPlan
    from pipeline.jobs.curate import Policy
    from pipeline.sampling import EngineOptions
    from pipeline.sampling.budget import EvalConfig
    from pipeline.selection import CurateConfig

# bootstrap's own evaluation: its --seed seeds the data, the weights and the evaluation
BOOTSTRAP_EVAL = eval_block("per_level", prefix="Evaluation after training: ")


@option_blocks
def bootstrap(
    seed: Annotated[int, typer.Option(help="Seed for data, init and sampling.")] = 0,
    max_steps: Annotated[
        int, typer.Option(help="Supervised steps (the same seed gives the same weights).")
    ] = 700,
    max_minutes: Annotated[
        float | None, typer.Option(help="Train for this wall-clock budget instead of steps.")
    ] = None,
    evaluation: OptionBlock = BOOTSTRAP_EVAL,
    home: HomeOpt = None,
) -> None:
    """Train the built-in tiny policy from scratch, save it, evaluate it on held-out problems."""
    from pipeline.jobs.bootstrap import BootstrapConfig, save_atomically, train_tiny
    from pipeline.jobs.curate import policy_for

    if (max_minutes is not None and max_minutes <= 0) or max_steps < 1:
        raise SieveError("--max-minutes must be > 0 and --max-steps >= 1")
    evaluated = eval_config(**evaluation.overrides(), seed=seed)  # before training, not after
    cfg = BootstrapConfig(seed=seed, max_minutes=max_minutes, max_steps=max_steps)
    folder = tiny_model(home)
    with progress("bootstrap: training") as bar:
        task = bar.add_task("training", total=1.0)
        result = train_tiny(
            cfg,
            progress=lambda e: bar.update(
                task,
                completed=e.metrics["fraction"],
                description=f"step {e.done} loss {e.metrics['loss']:.3f}",
            ),
        )
    revision = save_atomically(result, folder, cfg)
    out.print(
        f"trained {result.steps} steps in {result.seconds / 60:.1f} min "
        f"(loss {result.final_loss:.3f}); saved {folder} (revision {revision})"
    )
    run_eval(policy_for(folder), evaluated, home)


# samples of one prompt drawn at once: a sampler holds a prompt's group in memory together (its
# rows x vocabulary of logits, its KV cache), and 100,000 asked terabytes; GRPO groups are 4-64
MAX_GROUP_SIZE = 1024
GROUP_FIELDS = ("screen_g", "refine_g", "stage1_g", "max_group_size")


def check_curate_config(cfg: CurateConfig, config: Path | None) -> None:
    """One SieveError line (`config` names the file) when a group size of `cfg` is past
    `MAX_GROUP_SIZE` (the config allows up to 2^31 - 1, which no machine samples at once), or
    when it samples at temperature 0: greedy samples of a prompt are all alike, so no group
    can disagree and the curation would write an empty curriculum, exit 0, as `latest`."""
    where = f"{config}: " if config is not None else ""
    for name in GROUP_FIELDS:
        value = getattr(cfg, name)
        if value > MAX_GROUP_SIZE:
            raise SieveError(
                f"{where}{name} = {value} is more samples of one prompt than a sampler holds at "
                f"once; at most {MAX_GROUP_SIZE}"
            )
    if cfg.sampling.sampling_temperature == 0:
        raise SieveError(
            f"{where}temperature 0 (greedy) samples every prompt alike, so no group can "
            "disagree and the curriculum would be empty; curate at a temperature > 0"
        )


def eval_config(**values: Any) -> EvalConfig:
    """`EvalConfig(**values)`, a value out of range as one line naming its option."""
    from grpo_core.validate import FieldError
    from pipeline.sampling.budget import EvalConfig

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


@option_blocks
def eval_cmd(
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    evaluation: OptionBlock = EVAL,
    sampling: OptionBlock = SAMPLING,
    engine: OptionBlock = ENGINE,
    home: HomeOpt = None,
) -> None:
    """Held-out pass@1 by family x level (greedy and sampled), recorded in the ledger."""
    from pipeline.jobs.curate import policy_for
    from pipeline.sampling.budget import SamplingConfig

    folder = current_model(model, home)
    config = validated(SamplingConfig, sampling.overrides())
    cfg = eval_config(**evaluation.overrides(), sampling=config)
    policy = policy_for(folder, backend, base_url or (), engine.options())  # loads the model
    run_eval(policy, cfg, home)


@option_blocks
def curate(
    config: ConfigOpt = None,
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates (overrides the config).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (overrides the config).")] = None,
    sampling: OptionBlock = SAMPLING,
    engine: OptionBlock = ENGINE,
    home: HomeOpt = None,
    runner: Annotated[
        str, typer.Option(help="Where chunks run: local, dask or ray (needs '.[scale]').")
    ] = "local",
    runner_address: Annotated[
        str | None, typer.Option(help="An existing dask/ray cluster; default: a local one.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Workers of a local dask/ray cluster.")] = 2,
) -> None:
    """Screen, refine and select a two-stage curriculum for the model (a Prefect flow)."""
    from pipeline.core.runlog import quiet_prefect
    from pipeline.selection import CurateConfig, load_curate_config

    cfg = load_curate_config(config) if config is not None else CurateConfig()
    chosen = set(sampling.overrides()) | (cfg.sampling.model_fields_set if config else set())
    overrides: dict[str, object] = {
        k: v for k, v in (("n_candidates", n), ("seed", seed)) if v is not None
    }
    if given := sampling.overrides():
        overrides["sampling"] = {**cfg.sampling.model_dump(), **given}
    if overrides:
        cfg = validated(CurateConfig, {**cfg.model_dump(), **overrides})
    check_curate_config(cfg, config)
    quiet_prefect(home)  # after the config checks (a bad one writes nothing), before flows.scale
    from flows.scale import ScaleConfig  # imports Prefect, which reads this home's set-up

    scale = validated(
        ScaleConfig, {"runner": runner, "runner_address": runner_address, "workers": workers}
    )
    folder = current_model(model, home)
    if backend != "openai" and not folder.exists():
        raise SieveError(f"model folder {folder} does not exist (run `sieve bootstrap` first?)")
    cfg = with_recipe_sampling(cfg, folder, chosen)
    check_curate_config(cfg, config)
    summary = run_curate(str(folder), backend, base_url or [], home, cfg, engine.options(), scale)
    _print_summary(summary)


def with_recipe_sampling(cfg: CurateConfig, folder: Path, chosen: set[str]) -> CurateConfig:
    """`cfg` at the sampling the model trains at (`pipeline.jobs.recipes.curation_sampling`) for
    the fields neither a flag nor the config file set, named in one line when any is taken."""
    from pipeline.jobs.recipes import curation_sampling

    cfg, line = curation_sampling(cfg, folder, sorted(chosen))
    if line:
        out.print(line)
    return cfg


def sampling_plan(cfg: CurateConfig, folder: str) -> SamplingPlan:
    """The upper bounds of what curating `folder` with `cfg` samples."""
    from pipeline.core.hooks import SamplingPlan
    from pipeline.jobs.recipes import folder_prompt_format

    return SamplingPlan(
        cfg.n_candidates,
        cfg.screen_g,
        cfg.refine_g,
        cfg.sampling.budget(folder_prompt_format(folder)),
    )


def tiny_model(home: Path | None) -> Path:
    """Where the built-in tiny policy lives in this home."""
    from pipeline.core.home import resolve_home

    return resolve_home(home) / "models" / "tiny"


def current_model(model: Path | None, home: Path | None) -> Path:
    """`--model`, else what the nightly flow would use: the newest checkpoint of the lineage of
    the newest curriculum's model (else that model; on a fresh home the tiny policy), named in
    one line, so `sieve curate --model M` → `sieve train` → `sieve eval` needs M only once."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.lineage import nightly_model
    from pipeline.store import Ledger

    if model is not None:
        return model
    if not ledger_path(home).exists():
        return tiny_model(home)
    with Ledger.open(home, read_only=True) as ledger:
        folder, why = nightly_model(ledger, None, home)
    out.print(f"model: {folder} ({why})")
    return folder


def run_curate(
    model: str,
    backend: str,
    base_urls: list[str],
    home: Path | None,
    cfg: CurateConfig,
    engine: EngineOptions | None = None,
    scale: ScaleConfig | None = None,
) -> dict[str, Any]:
    """The curation job: the Prefect flow `flows.curate.curate_flow`, with a bar per stage."""
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
        out.print(plan.line())
    started = time.monotonic()
    with progress("curate") as bar:
        tasks: dict[str, Any] = {}
        done: dict[str, str] = {}

        def update(e: ProgressEvent) -> None:  # one event per committed chunk
            if e.stage not in tasks:
                tasks[e.stage] = bar.add_task(e.stage, total=e.total)
            bar.update(tasks[e.stage], completed=e.done, description=f"{e.stage} chunks")
            done[e.stage] = f"{e.stage} {e.done} of {e.total} chunks"
            committed(f"{', '.join(done.values())} committed; rerun the same command to resume")
            if plan is not None and e.stage == "screen" and e.done == 1:
                out.print(plan.estimate(time.monotonic() - started, e.total))
            if e.done == e.total and not err.is_terminal:  # the bar is off: one line per stage
                minutes = (time.monotonic() - started) / 60
                chunks = f"{e.total} chunk{'s' if e.total > 1 else ''}"
                out.print(f"{e.stage}: {chunks} done ({minutes:.1f} min in)")

        summary = curate_flow(params, Runtime(progress=update))
    if not err.is_terminal:
        out.print(f"write: curriculum written ({(time.monotonic() - started) / 60:.1f} min in)")
    return summary


def run_eval(policy: Policy, cfg: EvalConfig, home: Path | None) -> None:
    """The eval job: the Prefect flow `flows.evaluate.eval_flow` on `policy`, the held-out
    table printed."""
    import polars as pl

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
    with progress("evaluating") as bar:
        task = bar.add_task("greedy", total=2 if cfg.sampling.sampling_temperature > 0 else 1)

        def update(e: ProgressEvent) -> None:
            bar.update(task, completed=e.done, description=f"{e.stage} recorded")
            committed(f"held-out {e.stage} results recorded")

        result = eval_flow(params, Runtime(policy=policy, progress=update))
    table = pl.DataFrame(result["table"])
    show(
        table,
        f"held-out pass@1 by family x level (greedy: T=0; sampled: {cfg.samples} per problem at "
        f"T={cfg.sampling.sampling_temperature:g}; errors: verifier errors, counted as wrong)",
    )


def _print_summary(summary: dict[str, Any]) -> None:
    import polars as pl

    out.print(Text.assemble("curriculum ", bold(summary["curriculum_id"])))
    kept = summary["kept"]
    out.print(
        "kept: "
        + ", ".join(f"{k} {v}" for k, v in kept.items())
        + f" (of which replay {summary['replay']})"
        if kept
        else "kept: nothing (no informative prompts)"
    )
    rejected = pl.DataFrame(
        {"reason": list(summary["rejected"]), "prompts": list(summary["rejected"].values())}
    )
    show(rejected, "rejected by reason")
    hist = summary["screen_pass_rate_histogram"]
    bars = " ".join(f"{i / 10:.1f}:{c}" for i, c in enumerate(hist))
    out.print(f"screen pass-rate histogram (bin start: prompts): {bars}")
    spent = summary["rollouts_spent"]
    out.print(f"rollouts spent: {sum(spent.values())} ({spent})")
