"""Backtests of prompt-selection policies over samples already stored (`sieve backtest`).

Every policy is replayed on one pool: per prompt, its stored samples in draw order
(`sample_idx` 0, 1, ...) with reward and verdict. A policy that spends g samples on a prompt
reads that prompt's next g stored samples, so every policy sees the same answers, and no policy
samples anything: one that would need more samples of a prompt than the pool holds is refused
(`NotEnoughSamples`, naming how many it needs, for how many prompts, and how many are stored).

The policies (each an `Arm`: the rollouts it spent, its informative groups, the prompts it trains
on, and the report `benchmarks/real_model.py` writes):

- `uniform_arm`: a group of g on every prompt; trains on all of them;
- `dapo_arm`: DAPO's dynamic sampling (Yu et al. 2025): groups of g in a seeded random order,
  zero-variance groups dropped, until `batch` informative groups are kept;
- `greso_arm`: GRESO's pre-rollout skip (Zheng et al. 2025, "Act Only When It Pays"), over
  two epochs of g: prompts whose epoch-1 group had zero variance are skipped in epoch 2 unless
  a seeded draw falls under `explore`; epoch 2 trains on the informative groups it sampled.
  Departure: the paper adapts the exploration probability towards a target skip rate; here it
  is fixed;
- `speed_arm`: SPEED-RL's screen-then-continue (Zhang et al. 2025): `init` samples per prompt,
  prompts with 0 < k < init continued with `cont` more, trained on all init + cont;
- `pilot_arm`: pilot-then-commit: `pilot` samples per prompt, a fresh group of g committed to
  prompts whose pilot pass rate lies in the band; the pilot samples are not trained on;
- `posterior_arm`: select before rollout: a stream of steps, each picking `batch`
  prompts by `pipeline.selection.posterior.posterior_select` (the collector `sieve train` runs
  with `selection = "posterior"`) from a seeded candidate set of the pool, its posterior fed
  only by the groups it already trained on; a picked prompt's v-th group is its stored samples
  v·g .. v·g + g − 1, revealed only once picked. Every rollout it reads trains (none decides
  only). A prompt is picked at most ⌊depth / g⌋ times, depth the fewest samples any prompt of
  the pool holds, so how many samples a prompt has stored (on a ledger: more when the screen
  kept it) never decides what the policy may pick;
- `sieve_arm`: Sieve's two stages with a `CurateConfig`, as a curation samples them: screen
  (`screen_g`), `refine_g` more on the survivors, `screen_survivors` / `build_curriculum` select
  on the pooled screen_g + refine_g, and the kept prompts' training groups (`train_g`, default
  `stage1_g`) are judged on the samples after those, which selection never saw. A curated home
  holds nothing after them, so there it needs a smaller replay (e.g. refine_g lowered by
  train_g) or it is refused.

"Informative" is Sieve's one rule (`pipeline.selection.group_stats`, i.e.
`grpo_core.advantages.is_uninformative`). `backtest` puts the arms in one table: rollouts,
informative groups, rollouts per informative group, and the recall / precision of the prompts
each trains on against the prompts whose pass rate over all stored samples lies in the band.

Pools: `pool_samples` reads a Parquet file of completions (`benchmarks/results/
real_model_pool.parquet`; scored with Sieve's verifier when it has no `reward` column),
`ledger_samples` the screen and refine rollouts of one model revision of a ledger (or of
given runs). `backtest_curation` replays one curation on its own runs with its own config, Sieve
against uniform (what `sieve demo` leads its summary with).

Test: `.venv/bin/pytest tests/test_backtest.py tests/test_demo.py -q`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NoReturn

import polars as pl
from pydantic import ValidationError

from grpo_core.validate import MAX_SEED
from pipeline.core.errors import SieveError, check_range
from pipeline.core.tomlconfig import first_error
from pipeline.selection import (
    CurateConfig,
    build_curriculum,
    group_stats,
    screen_survivors,
    stable_uniforms,
)
from pipeline.selection.posterior import PosteriorConfig, SelectionConfig
from pipeline.store import Ledger

POLICIES = ("uniform", "dapo", "greso", "speed", "pilot", "posterior", "sieve")


class NotEnoughSamples(SieveError):
    """A policy would read more samples of some prompt than the pool stores."""


@dataclass(frozen=True)
class Arm:
    """One policy's replay: cost, signal, the prompts it trains on, and its full report."""

    rollouts: int
    informative_groups: int
    selected: pl.Series  # problem ids the policy trains on
    report: dict[str, Any]

    @property
    def per_informative(self) -> float | None:
        return self.rollouts / self.informative_groups if self.informative_groups else None


# ------------------------------------------------------------------ pools


def score(pool: pl.DataFrame, marker_required: bool = True) -> pl.DataFrame:
    """The pool with Sieve's verdicts (chat models: an answer must come from a marker)."""
    from pipeline.jobs.rollouts import cut_flags
    from pipeline.scoring import verify_batch

    verdicts = verify_batch(
        pool["completion"].to_list(),
        pool["answer"].to_list(),
        pool["verifier"].to_list(),
        marker_required=marker_required,
        truncated=cut_flags(pool),
    )
    return pool.with_columns(
        pl.Series("reward", [v.reward for v in verdicts], dtype=pl.Float64),
        pl.Series("correct", [v.correct for v in verdicts], dtype=pl.Boolean),
        pl.Series("reason", [v.reason for v in verdicts]),
    )


