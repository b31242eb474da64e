"""The `sieve` command line.

Every command takes `--home` (else `$SIEVE_HOME`, else `./data`). A user error prints one line,
`error: ...`, on stderr and exits 1; usage errors exit 2 (Typer's convention); so does a full
disk, whatever was writing. Commands that run Prefect flows keep Prefect's logs in
`<home>/logs/prefect.log` unless `sieve --verbose CMD`, and tie Prefect's temporary API server to
their own process (`pipeline.procs`).

Test: `pytest tests/cli`.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from pipeline.cli_models import models_app
from pipeline.errors import SieveError

app = typer.Typer(
    name="sieve",
    help="Curate RL data for reasoning models with GRPO's own signal, and train on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)


@app.callback()
def _options(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show Prefect's and other libraries' logs and progress bars on the console "
            "(default: flows log to <home>/logs/prefect.log). Also $SIEVE_VERBOSE=1.",
        ),
    ] = False,
) -> None:
    """Options for every command (put them before the command: `sieve --verbose curate`)."""
    from pipeline.runlog import VERBOSE_ENV

    if verbose:
        os.environ[VERBOSE_ENV] = "1"


HomeOpt = Annotated[
    Path | None,
    typer.Option("--home", help="Sieve home (ledger, models); default $SIEVE_HOME or ./data."),
]


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _table(frame: object, title: str | None = None, max_rows: int = 200) -> Table:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    table = Table(title=title, show_lines=False)
    for name in frame.columns:
        table.add_column(name, overflow="fold")
    for row in frame.head(max_rows).iter_rows():
        table.add_row(*("" if v is None else _cell(v) for v in row))
    if frame.height > max_rows:
        table.caption = f"{frame.height} rows, first {max_rows} shown (use --format csv)"
    return table


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@app.command()
def generate(
    family: Annotated[
        str | None, typer.Option(help="Problem family (arith, linear, modular, word).")
    ] = None,
    mix: Annotated[
        Path | None, typer.Option(help="A TOML mix of families and levels instead of --family.")
    ] = None,
    levels: Annotated[str, typer.Option(help="Levels: 3, 1-5, 1,3,5 or all.")] = "all",
    n: Annotated[int, typer.Option(help="Number of problems, spread over the levels.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed; the same seed gives the same problems.")] = 0,
    heldout_pct: Annotated[float, typer.Option(help="Percent held out, fixed by hash.")] = 10.0,
    home: HomeOpt = None,
) -> None:
    """Generate problems into the ledger and print counts by level."""
    from pipeline.problems import generate as make_problems
    from pipeline.problems import generate_mix, parse_levels
    from pipeline.problems.mix import load_mix
    from pipeline.store import Ledger

    if (family is None) == (mix is None):
        raise SieveError("give exactly one of --family NAME or --mix FILE")
    if mix is not None:
        frame = generate_mix(load_mix(mix).levels(), n, seed, heldout_pct=heldout_pct)
        label = mix.name
    else:
        assert family is not None
        chosen = parse_levels(levels, family)
        frame = make_problems(family, chosen, n, seed, heldout_pct=heldout_pct)
        label = family
    with Ledger.open(home) as ledger:
        new = ledger.write("problems", frame)
        where = ledger.path
    _print_counts(frame, f"{label}: {frame.height} problems ({new} new) -> {where}")


def _print_counts(frame: object, title: str) -> None:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    counts = (
        frame.group_by("family", "level")
        .agg(
            pl.len().alias("problems"),
            (pl.col("split") == "train").sum().alias("train"),
            (pl.col("split") == "heldout").sum().alias("heldout"),
        )
        .sort("family", "level")
    )
    out.print(_table(counts, title=title))


@app.command()
def ingest(
    file: Annotated[Path, typer.Argument(help="A .jsonl or .parquet file of problems.")],
    question_field: Annotated[str, typer.Option(help="Field holding the question.")] = "question",
    answer_field: Annotated[str, typer.Option(help="Field holding the answer.")] = "answer",
    family: Annotated[str, typer.Option(help="Family name recorded for these problems.")] = (
        "external"
    ),
    level_field: Annotated[str | None, typer.Option(help="Optional integer level field.")] = None,
    heldout_pct: Annotated[float, typer.Option(help="Percent held out, fixed by hash.")] = 10.0,
    allow_conflicts: Annotated[
        bool,
        typer.Option(
            "--allow-conflicts",
            help="Keep a question given different answers, each as its own problem.",
        ),
    ] = False,
    max_line_bytes: Annotated[
        int | None, typer.Option(help="Longest JSONL line accepted, in bytes (default 1 MiB).")
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Import external problems (GSM8K-style '#### 42' answers are recognised).

    All or nothing: a bad record (named by file and line) imports nothing.
    """
    from pipeline.problems.ingest import MAX_LINE_BYTES, conflicting_questions, read_external
    from pipeline.store import Ledger

    if not file.exists():
        raise SieveError(f"{file}: no such file")
    frame = read_external(
        file,
        question_field,
        answer_field,
        family=family,
        level_field=level_field,
        heldout_pct=heldout_pct,
        allow_conflicts=allow_conflicts,
        max_line_bytes=MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
    )
    with Ledger.open(home) as ledger:
        new = ledger.write("problems", frame)
        where = ledger.path
    _print_counts(frame, f"{file.name}: {frame.height} problems ({new} new) -> {where}")
    clashes = conflicting_questions(frame) if allow_conflicts else 0
    if clashes:
        out.print(f"{clashes} question(s) kept with more than one answer (--allow-conflicts)")


