"""`sieve eval` and `sieve bootstrap`'s jobs: the evaluation settings checked (`eval_config`: a
value out of range as one line naming its option), the policy loaded, then the Prefect flow
`flows.evaluate.eval_flow` (`run_eval`); `bootstrap` trains the built-in tiny policy first.

Test: `pytest tests/cli/test_train_cli.py tests/cli/test_bad_inputs.py tests/test_report.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.commands import common
from flows.commands.common import Note, command_model, silent, tiny_model, validated
from pipeline.core.errors import SieveError
from pipeline.core.hooks import Progress

if TYPE_CHECKING:
    from pipeline.jobs.curate.curation import Policy
    from pipeline.sampling import EngineOptions
    from pipeline.sampling.budget import EvalConfig


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
    note: Note = silent,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], EvalConfig]:
    """`sieve eval`: the model decided (`command_model`), the evaluation settings checked
    (`values`: EvalConfig's fields, `sampling`: SamplingConfig's), the policy loaded, then the
    Prefect flow `flows.evaluate.eval_flow`. Returns its result and the settings it ran at."""
    from pipeline.jobs.curate.curation import policy_for
    from pipeline.sampling.budget import SamplingConfig

    folder = command_model(model, home, note)
    cfg = eval_config(**values, sampling=validated(SamplingConfig, sampling))
    policy = policy_for(folder, backend, base_urls or (), engine)  # loads the model
    return run_eval(policy, cfg, home, progress), cfg


def run_eval(
    policy: Policy, cfg: EvalConfig, home: Path | None, progress: Progress | None = None
) -> dict[str, Any]:
    """The Prefect flow `flows.evaluate.eval_flow` on `policy`."""
    common.start_flows(home)
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
    note: Note = silent,
    train_progress: Progress | None = None,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], EvalConfig]:
    """`sieve bootstrap`: the built-in tiny policy trained from scratch (`settings`:
    `BootstrapConfig`'s fields, its defaults elsewhere; its seed seeds the data, the weights and
    the evaluation), saved to this home, then evaluated (`values`: EvalConfig's fields). Both
    are checked before training, a bad value as one line naming its option."""
    from grpo_core.validate import FieldError
    from pipeline.jobs.curate.curation import policy_for
    from pipeline.jobs.train.bootstrap import BootstrapConfig, save_atomically, train_tiny

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