def pool_samples(path: Path, marker_required: bool = True) -> pl.DataFrame:
    """A Parquet pool of samples (problem_id, sample_idx, and reward + correct, or completion +
    answer + verifier to score them with)."""
    try:
        pool = pl.read_parquet(path)
    except (OSError, pl.exceptions.ComputeError) as exc:
        raise SieveError(f"cannot read pool {path}: {' '.join(str(exc).split())}") from None
    if pool.height == 0:  # every policy would replay nothing and the table say nothing
        raise SieveError(f"pool {path} holds no samples; a pool needs at least one prompt's")
    scored_already = {"reward", "correct"} <= set(pool.columns)
    need = ["problem_id", "sample_idx"] + (
        ["reward", "correct"] if scored_already else ["completion", "answer", "verifier"]
    )
    missing = [c for c in need if c not in pool.columns]
    if missing:
        raise SieveError(f"pool {path} lacks column(s) {', '.join(missing)}")
    _check_pool(pool, path, need)
    if not scored_already:
        return score(pool, marker_required)
    return pool.with_columns(pl.col("correct").cast(pl.Boolean))  # 0 / 1 as false / true


# raises the pool's one error line: (column, problem, the rows that have it)
Refuse = Callable[[str, str, "pl.Series | None"], NoReturn]


def _check_pool(pool: pl.DataFrame, path: Path, columns: list[str]) -> None:
    """One SieveError line naming the column and the first row a pool cannot be replayed with:
    a missing value, a `sample_idx` that is not a whole number >= 0, a (problem_id, sample_idx)
    stored twice (it would be counted twice), a prompt whose `sample_idx` skips a number (draw
    order runs 0, 1, 2, ...: a policy reading samples 0..g-1 would get fewer than g), a reward
    that is not a finite number (NaN has no variance to judge), a `correct` that is not true /
    false (0 / 1 is taken; the text "false" would count as true), a completion, answer or
    verifier that is not text, a verifier that does not exist, a `code` answer that is not a
    test spec (every verdict on it would be a verifier error)."""
    from pipeline.scoring import VERIFIERS

    def refuse(column: str, problem: str, bad: pl.Series | None = None) -> NoReturn:
        row = f" (row {int(bad.arg_true()[0])})" if bad is not None else ""
        raise SieveError(f"pool {path}: {column} {problem}{row}")

    for column in columns:
        if pool[column].null_count():
            refuse(column, "has a missing value", pool[column].is_null())
    index = pool["sample_idx"]
    if not index.dtype.is_integer():
        refuse("sample_idx", f"must be whole numbers, not {index.dtype}")
    low = int(index.min()) if pool.height else 0  # type: ignore[arg-type]
    if low < 0:
        refuse("sample_idx", f"must be >= 0, got {low}", index < 0)
    twice = pool.select("problem_id", "sample_idx").is_duplicated()
    if twice.any():
        pid, idx = pool.filter(twice).select("problem_id", "sample_idx").row(0)
        refuse("sample_idx", f"{idx} of prompt {pid!r} is stored more than once", twice)
    spans = pool.group_by("problem_id").agg(n=pl.len(), top=pl.col("sample_idx").max())
    gaps = spans.filter(pl.col("top") != pl.col("n") - 1).sort("problem_id")
    if gaps.height:
        pid = gaps["problem_id"][0]
        held = set(pool.filter(pl.col("problem_id") == pid)["sample_idx"].to_list())
        hole = min(i for i in range(len(held) + 1) if i not in held)
        refuse(
            "sample_idx",
            f"of prompt {pid!r} skips {hole} ({gaps.height} prompt(s) with gaps); each prompt's "
            "samples must be numbered 0, 1, 2, ... in draw order",
        )
    if "reward" in columns:
        _check_rewards(pool["reward"], refuse)
        _check_verdicts(pool["correct"], refuse)
    for column in ("completion", "answer", "verifier"):
        if column in columns and pool[column].dtype != pl.String:
            refuse(column, f"must be text, not {pool[column].dtype}")
    if "verifier" in columns:
        unknown = ~pool["verifier"].is_in(list(VERIFIERS))
        if unknown.any():
            name = pool["verifier"].filter(unknown)[0]
            valid = ", ".join(sorted(VERIFIERS))
            refuse("verifier", f"{name!r} is not a verifier (valid: {valid})", unknown)
        _check_code_answers(pool, refuse)


def _check_rewards(reward: pl.Series, refuse: Refuse) -> None:
    """`reward` must be finite numbers."""
    if not reward.dtype.is_numeric():
        refuse("reward", f"must be numbers, not {reward.dtype}", None)
    values = reward.cast(pl.Float64)
    bad = values.is_nan() | values.is_infinite()
    if bad.any():
        refuse("reward", f"must be a finite number, got {values.filter(bad)[0]}", bad)