@app.command()
def verify(
    answer: Annotated[str, typer.Option(help="The gold answer.")],
    completion: Annotated[str, typer.Option(help="The model's completion.")],
    verifier: Annotated[str, typer.Option(help="Verifier name.")] = "math",
) -> None:
    """Score one completion against a gold answer and print the verdict as JSON."""
    from pipeline.scoring import VERIFIER_VERSION
    from pipeline.scoring import verify as run_verify

    try:
        verdict = run_verify(completion, answer, verifier)
    except ValueError as exc:
        raise SieveError(str(exc)) from exc
    payload = {
        "reward": verdict.reward,
        "correct": verdict.correct,
        "reason": verdict.reason,
        "components": verdict.components,
        "detail": verdict.detail,
        "verifier_version": VERIFIER_VERSION,
    }
    out.print_json(json.dumps(payload))


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A read-only query (SELECT, EXPLAIN, SHOW...).")],
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    output: Annotated[Path | None, typer.Option(help="Write to this file.")] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", envvar="SIEVE_SQL_TIMEOUT", help="Stop the query after this many seconds."
        ),
    ] = 60.0,
    memory_limit: Annotated[
        str,
        typer.Option(
            "--memory-limit",
            envvar="SIEVE_SQL_MEMORY_LIMIT",
            help="DuckDB's memory for the query, e.g. 512MB or 4GiB; while it runs the process "
            "may grow by at most about twice this.",
        ),
    ] = "2GB",
    home: HomeOpt = None,
) -> None:
    """Run one read-only query on the ledger (views: group_stats, prompt_stats, ...). It runs
    sandboxed: it reads only the ledger, writes nothing, changes no setting, and stops at
    --timeout and --memory-limit. Lists and structs become JSON text in csv and table output."""
    from pipeline.store import Ledger, QueryLimits, Sandbox, check_query
    from pipeline.store.sandbox_sql import View, exit_process

    statement = check_query(query)
    limits = QueryLimits.from_options(timeout, memory_limit)
    if format is Format.parquet and output is None:
        raise SieveError("--format parquet needs --output FILE")
    if output is not None and not output.parent.is_dir():
        raise SieveError(f"cannot write {output}: directory {output.parent} does not exist")
    views: dict[Format, View] = {Format.parquet: "native", Format.json: "json"}
    view = views.get(format, "text")
    with Ledger.open(home, read_only=True) as ledger:
        if output is not None and ledger.path is not None:
            target, own = output.resolve(), ledger.path.resolve()
            if target in (own, own.with_name(own.name + ".wal")):
                raise SieveError(f"refused: --output {output} is the ledger itself")
        result = Sandbox(ledger.con, limits, on_stuck=exit_process).run(statement, view)
    _emit(result, format, output)


def _emit(result: object, format: Format, output: Path | None) -> None:
    """Write a `Sandbox.run` result: Parquet from the native view, a JSON array from the json
    view (one object per row), CSV or a table from the text view."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert isinstance(result, pa.Table)
    if format is Format.parquet:
        assert output is not None
        try:
            pq.write_table(result, output)
        except (OSError, pa.ArrowException) as exc:
            raise SieveError(f"cannot write {output}: {' '.join(str(exc).split())}") from exc
    elif format is Format.json:
        rows = result.column(0).to_pylist()
        _write_text("[\n" + ",\n".join(rows) + "\n]\n" if rows else "[]\n", output)
    else:
        frame = pl.from_arrow(result)  # text view: numbers, booleans and strings only
        assert isinstance(frame, pl.DataFrame)
        if format is Format.csv:
            _write_text(frame.write_csv(), output)
        elif output is None:
            out.print(_table(frame))
        else:
            with _writing(output) as handle:
                Console(file=handle, width=200).print(_table(frame, max_rows=frame.height))


def _write_text(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
    else:
        with _writing(output) as handle:
            handle.write(text)


@contextmanager
def _writing(output: Path) -> Iterator[Any]:
    """`output` open for writing text; an OSError becomes one `error:` line."""
    try:
        with output.open("w", encoding="utf-8") as handle:
            yield handle
    except OSError as exc:
        raise SieveError(f"cannot write {output}: {exc.strerror or exc}") from exc


@app.command()
def stats(home: HomeOpt = None) -> None:
    """Print the ledger's summary views."""
    from pipeline.store import Ledger

    with Ledger.open(home, read_only=True) as ledger:
        out.print(f"ledger: {ledger.path}")
        _show(ledger.query("table_counts"), "tables")
        _show(ledger.query("problem_counts"), "problems by family x level")
        _show(
            ledger.query("difficulty_latest"),
            "measured pass rate by family x level, newest revisions",
        )
        _show(ledger.query("runs_latest"), "latest sampling runs")
        from pipeline.curate import allocation, load_history
        from pipeline.selection import CurateConfig

        cells = allocation(CurateConfig(), load_history(ledger, []))
        if cells is not None:
            _show(
                cells,
                "informative groups by family x level (recent revisions) and where the next "
                "curation's candidates go (default config)",
            )
        _show(ledger.sql("SELECT * FROM curriculum_summary"), "curricula")
        _show(ledger.sql("SELECT * FROM rejection_summary ORDER BY ALL"), "rejections by reason")
        from pipeline.loop import heldout_by_revision

        _show(heldout_by_revision(ledger), "held-out sampled pass@1 by revision (oldest first)")


