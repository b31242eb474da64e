"""The steps of one curation: candidates -> history prior -> screen (small G) -> refine (large G)
-> curriculum.

Everything here is a plain function over the ledger and a sampler; the sequence itself is written
once, in `flows/curate.py` (`curate_flow`, and `curate` for a call without a Prefect run).
Identifiers are derived from the inputs (config, model revision), and
sampling is done in chunks of prompts sorted by id, each chunk seeded from (seed, run, chunk)
and committed with its rollouts in one transaction. So a re-run after a crash skips the
committed chunks and redraws the missing ones exactly, and a re-run of a finished curation adds
nothing. A run's rollouts are all judged by one verifier version, the one its row records: a
run crashed under an older version is not resumed under a newer one (`check_resume`; the way
out is `sieve rescore RUN` for its stored verdicts, a new curation for fresh ones), while a
finished one re-run stays a no-op. A chunk's tables include its verifier audit
(`pipeline.jobs.curate.audit`: math-verify's second opinion on a seeded sample of the verdicts and
on every guessed one), which observes and never decides: its knobs stay out of the curation key.

Test: `pytest tests/test_curate.py tests/test_curate_crash.py`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from grpo_core.seeds import derive_seed
from pipeline.core.crash import crash_point
from pipeline.core.errors import SieveError
from pipeline.core.home import to_home
from pipeline.core.hooks import Progress, report
from pipeline.core.timing import timed
from pipeline.jobs.curate.audit import AUDITED_PURPOSES, audit_rows
from pipeline.jobs.curate.rollouts import RunInfo, run_row, score_groups
from pipeline.problems import generate_cells, generate_mix, mix_cells
from pipeline.sampling.base import Sampler
from pipeline.scoring import VERIFIER_VERSION
from pipeline.selection import (
    CurateConfig,
    allocate_candidates,
    group_stats,
    history_prior,
    prefilter,
)
from pipeline.selection.evidence import lineage_observations
from pipeline.selection.posterior import PosteriorConfig, cell_posterior, prompt_posterior
from pipeline.selection.rules import concat_rejections
from pipeline.store import Ledger

if TYPE_CHECKING:
    from pipeline.sampling import EngineOptions


@dataclass(frozen=True)
class Policy:
    """What is being curated for: the sampler, its revision and how prompts are rendered.

    `prompt_format` (raw | chat) decides the default answer budget (`SamplingConfig.budget`) and
    whether the verifier insists on an answer marker (chat models are asked for `\\boxed{}`).
    """

    sampler: Sampler
    model_revision: str
    render: Callable[[Sequence[str]], list[str]]
    prompt_format: str = "raw"

    @property
    def marker_required(self) -> bool:
        return self.prompt_format == "chat"


@dataclass
class CurateResult:
    curriculum_id: str
    screen_run: str
    refine_run: str
    candidates: int
    items: pl.DataFrame
    rejections: pl.DataFrame
    rollouts: dict[str, int] = field(default_factory=dict)  # run purpose -> rollouts stored
    screen_histogram: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # one line each (the verifier audit's)


# switches added later: a config at the default keeps the key (and ids) it had before them
_ADDED_DEFAULTS: dict[str, Any] = {
    "process_signal": False,
    "screen": "all",
    "known_cell_samples": 32.0,
    "ingested": [],
}
# Fields that observe a curation without deciding it (the verifier audit): never in the key.
_NOT_OUTCOME = ("audit_share", "audit_warn")


def as_decided(cfg: CurateConfig) -> CurateConfig:
    """`cfg` with its sampling temperature written in, as the curriculum records it and its key
    hashes it (an unset temperature and the trainer's default decide alike, so keys from before
    the temperature could be unset stay the same)."""
    return cfg.model_copy(update={"sampling": cfg.sampling.resolved()})


def curation_key(cfg: CurateConfig, model_revision: str) -> str:
    """A short hash of everything that decides the curation's outcome (`as_decided`)."""
    dump = as_decided(cfg).model_dump(mode="json")
    for name, default in _ADDED_DEFAULTS.items():
        if dump.get(name, default) == default:
            dump.pop(name, None)
    for name in _NOT_OUTCOME:
        dump.pop(name, None)
    payload = json.dumps({"cfg": dump, "rev": model_revision}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def load_history(ledger: Ledger, exclude: Sequence[str]) -> pl.DataFrame:
    """The ledger's sampled history per problem × revision, without the runs in `exclude` (the
    curation being computed, so a re-run decides exactly as the first run did). One read serves
    both the candidate allocation and the history prior."""
    return ledger.query("history_prior", exclude=list(exclude))


def solved_counts(history: pl.DataFrame, rejected: pl.DataFrame) -> pl.DataFrame:
    """(problem_id, n, k): the training counts (the newest history row) of the prompts the
    prior took out as `solved_in_training`, read from the history the prior itself used."""
    solved = rejected.filter(pl.col("reason") == "solved_in_training")["problem_id"]
    mine = history.filter(pl.col("problem_id").is_in(solved.implode()))
    newest = mine.sort("last_seen", "model_revision").group_by("problem_id").last()
    return newest.select("problem_id", "n", "k")


def replay_pool(
    all_correct: pl.DataFrame, rejected: pl.DataFrame, solved: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """(replay candidates, the prior's rejections without them, their ids): the screen's
    all-correct prompts plus the ones the prior took out as `solved_in_training` (`solved`:
    their `solved_counts`), so the policy's solved prompts are replayed instead of screened
    again."""
    if solved.is_empty():
        return all_correct, rejected, solved["problem_id"]
    pool = pl.concat([all_correct, solved], how="diagonal_relaxed")
    rest = rejected.filter(pl.col("reason") != "solved_in_training")
    return pool, rest, solved["problem_id"]


def split_known_cells(
    ledger: Ledger, kept: pl.DataFrame, cfg: CurateConfig, revision: str, runs: Sequence[str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`screen = "unknown"`: (the candidates to screen, the posteriors of those that go by their
    cell's prior: problem_id, alpha, beta, mean). A candidate goes by the prior when its cell's
    evidence in the lineage of `revision` (`lineage_observations`, weighted as the difficulty
    model weighs it, without this curation's own `runs`, so a re-run decides as the first did)
    reaches `known_cell_samples`; "all" screens every candidate."""
    empty = pl.DataFrame(
        schema={"problem_id": pl.String, "alpha": pl.Float64, "beta": pl.Float64,
                "mean": pl.Float64}
    )  # fmt: skip
    if cfg.screen == "all" or kept.is_empty():
        return kept, empty
    pcfg = PosteriorConfig()
    obs, now = lineage_observations(ledger, revision, exclude=runs)
    _, cells = cell_posterior(obs, pcfg, now)
    known = cells.filter(pl.col("wn") >= cfg.known_cell_samples)["cell"]
    cell = pl.concat_str(pl.col("family"), pl.lit(" "), pl.col("level").cast(pl.String))
    tagged = kept.with_columns(cell.alias("cell"))
    by_prior = tagged.filter(pl.col("cell").is_in(known.implode()))
    to_screen = tagged.filter(~pl.col("cell").is_in(known.implode())).drop("cell")
    post = prompt_posterior(obs, by_prior.select("problem_id", "cell"), pcfg, now)
    return to_screen, post.select("problem_id", "alpha", "beta", "mean")


def allocation(cfg: CurateConfig, history: pl.DataFrame) -> pl.DataFrame | None:
    """Candidates per family × level from the history (None: the even spread)."""
    if not cfg.allocate_by_history or cfg.ingested:
        return None
    return allocate_candidates(mix_cells(cfg.mix_levels()), history, cfg.n_candidates, cfg)


def ingested_candidates(ledger: Ledger, cfg: CurateConfig) -> pl.DataFrame:
    """Up to `n_candidates` train-split problems of the ingested families `cfg.ingested`, from
    the ledger (already stored), drawn by `cfg.seed`; one SieveError line when it holds none."""
    frame = ledger.sql(
        "SELECT * FROM problems WHERE list_contains($families, family) AND split = 'train' "
        "ORDER BY problem_id",
        {"families": list(cfg.ingested)},
    )
    if frame.is_empty():
        raise SieveError(
            f"the ledger holds no train-split problem of {', '.join(cfg.ingested)}: "
            "`sieve ingest FILE --family NAME` first (`sieve sql` lists the families)"
        )
    if frame.height > cfg.n_candidates:
        frame = frame.sample(n=cfg.n_candidates, seed=cfg.seed, shuffle=True)
    return frame.sort("problem_id")


def candidates(ledger: Ledger, cfg: CurateConfig, history: pl.DataFrame) -> pl.DataFrame:
    """Generate and store the candidates: spread by `allocation`, or evenly over the mix; with
    `cfg.ingested`, the ingested problems instead (`ingested_candidates`, stored already)."""
    if cfg.ingested:
        return ingested_candidates(ledger, cfg)
    cells = allocation(cfg, history)
    if cells is None:
        frame = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    else:
        counts = cells.select("family", "level", "candidates").rows()
        frame = generate_cells(counts, cfg.seed)
    ledger.write("problems", frame)
    return frame


def prior(
    cands: pl.DataFrame, cfg: CurateConfig, history: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Prefilter (held-out, duplicates) then the history prior; returns (kept, rejections)."""
    kept, pre_rejected = prefilter(cands, cfg)
    kept, skipped = history_prior(kept, history, cfg)
    return kept, concat_rejections([pre_rejected, skipped])


def chunk_seed(seed: int, run_id: str, index: int) -> int:
    """The sampling seed of one chunk: a function of (seed, run, chunk) only, so a re-run redraws
    a missing chunk exactly."""
    return derive_seed(seed, run_id, index)


def chunks(problems: pl.DataFrame, cfg: CurateConfig) -> list[pl.DataFrame]:
    """Problems sorted by id, cut into fixed-size chunks (the unit of commit and resume)."""
    ordered = problems.sort("problem_id")
    return [ordered.slice(s, cfg.chunk_size) for s in range(0, ordered.height, cfg.chunk_size)]


def pending_chunks(ledger: Ledger, info: RunInfo, parts: list[pl.DataFrame]) -> list[int]:
    """Indices of chunks whose rollouts are not all in the ledger for this run (the ledger is
    the only record of what is done: a cached task result or a run's status is not)."""
    done = ledger.query("done_problems", run_id=info.run_id, group_size=info.group_size)
    stored = set(done["problem_id"])
    return [i for i, c in enumerate(parts) if not set(c["problem_id"]) <= stored]


def chunk_stored(ledger: Ledger, info: RunInfo, chunk: pl.DataFrame) -> bool:
    """True when every problem of the chunk has its G rollouts in the ledger for this run."""
    return not pending_chunks(ledger, info, [chunk])


def sample_rows(
    policy: Policy,
    chunk: pl.DataFrame,
    info: RunInfo,
    seed: int,
    index: int,
    audit_share: float | None = None,
) -> dict[str, pl.DataFrame]:
    """Sample and score one chunk: its tables (rollouts, step verdicts and, for a screen or
    refine run given an `audit_share`, the verifier audit), not yet written.
    `sample_chunk` commits them; a cluster worker writes them as a shard
    (`pipeline.jobs.curate.shards`)."""
    params = replace(info.params, seed=chunk_seed(seed, info.run_id, index))
    prompts = policy.render(chunk["question"].to_list())
    with timed("sampling"):
        groups = policy.sampler.sample(prompts, info.group_size, params)
    with timed("scoring"):
        scored = score_groups(info.run_id, chunk, groups, marker_required=policy.marker_required)
    tables = scored.tables()
    if audit_share is not None and info.purpose in AUDITED_PURPOSES:
        with timed("audit"):
            tables["verifier_audit"] = audit_rows(chunk, scored, seed, audit_share)
    return tables


def sample_chunk(
    ledger: Ledger,
    policy: Policy,
    chunk: pl.DataFrame,
    info: RunInfo,
    seed: int,
    index: int,
    audit_share: float | None = None,
) -> int:
    """Sample, score and commit one chunk (one transaction); returns rollouts written."""
    rows = sample_rows(policy, chunk, info, seed, index, audit_share)
    crash_point(f"curate.{info.purpose}.before_chunk_commit")
    with timed("ledger_writes"):  # rollouts, step verdicts and the audit, one transaction
        written = ledger.write_batch(rows)["rollouts"]
    crash_point(f"curate.{info.purpose}.after_chunk_commit")
    return written


def set_status(ledger: Ledger, info: RunInfo, status: str) -> None:
    """Write the run's row with `status` (and this Sieve's verifier version: `check_resume`
    first, whenever the run may hold rollouts)."""
    ledger.write("sampling_runs", run_row(info, datetime.now(UTC), status), on_conflict="replace")


def check_resume(ledger: Ledger, info: RunInfo) -> None:
    """Refuse to add chunks to a run whose stored rollouts another verifier version judged: the
    run would mix two versions' verdicts, and its row would name only the newer one."""
    found = ledger.query("resume_check", run_id=info.run_id)
    if found.height == 0 or not found["has_rollouts"][0]:
        return
    stored = found["verifier_version"][0]
    if stored == VERIFIER_VERSION:
        return
    raise SieveError(
        f"run {info.run_id} holds rollouts judged by verifier {stored or '(unrecorded)'}, and "
        f"this Sieve judges with {VERIFIER_VERSION}: resuming it would mix the two versions' "
        f"verdicts in one run, so it is not resumed; re-judge its stored verdicts with "
        f"`sieve rescore {info.run_id}`, or sample afresh with a new curation (e.g. another "
        "--seed)"
    )


def start_run(ledger: Ledger, info: RunInfo) -> None:
    """Before a run's pending chunks are sampled: `check_resume`, then mark it running."""
    check_resume(ledger, info)
    set_status(ledger, info, "running")


def sample_run(
    ledger: Ledger,
    policy: Policy,
    problems: pl.DataFrame,
    info: RunInfo,
    cfg: CurateConfig,
    progress: Progress | None = None,
    run_chunk: Callable[[pl.DataFrame, int], object] | None = None,
) -> int:
    """Sample and store G completions per problem in committed chunks; skip stored chunks.

    `run_chunk(chunk, index)` samples and commits one chunk (default: `sample_chunk`; the
    Prefect flow passes its cached task). Returns the number of rollouts the run holds (all
    chunks, also those of an earlier try).
    """
    parts = chunks(problems, cfg)
    todo = pending_chunks(ledger, info, parts)
    if not todo and is_finished(ledger, info.run_id):
        return problems.height * info.group_size  # a finished re-run adds nothing
    if run_chunk is None:

        def run_chunk(chunk: pl.DataFrame, index: int) -> int:
            return sample_chunk(ledger, policy, chunk, info, cfg.seed, index, cfg.audit_share)

    start_run(ledger, info)
    for done, index in enumerate(todo, start=1):
        run_chunk(parts[index], index)
        if not chunk_stored(ledger, info, parts[index]):  # never mark a run done on trust
            raise SieveError(
                f"chunk {index} of run {info.run_id} reported done, but its rollouts are not "
                f"in the ledger {ledger.path or '(in memory)'}"
            )
        report(progress, "curate", info.purpose, done, len(todo))
    set_status(ledger, info, "finished")
    return problems.height * info.group_size


def is_finished(ledger: Ledger, run_id: str) -> bool:
    rows = ledger.run("SELECT status FROM sampling_runs WHERE run_id = $r", {"r": run_id})
    return bool(rows) and rows[0][0] == "finished"


def run_info(policy: Policy, purpose: str, g: int, key: str, cfg: CurateConfig) -> RunInfo:
    """The run row of one sampling stage; its params carry the resolved decoding budget (each
    chunk replaces the seed with its own)."""
    sampler = policy.sampler
    return RunInfo(
        purpose,
        sampler.model_name,
        policy.model_revision,
        sampler.backend,
        g,
        cfg.sampling.params(policy.prompt_format),
        run_id=f"{purpose}-{key}",
        prompt_format=policy.prompt_format,
    )


def run_stats(ledger: Ledger, runs: list[str]) -> pl.DataFrame:
    """Per-problem counts pooled over the given runs (Polars twin of the views)."""
    with timed("stats"):
        rollouts = ledger.query("run_rollouts", runs=runs)
        return group_stats(rollouts.drop("run_id"))


def histogram(stats: pl.DataFrame, bins: int = 10) -> list[int]:
    rates = stats.filter(pl.col("n") > 0)["pass_rate"]
    index = (rates * bins).floor().clip(0, bins - 1).cast(pl.Int64)
    counts = index.value_counts()
    found = dict(zip(counts[counts.columns[0]], counts["count"], strict=True))
    return [int(found.get(i, 0)) for i in range(bins)]


def write_curriculum(
    ledger: Ledger,
    curriculum_id: str,
    policy: Policy,
    cfg: CurateConfig,
    items: pl.DataFrame,
    rejections: pl.DataFrame,
) -> None:
    """The curriculum row, its items and its rejections, in one transaction."""
    head = pl.DataFrame(
        {
            "curriculum_id": [curriculum_id],
            "created_at": [datetime.now(UTC)],
            "model": [_model_name(policy.sampler.model_name, ledger)],
            "model_revision": [policy.model_revision],
            "config": [as_decided(cfg).model_dump_json()],
            "status": ["finished"],
        }
    )
    tag = pl.lit(curriculum_id).alias("curriculum_id")
    crash_point("curate.before_curriculum_commit")
    ledger.write_batch(
        {
            "curricula": head,
            "curriculum_items": items.with_columns(tag),
            "rejections": rejections.with_columns(tag),
        }
    )


def empty_curriculum_note(ledger: Ledger, curriculum_id: str) -> str:
    """The warning for a curriculum that kept no prompt: it is recorded, but `latest` names
    the newest curriculum with items (`pipeline.store.ids.latest_curriculum`), so a
    `sieve train` after it does not train on nothing."""
    from pipeline.store.ids import latest_curriculum

    latest = latest_curriculum(ledger)
    still = f"still {latest}" if latest is not None else "there is none yet"
    return (
        f"curriculum {curriculum_id} kept no prompt, so it is not `latest` ({still}); no "
        "group disagreed enough (see the rejections): curate at a higher temperature, or on "
        "other levels"
    )


def _model_name(name: str, ledger: Ledger) -> str:
    """`curricula.model`: a local folder inside the ledger's home relative to it (the home may
    be moved or copied), another folder absolute, a served model's name as it is."""
    return to_home(name, ledger.home) if Path(name).is_dir() else name


def model_identity(model: str | Path) -> str:
    """The revision a model is recorded under: the content hash of a local folder's weights and
    config (`folder_revision`, the same value training and evaluation record), or, for a name
    only a server knows (openai backend), `served:<name>`. A folder's `sieve.json` is checked
    here too (`read_meta`), before any engine loads its weights."""
    from pipeline.policy.model import folder_revision, read_meta

    folder = Path(model)
    if (folder / "config.json").is_file():
        read_meta(folder)
        return folder_revision(folder)
    return f"served:{model}"


@dataclass(frozen=True)
class SamplesElsewhere:
    """The flow process's sampler when its chunks sample on cluster workers (runner dask /
    ray): it names the model for the run rows as the real sampler would (`str(folder)`, every
    backend's `model_name`) and holds no weights, so it refuses to sample."""

    backend: str
    model_name: str

    def sample(self, prompts: Sequence[str], n: int, params: Any) -> list[list[Any]]:
        raise SieveError(
            f"{self.model_name} is not loaded in the flow process: under runner dask / ray "
            "its workers sample"
        )


def policy_for(
    model: str | Path,
    backend: str = "hf",
    base_urls: Sequence[str] = (),
    engine: EngineOptions | None = None,
    *,
    load: bool = True,
    sampler: Any = None,
) -> Policy:
    """A `Policy` for a model folder: its sampler, its revision and its prompt format.
    `load=False`: the revision and prompt format only (`SamplesElsewhere`), for a process that
    commits what cluster workers sample. `sampler`: an engine already started on the folder
    (the nightly flow's, which training then reuses) instead of a new one."""
    from transformers import AutoTokenizer

    from pipeline.policy.prompts import prompt_format, render
    from pipeline.sampling import make_sampler

    folder = Path(model)
    if folder.is_dir():  # recorded absolute (curricula.model): `sieve train` may run elsewhere
        folder = folder.resolve()
    revision = model_identity(folder)  # before the engine starts: a bad folder fails fast
    if sampler is None:
        sampler = (
            make_sampler(backend, folder, base_urls=base_urls, engine=engine)
            if load
            else SamplesElsewhere(backend, str(folder))
        )
    tokenizer = getattr(sampler, "tokenizer", None)
    if tokenizer is None and (folder / "tokenizer_config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    fmt = prompt_format(folder, tokenizer) if tokenizer is not None else "raw"
    return Policy(sampler, revision, lambda qs: render(qs, fmt, tokenizer), fmt)


def rollouts_spent(ledger: Ledger, runs: list[str]) -> dict[str, int]:
    """Rollouts stored per run purpose (what the curation cost)."""
    frame = ledger.query("rollouts_by_purpose", runs=runs)
    return {p: int(n) for p, n in frame.iter_rows()}


def summarise(
    curriculum_id: str,
    items: pl.DataFrame,
    rejections: pl.DataFrame,
    screen_histogram: list[int],
    spent: dict[str, int],
) -> dict[str, Any]:
    """Kept per stage, rejected by reason, screen pass-rate histogram, rollouts spent."""
    kept = items.group_by("stage").agg(pl.len(), pl.col("group_size").sum().alias("rollouts"))
    reasons = rejections.group_by("reason").len()
    return {
        "curriculum_id": curriculum_id,
        "kept": {f"stage{s}": int(n) for s, n, _ in kept.sort("stage").iter_rows()},
        "replay": int(items.filter(pl.col("reason") == "replay").height),
        "rejected": {r: int(n) for r, n in reasons.sort("reason").iter_rows()},
        "screen_pass_rate_histogram": screen_histogram,
        "rollouts_spent": spent,
    }