def _check_verdicts(correct: pl.Series, refuse: Refuse) -> None:
    """`correct` must be booleans, or whole numbers 0 / 1."""
    if correct.dtype == pl.Boolean:
        return
    if not correct.dtype.is_integer():
        refuse("correct", f"must be true/false (booleans), not {correct.dtype}", None)
    bad = ~correct.is_in([0, 1])
    if bad.any():
        refuse("correct", f"must be true/false or 0/1, got {correct.filter(bad)[0]}", bad)


def _check_code_answers(pool: pl.DataFrame, refuse: Refuse) -> None:
    """Each distinct answer of a `code` row must be a test spec (`decode_spec`)."""
    from pipeline.scoring.code import decode_spec

    code = pool["verifier"] == "code"
    for answer in pool.filter(code)["answer"].unique(maintain_order=True):
        try:
            decode_spec(answer)
        except ValueError as exc:
            bad = code & (pool["answer"] == answer)
            pid = pool.filter(bad)["problem_id"][0]
            problem = f"{answer!r} of prompt {pid!r} is not a code test spec ({exc})"
            refuse("answer", problem, bad)


def ledger_samples(
    ledger: Ledger, revision: str | None = None, runs: Sequence[str] = ()
) -> tuple[pl.DataFrame, str]:
    """(samples, revision): the screen and refine rollouts of `revision` (default: that of the
    newest screen run), renumbered per problem in draw order; `runs`: only those runs."""
    if revision is None:
        newest = ledger.query("backtest_revision")
        if newest.is_empty():
            raise SieveError("the ledger holds no screen runs to backtest (run sieve curate)")
        revision = str(newest["model_revision"][0])
    samples = ledger.query("backtest_samples", revision=revision, runs=list(runs))
    if samples.is_empty():
        raise SieveError(f"the ledger holds no screen or refine rollouts of revision {revision}")
    return samples, revision


# ------------------------------------------------------------------ groups over a pool


def groups(scored: pl.DataFrame, samples: range) -> pl.DataFrame:
    """Sieve's group statistics over the given sample indices of every prompt."""
    rows = scored.filter(pl.col("sample_idx").is_in(list(samples)))
    return group_stats(rows.select("problem_id", "reward", "correct"))


def informative_share(stats: pl.DataFrame) -> float:
    return float(_informative(stats).mean()) if stats.height else 0.0  # type: ignore[arg-type]


def informative(stats: pl.DataFrame) -> int:
    return int(_informative(stats).sum())


def _informative(stats: pl.DataFrame) -> pl.Series:
    """Per group, whether it is informative; a group of verifier errors only (no scored sample,
    so no variance: `zero_variance` null) is not."""
    return ~stats["zero_variance"].fill_null(True)


def require(scored: pl.DataFrame, prompts: pl.Series, n: int, policy: str) -> None:
    """Refuse `policy` when one of `prompts` has fewer than `n` stored samples."""
    if prompts.is_empty():
        return
    stored = scored.group_by("problem_id").agg(pl.len().alias("stored"))
    wanted = pl.DataFrame({"problem_id": prompts.unique()}).join(stored, "problem_id", "left")
    short = wanted.filter(pl.col("stored").fill_null(0) < n)
    if short.height:
        fewest = int(short["stored"].fill_null(0).min())  # type: ignore[arg-type]
        raise NotEnoughSamples(
            f"{policy} needs {n} samples of {wanted.height} prompts; {short.height} of them "
            f"have fewer stored (fewest {fewest}): lower its group sizes or sample more"
        )


def ids(stats: pl.DataFrame) -> pl.Series:
    return stats["problem_id"]


def all_prompts(scored: pl.DataFrame) -> pl.Series:
    return scored["problem_id"].unique().sort()


# ------------------------------------------------------------------ the policies


def uniform_arm(scored: pl.DataFrame, g: int) -> Arm:
    """A group of g on every prompt."""
    require(scored, all_prompts(scored), g, f"uniform (g={g})")
    stats = groups(scored, range(g))
    share = informative_share(stats)
    report = {
        "group_size": g,
        "rollouts": stats.height * g,
        "informative_groups": informative(stats),
        "informative_share": share,
        "rollouts_per_informative_group": g / share if share else None,
    }
    return Arm(stats.height * g, informative(stats), ids(stats), report)


def dapo_arm(scored: pl.DataFrame, g: int, batch: int, seed: int) -> Arm:
    """Dynamic sampling: draw groups in a seeded random order until `batch` informative ones."""
    prompts = all_prompts(scored)
    order = list(range(prompts.len()))
    random.Random(seed).shuffle(order)
    drawn_ids = prompts.gather(order)
    require(scored, drawn_ids, g, f"dapo (g={g})")  # before knowing where it stops: all of them
    stats = groups(scored, range(g)).sort("problem_id")
    flags = (~stats["zero_variance"].fill_null(True)).gather(order)  # (P,) in draw order
    filled = flags.cum_sum() >= batch
    drawn = int(filled.arg_true()[0]) + 1 if filled.any() else len(order)
    taken = flags.head(drawn)
    kept = int(taken.sum())
    report = {
        "group_size": g,
        "batch": batch,
        "groups_drawn": drawn,
        "informative_groups": kept,
        "batch_filled": kept == batch,
        "rollouts": drawn * g,
        "informative_share_of_batch": 1.0 if kept else 0.0,
        "informative_share_of_drawn": kept / drawn if drawn else 0.0,
        "rollouts_per_informative_group": drawn * g / kept if kept else None,
    }
    return Arm(drawn * g, kept, drawn_ids.head(drawn).filter(taken), report)