def _show(frame: object, title: str) -> None:
    import polars as pl

    assert isinstance(frame, pl.DataFrame)
    if frame.height == 0:
        out.print(f"[bold]{title}[/bold]: none yet")
    else:
        out.print(_table(frame, title=title))


BackendOpt = Annotated[str, typer.Option("--backend", help="Sampler: hf, vllm or openai.")]
ModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--model",
        help="Model folder (default: the newest checkpoint of the newest curriculum's model, "
        "else that model, else the tiny policy under <home>/models).",
    ),
]
BaseUrlOpt = Annotated[
    list[str] | None,
    typer.Option("--base-url", help="OpenAI-compatible server (repeat for several; openai)."),
]


MaxTokensOpt = Annotated[
    int | None,
    typer.Option(help="Answer budget in tokens (default: 16 for the tiny model, 512 for chat)."),
]
TemperatureOpt = Annotated[float | None, typer.Option(help="Sampling temperature (default 1).")]
TopPOpt = Annotated[float | None, typer.Option(help="Nucleus top-p (default 1).")]
StopOpt = Annotated[
    list[str] | None, typer.Option("--stop", help="A stop string (repeat for several).")
]
GpuMemOpt = Annotated[
    float | None,
    typer.Option(help="vllm: share of GPU memory the engine may take (default vLLM's own)."),
]
KvCacheOpt = Annotated[
    float | None,
    typer.Option(help="vllm: KV-cache GiB (CPU default 4, or $VLLM_CPU_KVCACHE_SPACE)."),
]
MaxModelLenOpt = Annotated[int | None, typer.Option(help="vllm: context length of the engine.")]
DtypeOpt = Annotated[str, typer.Option(help="vllm: weights dtype (auto, bfloat16, float32).")]
TPOpt = Annotated[int, typer.Option(help="vllm: tensor-parallel size (GPUs per engine).")]
DPOpt = Annotated[int, typer.Option(help="vllm: data-parallel size (engine replicas).")]


def _sampling_overrides(
    max_new_tokens: int | None, temperature: float | None, top_p: float | None, stop: list | None
) -> dict[str, object]:
    given = {
        "max_new_tokens": max_new_tokens,
        "temperature": temperature,
        "top_p": top_p,
        "stop": tuple(stop) if stop else None,
    }
    return {k: v for k, v in given.items() if v is not None}


def _engine(
    gpu_memory_utilization: float | None,
    kv_cache_gib: float | None,
    max_model_len: int | None,
    dtype: str,
    tensor_parallel_size: int,
    data_parallel_size: int,
) -> object:
    from pipeline.sampling import EngineOptions

    try:
        return EngineOptions(
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_gib=kv_cache_gib,
            max_model_len=max_model_len,
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            data_parallel_size=data_parallel_size,
        )
    except (TypeError, ValueError) as exc:
        raise SieveError(f"invalid engine option: {exc}") from None


def _model_dir(model: Path | None, home: Path | None) -> Path:
    from pipeline.home import resolve_home

    return model if model is not None else resolve_home(home) / "models" / "tiny"


def _current_model(model: Path | None, home: Path | None) -> Path:
    """`--model`, else what the nightly flow would use: the newest checkpoint of the lineage of
    the newest curriculum's model (else that model; on a fresh home the tiny policy), named in
    one line, so `sieve curate --model M` → `sieve train` → `sieve eval` needs M only once."""
    from pipeline.home import ledger_path
    from pipeline.store import Ledger
    from pipeline.train import nightly_model

    if model is not None:
        return model
    if not ledger_path(home).exists():
        return _model_dir(None, home)
    with Ledger.open(home, read_only=True) as ledger:
        folder, why = nightly_model(ledger, None, home)
    out.print(f"model: {folder} ({why})")
    return folder


@app.command()
def bootstrap(
    seed: Annotated[int, typer.Option(help="Seed for data, init and sampling.")] = 0,
    max_steps: Annotated[
        int, typer.Option(help="Supervised steps (the same seed gives the same weights).")
    ] = 700,
    max_minutes: Annotated[
        float | None, typer.Option(help="Train for this wall-clock budget instead of steps.")
    ] = None,
    per_level: Annotated[int, typer.Option(help="Held-out problems per level in eval.")] = 40,
    home: HomeOpt = None,
) -> None:
    """Train the built-in tiny policy from scratch, save it, evaluate it on held-out problems."""
    from pipeline.curate import policy_for
    from pipeline.policy.bootstrap import BootstrapConfig, save_atomically, train_tiny
    from pipeline.policy.evaluate import EvalConfig

    if (max_minutes is not None and max_minutes <= 0) or max_steps < 1:
        raise SieveError("--max-minutes must be > 0 and --max-steps >= 1")
    cfg = BootstrapConfig(seed=seed, max_minutes=max_minutes, max_steps=max_steps)
    folder = _model_dir(None, home)
    with _progress("bootstrap: training") as bar:
        task = bar.add_task("training", total=1.0)
        result = train_tiny(
            cfg,
            progress=lambda step, done, loss: bar.update(
                task, completed=done, description=f"step {step} loss {loss:.3f}"
            ),
        )
    revision = save_atomically(result, folder, cfg)
    out.print(
        f"trained {result.steps} steps in {result.seconds / 60:.1f} min "
        f"(loss {result.final_loss:.3f}); saved {folder} (revision {revision})"
    )
    _run_eval(policy_for(folder), EvalConfig(per_level=per_level, seed=seed), home)


@app.command("eval")
def eval_cmd(
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    per_level: Annotated[int, typer.Option(help="Held-out problems per level.")] = 40,
    samples: Annotated[int, typer.Option(help="Samples per problem at temperature 1.")] = 8,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    max_new_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    stop: StopOpt = None,
    gpu_memory_utilization: GpuMemOpt = None,
    kv_cache_gib: KvCacheOpt = None,
    max_model_len: MaxModelLenOpt = None,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    data_parallel_size: DPOpt = 1,
    home: HomeOpt = None,
) -> None:
    """Held-out pass@1 by family x level (greedy and sampled), recorded in the ledger."""
    from pipeline.curate import policy_for
    from pipeline.policy.evaluate import EvalConfig
    from pipeline.sampling.budget import SamplingConfig

    folder = _current_model(model, home)
    if samples < 1:
        raise SieveError("--samples must be >= 1")
    sampling = _validated(
        SamplingConfig, _sampling_overrides(max_new_tokens, temperature, top_p, stop)
    )
    engine = _engine(
        gpu_memory_utilization,
        kv_cache_gib,
        max_model_len,
        dtype,
        tensor_parallel_size,
        data_parallel_size,
    )
    policy = policy_for(folder, backend, base_url or (), engine)  # type: ignore[arg-type]
    cfg = EvalConfig(
        per_level,
        samples,
        sampling.temperature,
        sampling.max_new_tokens,
        seed=seed,
        top_p=sampling.top_p,
        stop=sampling.stop,
    )
    _run_eval(policy, cfg, home)


def _validated(model: type[BaseModel], values: dict[str, object]) -> Any:
    """`model.model_validate(values)` with a pydantic error as one SieveError line."""

    from pipeline.tomlconfig import first_error

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise SieveError(f"invalid option: {first_error(exc)}") from None


def _run_eval(policy: object, cfg: object, home: Path | None) -> None:
    from pipeline.curate import Policy
    from pipeline.policy.evaluate import EvalConfig, evaluate, heldout_set
    from pipeline.store import Ledger

    assert isinstance(policy, Policy) and isinstance(cfg, EvalConfig)
    problems = heldout_set(cfg.per_level)
    questions = problems["question"].to_list()
    prompts_of = dict(zip(questions, policy.render(questions), strict=True))
    with Ledger.open(home) as ledger, _progress("evaluating") as bar:
        bar.add_task(f"eval on {problems.height} held-out problems", total=None)
        table = evaluate(
            policy.sampler,
            ledger,
            policy.model_revision,
            prompts_of,
            cfg,
            problems,
            policy.prompt_format,
        )
    _show(
        table,
        f"held-out pass@1 by family x level (greedy: T=0; sampled: {cfg.samples} per problem at "
        f"T={cfg.temperature:g}; errors: verifier errors, counted as wrong)",
    )


def _progress(label: str) -> Progress:
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,  # off a terminal a bar only leaves a blank line behind
    )


@app.command()
def curate(
    config: Annotated[Path | None, typer.Option(help="CurateConfig TOML file.")] = None,
    model: ModelOpt = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates (overrides the config).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (overrides the config).")] = None,
    max_new_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    top_p: TopPOpt = None,
    stop: StopOpt = None,
    gpu_memory_utilization: GpuMemOpt = None,
    kv_cache_gib: KvCacheOpt = None,
    max_model_len: MaxModelLenOpt = None,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    data_parallel_size: DPOpt = 1,
    home: HomeOpt = None,
) -> None:
    """Screen, refine and select a two-stage curriculum for the model (a Prefect flow)."""
    from pipeline.selection import CurateConfig, load_curate_config

    cfg = load_curate_config(config) if config is not None else CurateConfig()
    overrides: dict[str, object] = {
        k: v for k, v in (("n_candidates", n), ("seed", seed)) if v is not None
    }
    sampling = _sampling_overrides(max_new_tokens, temperature, top_p, stop)
    if sampling:
        overrides["sampling"] = {**cfg.sampling.model_dump(), **sampling}
    if overrides:
        cfg = _validated(CurateConfig, {**cfg.model_dump(), **overrides})
    folder = _current_model(model, home)
    if backend != "openai" and not folder.exists():
        raise SieveError(f"model folder {folder} does not exist (run `sieve bootstrap` first?)")
    engine = _engine(
        gpu_memory_utilization,
        kv_cache_gib,
        max_model_len,
        dtype,
        tensor_parallel_size,
        data_parallel_size,
    )
    summary = _run_curate_flow(str(folder), backend, base_url or [], home, cfg, engine)
    _print_summary(summary)