def greso_arm(scored: pl.DataFrame, g: int, explore: float, seed: int) -> Arm:
    """Two epochs of g; epoch 2 skips epoch-1 zero-variance prompts unless explored."""
    require(scored, all_prompts(scored), g, f"greso (g={g})")
    first = groups(scored, range(g))
    draw = stable_uniforms(seed, ids(first), "greso")
    keep = ~first["zero_variance"].fill_null(True) | (draw < explore)
    again = ids(first).filter(keep)
    require(scored, again, 2 * g, f"greso (g={g}, 2 epochs)")
    second = groups(scored.filter(pl.col("problem_id").is_in(again.implode())), range(g, 2 * g))
    rollouts = (first.height + second.height) * g
    found = informative(first) + informative(second)
    trained = second.filter(~pl.col("zero_variance").fill_null(True))
    report = {
        "group_size": g,
        "explore": explore,
        "epoch2_sampled": second.height,
        "epoch2_skipped": first.height - second.height,
        "rollouts": rollouts,
        "informative_groups": found,
    }
    return Arm(rollouts, found, ids(trained), report)


def speed_arm(scored: pl.DataFrame, init: int, cont: int) -> Arm:
    """Screen with `init`, continue 0 < k < init prompts with `cont` more, train on all."""
    require(scored, all_prompts(scored), init, f"speed (init={init})")
    screen = groups(scored, range(init))
    mixed = screen.filter((pl.col("k") > 0) & (pl.col("k") < pl.col("n")))
    require(scored, ids(mixed), init + cont, f"speed (init={init}, cont={cont})")
    full = groups(
        scored.filter(pl.col("problem_id").is_in(ids(mixed).implode())), range(init + cont)
    )
    rollouts = screen.height * init + mixed.height * cont
    report = {"init": init, "cont": cont, "continued": mixed.height, "rollouts": rollouts}
    return Arm(rollouts, informative(full), ids(mixed), report)


def pilot_arm(scored: pl.DataFrame, pilot: int, g: int, band: tuple[float, float]) -> Arm:
    """A pilot of `pilot`, then a fresh group of g where the pilot's pass rate is in the band."""
    require(scored, all_prompts(scored), pilot, f"pilot (pilot={pilot})")
    trial = groups(scored, range(pilot))
    committed = ids(trial.filter(pl.col("pass_rate").is_between(*band)))
    require(scored, committed, pilot + g, f"pilot (pilot={pilot}, g={g})")
    fresh = groups(
        scored.filter(pl.col("problem_id").is_in(committed.implode())), range(pilot, pilot + g)
    )
    rollouts = trial.height * pilot + fresh.height * g
    report = {"pilot": pilot, "group_size": g, "committed": fresh.height, "rollouts": rollouts}
    return Arm(rollouts, informative(fresh), committed, report)


def cells(scored: pl.DataFrame) -> dict[str, str]:
    """Each prompt's cell, as the difficulty model pools it: a `cell` column, else
    `family level` (the ledger's cells), else one cell for the whole pool."""
    if "cell" in scored.columns:
        cell = pl.col("cell").cast(pl.String)
    elif {"family", "level"} <= set(scored.columns):
        cell = pl.concat_str([pl.col("family").cast(pl.String), pl.col("level").cast(pl.String)],
                             separator=" ")  # fmt: skip
    else:
        cell = pl.lit("")
    per = scored.group_by("problem_id").agg(cell.fill_null("").first().alias("cell"))
    return dict(zip(per["problem_id"].to_list(), per["cell"].to_list(), strict=True))