def _run_curate_flow(
    model: str,
    backend: str,
    base_urls: list[str],
    home: Path | None,
    cfg: object,
    engine: object = None,
) -> dict:
    _start_flows(home)
    from flows.curate import CurateParams, run

    params = CurateParams(
        model=model,
        backend=backend,
        base_urls=base_urls,
        home=str(home) if home is not None else None,
        config=cfg,  # type: ignore[arg-type]
        engine=engine,  # type: ignore[arg-type]
    )
    with _progress("curate") as bar:
        bar.add_task("screen -> refine -> curriculum (Prefect flow)", total=None)
        return run(params)


def _print_summary(summary: dict) -> None:
    import polars as pl

    out.print(f"curriculum [bold]{summary['curriculum_id']}[/bold]")
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
    _show(rejected, "rejected by reason")
    hist = summary["screen_pass_rate_histogram"]
    bars = " ".join(f"{i / 10:.1f}:{c}" for i, c in enumerate(hist))
    out.print(f"screen pass-rate histogram (bin start: prompts): {bars}")
    spent = summary["rollouts_spent"]
    out.print(f"rollouts spent: {sum(spent.values())} ({spent})")


def _quiet_prefect(home: str | Path | None = None) -> None:
    from pipeline.loop import quiet_prefect

    quiet_prefect(home)


def _train_progress(bar: Progress, total: int) -> object:
    task = bar.add_task("starting", total=total)

    def update(step: int, total: int, m: dict[str, float]) -> None:
        bar.update(
            task,
            completed=step,
            description=(
                f"step {step}/{total} reward {m['reward_mean']:.2f} pass {m['pass_rate']:.2f} "
                f"KL {m['kl']:.3f} zero-var {m['zero_var_share']:.2f}"
            ),
        )

    return update


def _train_recipe(config: Path | None, model: Path, steps: int | None) -> tuple[Any, Any]:
    """(Recipe, TrainSettings): `--config FILE` alone on GRPOConfig's defaults, else the recipe
    file for the model; `--steps` replaces total_steps."""
    from pipeline.train import given_recipe, recipe_for

    recipe = given_recipe(config) if config is not None else recipe_for(model)
    settings = recipe.settings.with_steps(steps)
    settings.grpo_config()
    return recipe, settings


def _check_backend(backend: str, base_url: list[str] | None) -> None:
    from pipeline.sampling import BACKENDS

    if backend not in BACKENDS:
        raise SieveError(f"unknown --backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if backend == "openai" and not base_url:
        raise SieveError("the openai backend needs --base-url (repeat it for several servers)")


def _train_target(curriculum: str, model: Path | None, home: Path | None) -> tuple[str, Path, str]:
    """(curriculum id, model folder, why that folder), checked before Prefect starts."""
    from pipeline.export import resolve_curriculum
    from pipeline.home import ledger_path
    from pipeline.store import Ledger
    from pipeline.train import curriculum_model

    if not ledger_path(home).exists():
        raise SieveError(f"no ledger at {ledger_path(home)}: run `sieve curate` first")
    with Ledger.open(home, read_only=True) as ledger:
        cid = resolve_curriculum(ledger, curriculum)
        if model is not None:
            return cid, model, "given"
        folder, why = curriculum_model(ledger, cid, home)
    return cid, folder, why


def _start_flows(home: str | Path | None) -> None:
    """Before a command runs Prefect flows: Prefect set up for this home, its logs (a failed
    task's traceback among them) in <home>/logs/prefect.log unless --verbose, so a failure shows
    as `main`'s one `error:` line; and its temporary API server started tied to this process, so
    a killed run leaves no server behind (`pipeline.procs`)."""
    from pipeline.loop import quiet_prefect
    from pipeline.procs import start_prefect_server

    start_prefect_server(quiet_prefect(home))


def _run_train_flow(params: object) -> dict:
    from flows.train import TrainParams, set_progress, train_flow

    assert isinstance(params, TrainParams) and params.settings is not None
    _start_flows(params.home)
    total = params.settings.grpo_config().total_steps
    with _progress("train") as bar:
        set_progress(_train_progress(bar, total))  # type: ignore[arg-type]
        try:
            return train_flow(params)
        finally:
            set_progress(None)


def _print_train(summary: dict) -> None:
    from pipeline.loop import before_after

    table = before_after(summary)
    if not table.is_empty():
        _show(table, "held-out pass@1 before -> after")
    b, a = summary["heldout_before"], summary["heldout_after"]
    out.print(
        f"train {summary['train_id']}: {summary['steps']} steps, {summary['rollouts']} rollouts, "
        f"{summary['seconds']} s; held-out sampled {_pct(b['sampled'])} -> {_pct(a['sampled'])}, "
        f"greedy {_pct(b['greedy'])} -> {_pct(a['greedy'])}"
    )
    out.print(f"checkpoint {summary['checkpoint']} (revision {summary['final_revision']})")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


@app.command()
def train(
    curriculum: Annotated[str, typer.Option(help="Curriculum id or 'latest'.")] = "latest",
    config: Annotated[
        Path | None,
        typer.Option(
            help="TrainSettings TOML file, alone on GRPOConfig's defaults; default the recipe "
            "for the model (data/configs/tiny_train.toml or real_train.toml)."
        ),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            help="Starting model folder; default the model the curriculum was curated with."
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Stop after this many steps (resume later).")
    ] = None,
    steps: Annotated[int | None, typer.Option(help="Total steps (overrides the config).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the newest checkpoint.")] = False,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    gpu_memory_utilization: GpuMemOpt = None,
    kv_cache_gib: KvCacheOpt = None,
    max_model_len: MaxModelLenOpt = None,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    data_parallel_size: DPOpt = 1,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the effective settings as TOML (a --config file) and exit.",
        ),
    ] = False,
    home: HomeOpt = None,
) -> None:
    """GRPO on a curated curriculum; checkpoints are registered for the next curation."""
    _quiet_prefect(home)  # before Prefect is imported: this home's own Prefect state
    from flows.train import TrainParams
    from pipeline.train import given_recipe, settings_toml

    if max_steps is not None and max_steps < 1:
        raise SieveError(f"--max-steps must be >= 1, got {max_steps}")
    if config is not None:
        given_recipe(config)  # a bad file fails first, whatever else is wrong
    _check_backend(backend, base_url)
    engine = _engine(
        gpu_memory_utilization,
        kv_cache_gib,
        max_model_len,
        dtype,
        tensor_parallel_size,
        data_parallel_size,
    )
    if model is not None and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    if print_config and model is not None:  # no ledger needed to show settings
        cid, folder, why = curriculum, model, "given"
    else:
        cid, folder, why = _train_target(curriculum, model, home)
    recipe, settings = _train_recipe(config, folder, steps)
    if print_config:
        header = [f"sieve train: effective settings for {folder} ({why})", recipe.line()]
        sys.stdout.write(settings_toml(settings, [*header, f"backend {backend}"]))
        return
    out.print(
        f"train {cid}: model {folder} ({why}); {recipe.line()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    params = TrainParams(
        curriculum=cid,
        model=str(folder),
        home=str(home) if home is not None else None,
        settings=settings,
        backend=backend,
        base_urls=base_url or [],
        engine=engine,  # type: ignore[arg-type]
        max_steps=max_steps,
        resume=resume,
    )
    _print_train(_run_train_flow(params))