class StoredGroups:
    """The trainer's side of a collector (`grpo_core.types.Rollouts`), answered from a pool: a
    prompt's v-th `sample_and_score` reads its stored samples v·g .. v·g + g − 1 (in draw
    order), and only then (`read` records every group handed out, in order). Candidates are a
    seeded sample of the prompts with a group left, so a collector sees a prompt's samples only
    once it picks it."""

    def __init__(self, scored: pl.DataFrame, g: int, visits: int, seed: int) -> None:
        self.g, self.seed = g, seed
        # a prompt's stored samples in draw order, by position (sample_idx may skip a number)
        rows = scored.sort("problem_id", "sample_idx").with_columns(
            position=pl.int_range(pl.len()).over("problem_id")
        )
        rows = rows.filter(pl.col("position") < visits * g)
        self.samples: dict[tuple[str, int], list[tuple[float | None, bool | None]]] = {}
        for pid, at, reward, correct in rows.select(
            "problem_id", "position", "reward", "correct"
        ).iter_rows():
            self.samples.setdefault((pid, int(at) // g), []).append((reward, correct))
        self.visits = visits
        self.left = {str(p): visits for p in all_prompts(scored).to_list()}
        self.read: list[tuple[str, int]] = []

    def open(self) -> list[str]:
        return sorted(p for p, n in self.left.items() if n)

    def candidates(self, step: int, want: int) -> list[Any]:
        from grpo_core.seeds import derive_seed
        from grpo_core.types import Item

        pool = self.open()
        drawn = random.Random(derive_seed(self.seed, "candidates", step)).sample(
            pool, min(want, len(pool))
        )
        return [Item(prompt=p, answer="", group_size=self.g, key=p) for p in sorted(drawn)]

    def sample_and_score(self, items: Sequence[Any], seed: int, sizes: Any = None) -> Any:
        from grpo_core.types import Sample, Scores

        groups, rewards, correct = [], [], []
        for it in items:
            if not self.left.get(it.key):
                raise NotEnoughSamples(f"posterior picked {it.key} with no stored group left")
            visit = self.visits - self.left[it.key]
            self.left[it.key] -= 1
            self.read.append((it.key, visit))
            part = self.samples[(it.key, visit)]
            groups.append([Sample((), "", False) for _ in part])
            rewards += [r for r, _ in part]
            correct += [c for _, c in part]
        return groups, Scores(rewards, correct), 0.0, 0.0

    def step_seed(self, step: int, round_: int = 0) -> int:
        from grpo_core.seeds import derive_seed

        return derive_seed(self.seed, "step", step, round_)


def posterior_arm(
    scored: pl.DataFrame,
    g: int,
    batch: int,
    seed: int,
    steps: int = 0,
    cfg: PosteriorConfig | None = None,
    select: SelectionConfig | None = None,
) -> Arm:
    """Select before rollout: `steps` steps of `posterior_select` over `StoredGroups`, stopping
    early when fewer than `batch` prompts have a group left (0: as many as train half the
    groups the pool holds, at least one: with two groups a prompt, as many groups as uniform's
    one pass, so what it picks is not the whole pool). Every rollout read trains; nothing
    decides only. `select`: the difficulty model and score (default the static model, Thompson
    draws: `SelectionConfig()`)."""
    from typing import cast

    from grpo_core.types import Rollouts
    from pipeline.selection.posterior import Observations, posterior_select

    cfg = cfg or PosteriorConfig()
    prompts = all_prompts(scored)
    require(scored, prompts, g, f"posterior (g={g})")
    if prompts.len() < batch:
        raise NotEnoughSamples(
            f"posterior needs a batch of {batch} prompts; the pool holds {prompts.len()}"
        )
    depth = int(scored.group_by("problem_id").len()["len"].min())  # type: ignore[arg-type]
    visits = depth // g
    steps = steps or max(1, prompts.len() * visits // (2 * batch))
    stored = StoredGroups(scored, g, visits, seed)
    obs = Observations()
    collect = posterior_select(
        lambda step, _round: stored.candidates(step, cfg.candidates * batch),
        cells(scored), obs, batch, seed, cfg, select=select or SelectionConfig(),
    )  # fmt: skip
    rollouts, predicted, ran = 0, [], 0
    for step in range(steps):
        if len(stored.open()) < batch:
            break
        got = collect(cast(Rollouts, stored), step)
        rollouts += got.rollouts
        predicted.append(got.metrics["predicted_informative"])
        ran += 1
    read = pl.DataFrame(
        [(f"{p}#{v}", r, c) for p, v in stored.read for r, c in stored.samples[(p, v)]],
        schema={"problem_id": pl.String, "reward": pl.Float64, "correct": pl.Boolean},
        orient="row",
    )
    trained = group_stats(read)  # one row per group trained (prompt#visit)
    found = informative(trained)
    report = {
        "group_size": g,
        "batch": batch,
        "steps": ran,
        "steps_asked": steps,
        "candidates_per_step": cfg.candidates * batch,
        "visits_per_prompt": visits,
        "groups_trained": trained.height,
        "rollouts": rollouts,
        "rollouts_deciding": 0,
        "informative_groups": found,
        "informative_share": found / trained.height if trained.height else 0.0,
        "predicted_informative_share": sum(predicted) / len(predicted) if predicted else None,
        "rollouts_per_informative_group": rollouts / found if found else None,
        "trained_groups": [list(x) for x in stored.read],  # (problem_id, visit), in order
    }
    selected = pl.Series("problem_id", sorted({p for p, _ in stored.read}), dtype=pl.String)
    return Arm(rollouts, found, selected, report)


def sieve_arm(scored: pl.DataFrame, cfg: CurateConfig, train_g: int | None = None) -> Arm:
    """Screen → refine → Sieve's selection → training groups on samples selection never saw."""
    train_g = train_g or cfg.stage1_g
    pooled = cfg.screen_g + cfg.refine_g  # the refine pass adds refine_g, as in a curation
    screen_range, pooled_range, fresh_range = (
        range(cfg.screen_g),
        range(pooled),
        range(pooled, pooled + train_g),
    )
    require(scored, all_prompts(scored), cfg.screen_g, f"sieve (screen_g={cfg.screen_g})")
    screen = groups(scored, screen_range)
    screened = screen_survivors(screen, cfg)
    survivors = screened.refine["problem_id"]
    require(scored, survivors, pooled, f"sieve (refine_g={cfg.refine_g})")
    refined = scored.filter(pl.col("problem_id").is_in(survivors.implode()))
    items, _ = build_curriculum(groups(refined, pooled_range), screened.all_correct, cfg)
    main = items.filter(pl.col("reason") != "replay")
    kept = main["problem_id"]
    require(scored, kept, fresh_range.stop, f"sieve (training groups of {train_g})")
    fresh = groups(scored.filter(pl.col("problem_id").is_in(kept.implode())), fresh_range)
    share = informative_share(fresh)
    curation = screen.height * cfg.screen_g + survivors.len() * cfg.refine_g
    training = fresh.height * train_g
    uniform = uniform_arm(scored, train_g).report["rollouts_per_informative_group"]
    report = {
        "screen_group_size": cfg.screen_g,
        "refine_added": cfg.refine_g,
        "screened": screen.height,
        "refined": int(survivors.len()),
        "kept": int(kept.len()),
        "kept_by_stage": {str(s): int(n) for s, n in main.group_by("stage").len().iter_rows()},
        "replay": int(items.height - main.height),
        "curation_rollouts": curation,
        "training_group_size": train_g,
        "training_rollouts_one_epoch": training,
        "informative_share": share,
        "rollouts_per_informative_group_training": train_g / share if share else None,
        "rollouts_per_informative_group_with_curation": (
            (curation + training) / (share * fresh.height) if share and fresh.height else None
        ),
        # epochs over the kept prompts after which curation + training has cost less per
        # informative group than uniform groups of train_g: C / (K (share * c_uniform - G))
        f"epochs_to_break_even_vs_uniform_g{train_g}": (
            curation / (fresh.height * (share * uniform - train_g))
            if share and uniform and share * uniform > train_g
            else None
        ),
    }
    return Arm(curation + training, informative(fresh), kept, report)


# ------------------------------------------------------------------ one curation, replayed


@dataclass(frozen=True)
class CurationBacktest:
    """What one curation bought, on its own stored samples: Sieve's selection with the
    curation's config replayed on its screen and refine samples (`sieve_arm`: selected on
    `selected_on` samples a prompt, training groups of `group_size` judged on the refine samples
    after those), against uniform groups of `group_size` on every candidate (`uniform_arm`)."""

    curriculum_id: str
    revision: str
    candidates: int
    group_size: int
    selected_on: int
    sieve: Arm
    uniform: Arm


def replay_group_size(cfg: CurateConfig) -> int:
    """The training group size a curation can be replayed with on its own samples: stage 1's,
    at most half the refine samples (the rest, with the screen's, are what selection reads)."""
    return max(1, min(cfg.stage1_g, cfg.refine_g // 2))


def backtest_curation(ledger: Ledger, curriculum_id: str) -> CurationBacktest:
    """The curation that wrote `curriculum_id`, replayed on its own screen and refine rollouts
    with its own config (read from the ledger), its refine lowered by `replay_group_size` so
    the kept prompts' training groups are samples selection never saw. `NotEnoughSamples` when
    its samples cannot hold that; a SieveError when the ledger has no such curriculum."""
    from pipeline.store.ids import curation_runs

    row = ledger.sql(
        "SELECT model_revision, config FROM curricula WHERE curriculum_id = $c",
        {"c": curriculum_id},
    )
    if row.is_empty():
        raise SieveError(f"the ledger holds no curriculum {curriculum_id}")
    revision, config = str(row["model_revision"][0]), str(row["config"][0])
    cfg = CurateConfig.model_validate_json(config)
    samples, _ = ledger_samples(ledger, revision, curation_runs(curriculum_id))
    g = replay_group_size(cfg)
    # selection on screen_g + refine_g - g samples: a replay, so no config validation (refine_g
    # may drop below screen_g; the selection rules read neither)
    replayed = cfg.model_copy(update={"refine_g": cfg.refine_g - g})
    return CurationBacktest(
        curriculum_id=curriculum_id,
        revision=revision,
        candidates=samples["problem_id"].n_unique(),
        group_size=g,
        selected_on=cfg.screen_g + replayed.refine_g,
        sieve=sieve_arm(samples, replayed, g),
        uniform=uniform_arm(samples, g),
    )


# ------------------------------------------------------------------ policies by name, the table

DEFAULTS: dict[str, dict[str, int | float]] = {
    "uniform": {"g": 8},
    "dapo": {"g": 8, "batch": 32, "seed": 0},
    "greso": {"g": 4, "explore": 0.25, "seed": 0},
    "speed": {"init": 4, "cont": 4},
    "pilot": {"pilot": 4, "g": 8},
    # steps 0: as many as train half the groups the pool holds; the rest: PosteriorConfig's
    "posterior": {"g": 8, "batch": 8, "steps": 0, "seed": 0}
    | {f.name: getattr(PosteriorConfig(), f.name) for f in fields(PosteriorConfig)},
    "sieve": {},  # CurateConfig fields, and train_g (default stage1_g)
}


@dataclass(frozen=True)
class Spec:
    """A policy by name with its parameters: `dapo`, `dapo:g=4,batch=16`, `sieve:screen_g=4`."""

    name: str
    params: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> Spec:
        name, _, rest = text.strip().partition(":")
        if name not in POLICIES:
            raise SieveError(f"unknown policy {name!r}; valid: {', '.join(POLICIES)}")
        params = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise SieveError(f"policy {text!r}: write parameters as key=value, comma-separated")
            params[key.strip()] = value.strip()
        return cls(name, params)


def _numbers(spec: Spec) -> dict[str, Any]:
    """The policy's parameters over its defaults, each converted to its default's type."""
    defaults = DEFAULTS[spec.name]
    unknown = sorted(set(spec.params) - set(defaults))
    if unknown:
        valid = ", ".join(defaults)
        raise SieveError(f"policy {spec.name} has no parameter {unknown[0]!r}; valid: {valid}")
    out: dict[str, Any] = dict(defaults)
    for key, value in spec.params.items():
        try:
            out[key] = type(defaults[key])(value)
        except ValueError:
            raise SieveError(f"policy {spec.name}: {key}={value!r} is not a number") from None
    if any(v <= 0 for k, v in out.items() if k not in ("seed", "explore")):
        raise SieveError(f"policy {spec.name}: group sizes and batch must be positive")
    if not 0.0 <= out.get("explore", 0.0) <= 1.0:
        raise SieveError(f"policy {spec.name}: explore is a probability, in [0, 1]")
    check_range(f"policy {spec.name}: seed", out.get("seed"), 0, MAX_SEED)  # as every --seed
    return out


def _sieve_config(spec: Spec, cfg: CurateConfig) -> tuple[CurateConfig, int | None]:
    params = dict(spec.params)
    train_g = params.pop("train_g", None)
    try:
        # policy parameters are command-line text ("refine_g=16"): read as numbers here
        merged = CurateConfig.model_validate({**cfg.model_dump(), **params}, strict=False)
    except ValidationError as exc:
        raise SieveError(f"policy sieve: {first_error(exc)}") from None
    if train_g is not None and not (train_g.isdigit() and int(train_g) > 0):
        raise SieveError(f"policy sieve: train_g={train_g!r} is not a positive whole number")
    return merged, int(train_g) if train_g is not None else None


def _posterior_params(spec: Spec) -> tuple[dict[str, int], PosteriorConfig]:
    """(g, batch, steps, seed; the difficulty model's config) of a `posterior:...` spec."""
    defaults = DEFAULTS["posterior"]
    unknown = sorted(set(spec.params) - set(defaults))
    if unknown:
        valid = ", ".join(defaults)
        raise SieveError(f"policy posterior has no parameter {unknown[0]!r}; valid: {valid}")
    out: dict[str, Any] = dict(defaults)
    for key, value in spec.params.items():
        try:
            out[key] = type(defaults[key])(value)
        except ValueError:
            raise SieveError(f"policy posterior: {key}={value!r} is not a number") from None
    if min(out["g"], out["batch"]) < 1 or out["steps"] < 0:
        raise SieveError("policy posterior: g and batch must be positive, steps >= 0")
    model = {k: v for k, v in out.items() if k not in ("g", "batch", "steps", "seed")}
    try:
        cfg = PosteriorConfig(**model)
    except (ValueError, TypeError) as exc:
        raise SieveError(f"policy posterior: {exc}") from None
    return {k: int(out[k]) for k in ("g", "batch", "steps", "seed")}, cfg


def run_policy(scored: pl.DataFrame, spec: Spec, cfg: CurateConfig) -> tuple[str, Arm]:
    """(label, arm) of one policy on the pool; `NotEnoughSamples` when the pool is too small."""
    band = (cfg.band_low, cfg.band_high)
    if spec.name == "sieve":
        sieve_cfg, train_g = _sieve_config(spec, cfg)
        arm = sieve_arm(scored, sieve_cfg, train_g)
        g = arm.report["training_group_size"]
        return f"sieve screen_g={sieve_cfg.screen_g} refine_g={sieve_cfg.refine_g} train_g={g}", arm
    if spec.name == "posterior":
        p, model = _posterior_params(spec)
        arm = posterior_arm(scored, p["g"], p["batch"], p["seed"], p["steps"], model)
        steps = arm.report["steps"]
        return f"posterior g={p['g']} batch={p['batch']} steps={steps}", arm
    p = _numbers(spec)
    label = " ".join([spec.name] + [f"{k}={v}" for k, v in p.items() if k != "seed"])
    if spec.name == "uniform":
        return label, uniform_arm(scored, p["g"])
    if spec.name == "dapo":
        return label, dapo_arm(scored, p["g"], p["batch"], p["seed"])
    if spec.name == "greso":
        return label, greso_arm(scored, p["g"], p["explore"], p["seed"])
    if spec.name == "speed":
        return label, speed_arm(scored, p["init"], p["cont"])
    return label, pilot_arm(scored, p["pilot"], p["g"], band)


def in_band(scored: pl.DataFrame, band: tuple[float, float]) -> pl.Series:
    """Prompts whose pass rate over every stored sample lies in [low, high]."""
    stats = group_stats(scored.select("problem_id", "reward", "correct"))
    return ids(stats.filter(pl.col("pass_rate").is_between(*band)))


TABLE_SCHEMA = {
    "policy": pl.Utf8,
    "rollouts": pl.Int64,
    "informative_groups": pl.Int64,
    "rollouts_per_informative_group": pl.Float64,
    "trained_prompts": pl.Int64,
    "in_band_trained": pl.Int64,
    "recall": pl.Float64,
    "precision": pl.Float64,
    "note": pl.Utf8,
}


def backtest(
    scored: pl.DataFrame, specs: list[Spec], cfg: CurateConfig, strict: bool = False
) -> pl.DataFrame:
    """One row per policy (`TABLE_SCHEMA`). A policy the pool is too small for raises under
    `strict`, else gets a row with only its `note`. Recall / precision: of the prompts each
    trains on, against the in-band prompts (`in_band`, the config's band)."""
    band = set(in_band(scored, (cfg.band_low, cfg.band_high)).to_list())
    rows: list[dict[str, Any]] = []
    for spec in specs:
        try:
            label, arm = run_policy(scored, spec, cfg)
        except NotEnoughSamples as exc:
            if strict:
                raise
            rows.append({"policy": spec.name, "note": f"refused: {exc}"})
            continue
        trained = set(arm.selected.to_list())
        hits = len(trained & band)
        rows.append(
            {
                "policy": label,
                "rollouts": arm.rollouts,
                "informative_groups": arm.informative_groups,
                "rollouts_per_informative_group": arm.per_informative,
                "trained_prompts": len(trained),
                "in_band_trained": hits,
                "recall": hits / len(band) if band else None,
                "precision": hits / len(trained) if trained else None,
                "note": "",
            }
        )
    return pl.DataFrame(rows, schema=TABLE_SCHEMA)


def plot(table: pl.DataFrame, path: Path, title: str, *, ledger: Path | None = None) -> None:
    """Rollouts per informative group, and recall / precision on the band, per policy, as a PNG
    written by the one guarded writer (`pipeline.core.outputs`: `-` is stdout, never the ledger)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = table.filter(pl.col("note") == "")
    names = [n.replace(" ", "\n") for n in done["policy"]]  # one parameter a line
    x = list(range(done.height))
    fig, (left, right) = plt.subplots(1, 2, figsize=(max(10.0, 2.0 * done.height), 5.2))
    cost = done["rollouts_per_informative_group"].fill_null(0).to_list()
    left.bar(x, cost, color="tab:blue")
    for i, c in enumerate(cost):
        left.text(i, c, f"{c:.1f}", ha="center", va="bottom", fontsize=8)
    left.set_xticks(x, names, fontsize=7)
    left.set_ylabel("rollouts per informative group")
    right.bar([i - 0.2 for i in x], done["recall"].fill_null(0), 0.4, label="recall")
    right.bar([i + 0.2 for i in x], done["precision"].fill_null(0), 0.4, label="precision")
    right.set_xticks(x, names, fontsize=7)
    right.set_ylim(0, 1)
    right.set_ylabel("of the in-band prompts (pass rate over all samples)")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    from pipeline.core.outputs import write_output

    try:
        write_output(path, lambda handle: fig.savefig(handle, dpi=120, format="png"), "wb",
                     ledger=ledger, label="--png ")  # fmt: skip
    finally:
        plt.close(fig)


@dataclass(frozen=True)
class BacktestRun:
    """`sieve backtest`'s result: the table (one row per policy), where the samples came from,
    how many prompts and samples, the config's band, and the figure written (or None)."""

    table: pl.DataFrame
    source: str
    prompts: int
    samples: int
    band: str
    png: Path | None = None


def run_backtest(
    home: str | Path | None,
    policies: Sequence[str] | None = None,
    *,
    pool: Path | None = None,
    revision: str | None = None,
    config: Path | None = None,
    raw_answers: bool = False,
    png: Path | None = None,
) -> BacktestRun:
    """`sieve backtest`: `policies` (`Spec.parse`'s NAME[:key=value,...]; None: each of
    `POLICIES` with its defaults, a policy short of samples a row saying so) replayed over the
    samples of `pool` (a Parquet file, scored if needed) or of the ledger of `home` (`revision`,
    default the newest screen run's), with the config file `config` (else the defaults); the
    figure written to `png`, which is checked before any work (a PNG file, never the ledger)."""
    from pipeline.core.home import ledger_path
    from pipeline.core.outputs import check_output
    from pipeline.selection import CurateConfig, load_curate_config

    if png is not None:
        if str(png) == "-":
            raise SieveError("--png -: stdout carries the table; give a file for the figure")
        if png.suffix and png.suffix.lower() != ".png":
            raise SieveError(f"--png {png}: the figure is a PNG; give a file name ending in .png")
        check_output(png, ledger=ledger_path(home), label="--png ")
    cfg = load_curate_config(config) if config else CurateConfig()
    specs = [Spec.parse(p) for p in policies] if policies else [Spec(n, {}) for n in POLICIES]
    if pool is not None:
        samples, source = pool_samples(pool, marker_required=not raw_answers), str(pool)
    else:
        with Ledger.open(home, read_only=True) as ledger:
            samples, rev = ledger_samples(ledger, revision)
        source = f"ledger revision {rev}"
    table = backtest(samples, specs, cfg, strict=bool(policies))
    band = f"band [{cfg.band_low}, {cfg.band_high}]"
    prompts = samples["problem_id"].n_unique()
    if png is not None:
        title = f"{source}: {prompts} prompts, {samples.height} samples, {band}"
        plot(table, png, title, ledger=ledger_path(home))
    return BacktestRun(table, source, prompts, samples.height, band, png)