@app.command()
def schedule(
    cron: Annotated[str, typer.Option(help='Cron schedule, e.g. "0 2 * * *" (02:00 daily).')],
    config: Annotated[Path | None, typer.Option(help="CurateConfig TOML file.")] = None,
    train_config: Annotated[
        Path | None, typer.Option(help="TrainSettings TOML file (sieve train --config).")
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(help="Model folder; each night continues from the newest checkpoint of it."),
    ] = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    name: Annotated[str, typer.Option(help="Deployment name.")] = "nightly",
    home: HomeOpt = None,
) -> None:
    """Serve the nightly flow as a Prefect deployment on a cron schedule (blocks)."""
    import os

    from pipeline.selection import CurateConfig, load_curate_config

    if not os.environ.get("PREFECT_API_URL"):
        raise SieveError(
            "sieve schedule needs a Prefect server: run `prefect server start`, then "
            "export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=cron)
    except Exception as exc:
        raise SieveError(f"invalid --cron {cron!r}: {' '.join(str(exc).split())[:160]}") from exc
    from flows.nightly import NightlyParams, serve
    from pipeline.train import load_settings

    _check_backend(backend, base_url)
    cfg = load_curate_config(config) if config is not None else CurateConfig()
    settings = load_settings(train_config) if train_config is not None else None  # per model
    params = NightlyParams(
        model=str(model.resolve()) if model is not None else None,
        backend=backend,
        base_urls=base_url or [],
        home=str(Path(home).resolve()) if home is not None else None,
        config=cfg,
        train=settings,
    )
    out.print(f"serving deployment sieve-nightly/{name} on cron {cron!r}; Ctrl-C stops it")
    serve(cron, params, name)


curriculum_app = typer.Typer(help="Inspect curricula.", no_args_is_help=True)
app.add_typer(curriculum_app, name="curriculum")
app.add_typer(models_app, name="models")


@curriculum_app.command("show")
def curriculum_show(
    curriculum: Annotated[str, typer.Argument(help="Curriculum id or 'latest'.")] = "latest",
    limit: Annotated[int, typer.Option(help="Items to list.")] = 20,
    home: HomeOpt = None,
) -> None:
    """Stages, group sizes and the top items of a curriculum."""
    from pipeline.store import Ledger

    with Ledger.open(home, read_only=True) as ledger:
        cid = _resolve_curriculum(ledger, curriculum)
        _show(ledger.query("curriculum_stages", curriculum_id=cid), f"curriculum {cid}")
        _show(ledger.query("curriculum_rejections", curriculum_id=cid), "rejected by reason")
        _show(ledger.query("curriculum_items_top", curriculum_id=cid, limit=limit), "items")


def _resolve_curriculum(ledger: object, curriculum: str) -> str:
    from pipeline.export import resolve_curriculum
    from pipeline.store import Ledger

    assert isinstance(ledger, Ledger)
    return resolve_curriculum(ledger, curriculum)


@app.command()
def demo(
    bootstrap_steps: Annotated[
        int, typer.Option(help="Supervised steps when the tiny policy must be bootstrapped.")
    ] = 700,
    n: Annotated[int, typer.Option(help="Candidates to curate.")] = 1000,
    steps: Annotated[
        int | None, typer.Option(help="Training steps (default: the config's).")
    ] = None,
    home: HomeOpt = None,
) -> None:
    """The main job end to end: bootstrap if missing -> curate -> train -> eval -> summary."""
    import time

    from pipeline.demo import EXAMPLE_SQL, run_demo
    from pipeline.loop import DEMO_CURATE, DEMO_TRAIN
    from pipeline.loop import demo as run_loop_demo

    if n < 10 or bootstrap_steps < 1:
        raise SieveError("--n must be >= 10 and --bootstrap-steps >= 1")
    started = time.perf_counter()
    out.rule("Sieve demo")
    found = run_demo(home, n=2000, seed=0)
    c = found.check
    out.print(
        f"1. problems: {int(found.counts['problems'].sum())} in the ledger ({found.new_problems} "
        f"new); verifier self-check {c.own_correct}/{c.problems} own answers accepted, "
        f"{c.perturbed_rejected}/{c.problems} perturbed rejected"
    )
    if c.own_correct != c.problems or c.perturbed_rejected != c.problems:
        raise SieveError("verifier self-check failed: see the counts above")
    settings = DEMO_TRAIN.with_steps(steps)
    config = DEMO_CURATE.model_copy(update={"n_candidates": n})
    out.print("2. policy -> curate -> train -> eval (one night of the nightly flow)")
    _start_flows(home)
    run = run_loop_demo(home, bootstrap_steps, config, settings, say=out.print)
    if not run.table.is_empty():
        _show(run.table, "held-out pass@1 before -> after (mean over samples at T=1; greedy)")
    cur = run.night["curate"]
    train = run.night.get("train") or {}
    out.print(
        f"rollouts spent: curation {sum(cur['rollouts_spent'].values())}, "
        f"training {train.get('rollouts', 0)}; "
        f"wall time {(time.perf_counter() - started) / 60:.1f} min"
    )
    out.print(f"ledger: {found.ledger}")
    if run.report is not None:
        out.print(f"report: {run.report}")
    out.print("try (after `source .venv/bin/activate`):")
    for query in [*EXAMPLE_SQL, *LOOP_SQL]:
        out.print(f'  sieve sql "{query}"', markup=False, highlight=False, soft_wrap=True)


LOOP_SQL = [
    "SELECT stage, count(*), avg(group_size) FROM curriculum_items GROUP BY stage",
    "SELECT step, value FROM train_metrics WHERE name = 'pass_rate' ORDER BY step",
]


@app.command()
def loop(
    nights: Annotated[int, typer.Option(help="Nights to run back to back.")] = 2,
    config: Annotated[Path | None, typer.Option(help="CurateConfig TOML file.")] = None,
    train_config: Annotated[
        Path | None,
        typer.Option(help="TrainSettings TOML file; default the recipe for the model."),
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Candidates per night.")] = None,
    steps: Annotated[int | None, typer.Option(help="Training steps per night.")] = None,
    start: Annotated[
        str | None, typer.Option(help="First night, YYYY-MM-DD (default today, UTC).")
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            help="Model folder; each night continues from its newest checkpoint (default: the "
            "newest curriculum's model, the tiny policy on a fresh home)."
        ),
    ] = None,
    backend: BackendOpt = "hf",
    base_url: BaseUrlOpt = None,
    gpu_memory_utilization: GpuMemOpt = None,
    kv_cache_gib: KvCacheOpt = None,
    max_model_len: MaxModelLenOpt = None,
    dtype: DtypeOpt = "auto",
    tensor_parallel_size: TPOpt = 1,
    data_parallel_size: DPOpt = 1,
    home: HomeOpt = None,
) -> None:
    """N nights of curate -> train -> eval, each starting from the previous night's checkpoint."""
    from datetime import date

    from pipeline.loop import heldout_by_revision
    from pipeline.loop import loop as run_loop
    from pipeline.selection import CurateConfig, load_curate_config
    from pipeline.store import Ledger

    if nights < 1:
        raise SieveError(f"--nights must be >= 1, got {nights}")
    cfg = load_curate_config(config) if config is not None else CurateConfig()
    if n is not None:
        if n < 1:
            raise SieveError(f"--n must be >= 1, got {n}")
        cfg = cfg.model_copy(update={"n_candidates": n})
    try:
        first = date.fromisoformat(start) if start else None
    except ValueError:
        raise SieveError(f"--start {start!r} is not a YYYY-MM-DD date") from None
    _check_backend(backend, base_url)
    engine = _engine(
        gpu_memory_utilization,
        kv_cache_gib,
        max_model_len,
        dtype,
        tensor_parallel_size,
        data_parallel_size,
    )
    folder, why = _loop_start(model, backend, home)
    recipe, settings = _train_recipe(train_config, folder, steps)
    out.print(
        f"loop: night 1 starts from {folder} ({why}); {recipe.line()}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    _start_flows(home)
    run_loop(
        home,
        nights,
        cfg,
        settings,
        first,
        say=out.print,
        model=str(model) if model is not None else None,
        backend=backend,
        base_urls=base_url or [],
        engine=engine,  # type: ignore[arg-type]
    )
    with Ledger.open(home, read_only=True) as ledger:
        _show(heldout_by_revision(ledger), "held-out sampled pass@1 by revision (oldest first)")


def _loop_start(model: Path | None, backend: str, home: Path | None) -> tuple[Path, str]:
    """The model the first night starts from, and why; one error line when there is none."""
    from pipeline.home import ledger_path
    from pipeline.store import Ledger
    from pipeline.train import nightly_model

    local = backend != "openai"  # openai: --model may be a served name
    if model is not None and local and not (model / "config.json").is_file():
        raise SieveError(f"model folder {model} has no config.json")
    name = str(model) if model is not None else None
    if ledger_path(home).exists():
        with Ledger.open(home, read_only=True) as ledger:
            folder, why = nightly_model(ledger, name, home)
    else:
        folder, why = nightly_model(None, name, home)
    if local and not (folder / "config.json").is_file():
        raise SieveError(f"no model at {folder}: run `sieve bootstrap` first, or pass --model")
    return folder, why


@app.command()
def export(
    output: Annotated[Path, typer.Option(help="Directory to write the export into.")],
    curriculum: Annotated[str, typer.Option(help="Curriculum id or 'latest'.")] = "latest",
    format: Annotated[str, typer.Option("--format", help="trl, verl, openrlhf or jsonl.")] = "trl",
    prompt_format: Annotated[
        str, typer.Option(help="auto (the curated model's), raw or chat.")
    ] = "auto",
    input_key: Annotated[str, typer.Option(help="OpenRLHF --input_key field.")] = "input",
    label_key: Annotated[str, typer.Option(help="OpenRLHF --label_key field.")] = "label",
    home: HomeOpt = None,
) -> None:
    """Export a curriculum (with stages and group sizes) for TRL, verl or OpenRLHF."""
    from pipeline.export import check_format, export_curriculum
    from pipeline.store import Ledger

    check_format(format)
    if prompt_format not in ("auto", "raw", "chat"):
        raise SieveError(f"unknown --prompt-format {prompt_format!r}; valid: auto, raw, chat")
    chosen = None if prompt_format == "auto" else prompt_format
    with Ledger.open(home, read_only=True) as ledger:
        result = export_curriculum(
            ledger,
            curriculum,
            format,
            output,
            prompt_format=chosen,  # type: ignore[arg-type]
            input_key=input_key,
            label_key=label_key,
        )
    stages = ", ".join(f"stage {s}: {n}" for s, n in result.stages.items()) or "no items"
    out.print(
        f"exported {result.rows} prompts ({stages}; {result.prompt_format} prompts) "
        f"as {format} -> {result.path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def report(
    output: Annotated[
        Path | None, typer.Option(help="Directory for report.html (default <home>/report).")
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Write an HTML report: pass rates, difficulty, curricula, training, held-out results."""
    from pipeline.home import resolve_home
    from pipeline.report import build_report
    from pipeline.store import Ledger

    folder = output if output is not None else resolve_home(home) / "report"
    with Ledger.open(home, read_only=True) as ledger:
        result = build_report(ledger, folder)
    out.print(
        f"report: {result.path} ({len(result.figures)} figures)", markup=False, soft_wrap=True
    )
    if result.empty_sections:
        out.print("no data yet for: " + "; ".join(result.empty_sections), soft_wrap=True)


def main() -> None:
    """Entry point: run the app, turning a SieveError into one line and exit code 1."""
    try:
        app(standalone_mode=False)
    except SieveError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # click's usage errors and aborts (typer may vendor its own click)
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # usage error: one line
            message = " ".join(str(exc.format_message()).split())
            err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        if type(exc).__name__ == "Exit" and hasattr(exc, "exit_code"):
            sys.exit(exc.exit_code)
        full = _disk_full(exc)
        if full is None:
            raise
        err.print(
            f"error: disk full: {full}; free some space and re-run (what was committed is kept)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)


_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "storagefull")


def _disk_full(exc: BaseException) -> str | None:
    """One line naming what could not be written, when `exc` or an exception it was raised from
    (or while handling) is a full disk or quota (errno, or DuckDB's and safetensors' text)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cause = todo.pop()
        if cause is None or id(cause) in seen:
            continue
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            where = cause.filename or "a file"
            return f"cannot write {where} ({cause.strerror or 'no space left'})"
        text = " ".join(str(cause).split())
        if any(t in text.lower() for t in _FULL_TEXTS):
            return text[:300]
        todo += [cause.__cause__, cause.__context__, *getattr(cause, "exceptions", ())]
    return None


if __name__ == "__main__":
    main()
