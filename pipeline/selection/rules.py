"""Selection rules: pure, deterministic functions over Polars frames (no ledger, no sampling).

Each rule returns what it keeps and a `rejections` frame (problem_id, reason) with a stable reason
from `REASONS`; a row is never dropped silently. Randomness comes only from
`stable_uniform(seed, problem_id, salt)` (sha256), so a decision depends on the prompt, never on
row order or on how the work was chunked — crash-resume reproduces the uninterrupted run. Outputs
are sorted by problem_id.

- `prefilter`: held-out problems → `heldout`; identical question text → `duplicate`.
- `history_prior`: prompts zero-variance in every recent revision → `skipped_by_history` with
  probability `history_skip_prob`, else re-explored (docs/architecture.md, curation step 2);
  prompts whose newest training group was all correct → `solved_in_training`, not screened
  again (replay candidates of the curriculum, `pipeline.jobs.curate.curation.replay_pool`).
- `allocate_candidates`: candidates per family × level cell from how often each cell's groups
  were informative for recent revisions (an explored share stays even).
- `screen_survivors`: small-G screen → refine the informative groups (reward spread
  max − min > tol, `grpo_core.advantages.is_uninformative`, the trainer's rule) / `verifier_error`;
  an uninformative group is labelled from its verdicts: `all_correct` (replay candidates),
  `all_wrong` (except a stable `uncertain_hard_share`, still refined), or `zero_variance` when its
  verdicts differ but its rewards do not; with `process_signal`, an uninformative prompt whose
  step verdicts vary is refined as `process_informative` instead.
- `group_size_for`: smallest G with 1 − p^G − (1 − p)^G ≥ target (docs/architecture.md,
  curation step 7).

Test: `.venv/bin/pytest tests/selection/test_rules.py -q`.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import polars as pl

from pipeline.core.errors import SieveError
from pipeline.selection.config import CurateConfig
from pipeline.selection.stats import SPREAD_COLUMNS, require_columns, reward_informative

REASONS = (
    "all_correct", "all_wrong", "zero_variance", "out_of_band", "verifier_error",
    "duplicate", "heldout", "skipped_by_history", "solved_in_training",
)  # fmt: skip
REJECTION_SCHEMA: dict[str, pl.DataType] = {"problem_id": pl.Utf8(), "reason": pl.Utf8()}
_MANTISSA = 52  # bits of the hash used: every value is an exact float in [0, 1)


def stable_uniform(seed: int, problem_id: str, salt: str) -> float:
    """A uniform number in [0, 1) fixed by (seed, problem_id, salt) — same on every machine."""
    digest = hashlib.sha256(f"{seed}\x1f{problem_id}\x1f{salt}".encode()).hexdigest()
    return int(digest[: _MANTISSA // 4], 16) / float(1 << _MANTISSA)


def stable_uniforms(seed: int, ids: pl.Series, salt: str) -> pl.Series:
    """`stable_uniform` for every id of a Series (Float64, same length and order)."""
    values = [stable_uniform(seed, pid, salt) for pid in ids.to_list()]
    return pl.Series(ids.name, values, dtype=pl.Float64)


def rejections(problem_ids: pl.Series, reason: str) -> pl.DataFrame:
    """A rejections frame giving every id the same reason."""
    if reason not in REASONS:
        raise ValueError(f"unknown rejection reason {reason!r}")
    frame = pl.DataFrame({"problem_id": problem_ids.cast(pl.Utf8)})
    return frame.with_columns(pl.lit(reason, pl.Utf8).alias("reason"))


def concat_rejections(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Rejection frames stacked and sorted by problem_id (an empty list gives an empty frame)."""
    columns = list(REJECTION_SCHEMA)
    frames = [pl.DataFrame(schema=REJECTION_SCHEMA), *(p.select(columns) for p in parts)]
    return pl.concat(frames).sort("problem_id")


# -- prefilter ---------------------------------------------------------------------------------
def prefilter(candidates: pl.DataFrame, cfg: CurateConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Drop held-out problems (`heldout`) and repeated question texts (`duplicate`).

    Rows repeating a problem_id are one problem (the id hashes its content): they collapse to one
    row, with no rejection, since that problem is kept or rejected as a whole. Among rows with the
    same question text the representative is a held-out one if any (so a train copy of a held-out
    question cannot leak), else the smallest problem_id — "first" in an order that does not depend
    on row order. The others are `duplicate`; a held-out representative is `heldout`.
    """
    del cfg  # no knobs yet; taken for a uniform signature
    require_columns(candidates, ("problem_id", "question", "split"), "candidates frame")
    unique = candidates.sort("problem_id").unique("problem_id", keep="first", maintain_order=True)
    ranked = unique.with_columns(
        (pl.col("split") == "heldout").alias("_heldout"),
    ).sort(["question", "_heldout", "problem_id"], descending=[False, True, False])
    first = pl.int_range(pl.len()).over("question") == 0
    ranked = ranked.with_columns(first.alias("_first"))
    dup = ranked.filter(~pl.col("_first"))["problem_id"]
    held = ranked.filter(pl.col("_first") & pl.col("_heldout"))["problem_id"]
    kept = ranked.filter(pl.col("_first") & ~pl.col("_heldout")).drop("_heldout", "_first")
    out = concat_rejections([rejections(dup, "duplicate"), rejections(held, "heldout")])
    return kept.sort("problem_id"), out


# -- history prior -----------------------------------------------------------------------------
def recent_revisions(history: pl.DataFrame, count: int) -> list[str]:
    """The `count` revisions seen last (by max last_seen; ties by revision name)."""
    last = history.group_by("model_revision").agg(pl.col("last_seen").max())
    ordered = last.sort(["last_seen", "model_revision"], descending=True, nulls_last=True)
    return ordered["model_revision"].head(count).to_list()


def history_prior(
    candidates: pl.DataFrame, history: pl.DataFrame, cfg: CurateConfig
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Skip prompts that recent revisions found zero-variance, except a re-explored share.

    `history`: `history_prior` rows (problem_id, model_revision, n, zero_variance, last_seen,
    and optionally solved_in_training). Only the `history_revisions` most recent revisions
    count, and only rows with n > 0. A prompt whose newest such row says the policy solved it
    in training (its last training group all correct) is not screened (`solved_in_training`,
    every time: it is a replay candidate, not a prompt to learn). A prompt zero-variance in
    every row where it was seen is skipped (`skipped_by_history`) when stable_uniform(seed, id,
    "history") < history_skip_prob; the others go on to the screen.

    A row's `zero_variance` (query `history_prior`): with training evidence of that revision, it
    means every training group of the prompt was flat by the one rule (all wrong, all right, or
    equal rewards: no group ever gave a gradient), so a prompt solved in every training sample
    is zero-variance like one never solved, and so is one all right at one step and all wrong at
    another, although its pooled samples disagree (per group, as the trainer
    and GRESO's streaks see it, not pooled); without, the curation runs' pooled rewards decide.
    """
    require_columns(candidates, ("problem_id",), "candidates frame")
    cols = ("problem_id", "model_revision", "n", "zero_variance", "last_seen")
    require_columns(history, cols, "history frame")
    recent = recent_revisions(history, cfg.history_revisions)
    seen = history.filter(pl.col("model_revision").is_in(recent) & (pl.col("n") > 0))
    stale = seen.group_by("problem_id").agg(pl.col("zero_variance").fill_null(True).all())
    stale_ids = stale.filter(pl.col("zero_variance"))["problem_id"]
    ids = candidates["problem_id"]
    solved = ids.is_in(solved_in_training(seen).implode())
    u = stable_uniforms(cfg.seed, ids, "history")
    skip = ~solved & ids.is_in(stale_ids.implode()) & (u < cfg.history_skip_prob)
    kept = candidates.filter(~skip & ~solved).sort("problem_id")
    return kept, concat_rejections(
        [
            rejections(ids.filter(solved), "solved_in_training"),
            rejections(ids.filter(skip), "skipped_by_history"),
        ]
    )


def solved_in_training(seen: pl.DataFrame) -> pl.Series:
    """Ids whose newest history row (by last_seen) says the policy solved them in training."""
    if "solved_in_training" not in seen.columns or seen.is_empty():
        return pl.Series("problem_id", [], pl.Utf8)
    newest = (
        seen.sort("last_seen", "model_revision", nulls_last=False)
        .group_by("problem_id", maintain_order=True)
        .last()
    )
    return newest.filter(pl.col("solved_in_training").fill_null(False))["problem_id"]


# -- candidate allocation ----------------------------------------------------------------------
# Weight, in pseudo-problems, of the mix-wide informative share in a cell's estimate: a cell
# seen a few times is pulled toward the mix's average, a cell seen often speaks for itself.
CELL_PRIOR_STRENGTH = 2.0
CELL_HISTORY_COLUMNS = ("family", "level", "model_revision", "n", "zero_variance", "last_seen")


def largest_remainder(exact: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to `n` from real shares `exact` (which sum to `n`): floors, then
    one more for the largest remainders (a stable sort keeps cell order among equal ones)."""
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")[: n - int(counts.sum())]
    counts[order] += 1
    return counts


def allocate_candidates(
    cells: list[tuple[str, int, float]], history: pl.DataFrame, n: int, cfg: CurateConfig
) -> pl.DataFrame | None:
    """How many of the `n` candidates each (family, level) cell gets, from the ledger's history.

    `cells`: (family, level, even share) as `pipeline.problems.mix_cells` gives them.
    `history`: the `history_prior` rows (one per problem × revision: family, level,
    model_revision, n, zero_variance, last_seen) — the same frame the history prior reads.
    Over the `history_revisions` most recent revisions, a cell's informative yield is the share
    of its sampled problems (n > 0) whose group disagreed, shrunk toward the mix-wide share
    (empirical Bayes, `CELL_PRIOR_STRENGTH` pseudo-problems); an unseen cell gets the mix-wide
    share. The weight of a cell is its even share times
    `explore_share + (1 - explore_share) * yield / mean yield`, so equal yields give the even
    spread, and counts are rounded by largest remainder (ties in cell order). Returns None
    (generate evenly) when no cell of the mix has history. Columns: family, level, seen,
    informative, yield, candidates.
    """
    require_columns(history, CELL_HISTORY_COLUMNS, "history frame")
    mix = pl.DataFrame(
        [(f, lv, share, i) for i, (f, lv, share) in enumerate(cells)],
        schema={"family": pl.Utf8, "level": pl.Int64, "share": pl.Float64, "order": pl.Int64},
        orient="row",
    )
    recent = recent_revisions(history, cfg.history_revisions) if history.height else []
    seen = (
        history.filter(pl.col("model_revision").is_in(recent) & (pl.col("n") > 0))
        .with_columns(pl.col("level").cast(pl.Int64))
        .group_by("family", "level")
        .agg(
            pl.len().alias("seen"),
            (~pl.col("zero_variance").fill_null(True)).sum().alias("informative"),
        )
    )
    table = mix.join(seen, on=["family", "level"], how="left").with_columns(
        pl.col("seen").fill_null(0), pl.col("informative").fill_null(0)
    )
    if (total_seen := int(table["seen"].sum())) == 0:
        return None
    base = (float(table["informative"].sum()) + 1.0) / (total_seen + 2.0)
    k = CELL_PRIOR_STRENGTH
    table = table.with_columns(
        ((pl.col("informative") + k * base) / (pl.col("seen") + k)).alias("yield")
    )
    mean_yield, e = float((table["share"] * table["yield"]).sum()), cfg.explore_share
    weight = table["share"] * (e + (1.0 - e) * table["yield"] / mean_yield)
    counts = largest_remainder((weight / weight.sum() * n).to_numpy(), n)
    return (
        table.with_columns(pl.Series("candidates", counts))
        .sort("order")
        .select("family", "level", "seen", "informative", "yield", "candidates")
    )


# -- screen ------------------------------------------------------------------------------------
class Screened(NamedTuple):
    """What the screen decides: prompts to refine, all-correct replay candidates, rejections."""

    refine: pl.DataFrame  # problem_id, n, k, n_errors, reward_min, reward_max, reason: mixed |
    # uncertain_hard | process_informative
    all_correct: pl.DataFrame  # the same columns but reason: replay candidates, not yet rejected
    rejections: pl.DataFrame  # problem_id, reason: verifier_error | all_wrong | zero_variance


def pool_counts(stats: pl.DataFrame) -> pl.DataFrame:
    """(problem_id, n, k, n_errors, reward_min, reward_max) pooled per problem over runs (counts
    summed, the spread of all the rewards), sorted by problem_id; with `process_informative` too
    when the stats have it (true if it is in any run)."""
    require_columns(stats, ("problem_id", "n", "k", "n_errors", *SPREAD_COLUMNS), "group stats")
    counts = [pl.col(c).cast(pl.Int64).sum() for c in ("n", "k", "n_errors")]
    counts += [
        pl.col("reward_min").cast(pl.Float64).min(),
        pl.col("reward_max").cast(pl.Float64).max(),
    ]
    if "process_informative" in stats.columns:
        counts.append(pl.col("process_informative").fill_null(False).any())
    return stats.group_by("problem_id").agg(counts).sort("problem_id")


def process_flag(stats: pl.DataFrame, cfg: CurateConfig) -> pl.Expr:
    """`process_informative` as an expression when `cfg.process_signal` is on, else false.

    On, the stats must carry the column (`group_stats` of rollouts with `step_correct`)."""
    if not cfg.process_signal:
        return pl.lit(False)
    require_columns(stats, ("process_informative",), "group stats frame (process_signal)")
    return pl.col("process_informative").fill_null(False)


def screen_survivors(screen_stats: pl.DataFrame, cfg: CurateConfig) -> Screened:
    """Sort screened prompts by their small-G group (rows of several runs are pooled).

    `screen_stats` needs problem_id, n, k, n_errors, reward_min, reward_max (`group_stats`).
    error share n_errors/(n + n_errors) > max_error_share, or no scored sample → verifier_error;
    informative (the trainer's rule on the rewards: max − min > tol) → refine ("mixed"); else,
    with `process_signal`, steps that vary → refine ("process_informative"); else by the
    verdicts: k = n → all_correct (replay candidates); k = 0 → refine ("uncertain_hard") when
    stable_uniform(seed, id, "uncertain") < uncertain_hard_share, else all_wrong — 0/8 is weak
    evidence of impossibility; 0 < k < n with equal rewards → zero_variance.
    """
    g = pool_counts(screen_stats)
    n, k, process = pl.col("n"), pl.col("k"), process_flag(g, cfg)
    error_share = pl.col("n_errors") / (n + pl.col("n_errors"))
    u = stable_uniforms(cfg.seed, g["problem_id"], "uncertain")
    g = g.with_columns(
        pl.when((error_share > cfg.max_error_share) | (n == 0))
        .then(pl.lit("verifier_error"))
        .when(reward_informative())
        .then(pl.lit("mixed"))
        .when(process)
        .then(pl.lit("process_informative"))
        .when(k == n)
        .then(pl.lit("all_correct"))
        .when(k > 0)
        .then(pl.lit("zero_variance"))
        .when(u < cfg.uncertain_hard_share)
        .then(pl.lit("uncertain_hard"))
        .otherwise(pl.lit("all_wrong"))
        .alias("reason")
    )
    refine = g.filter(pl.col("reason").is_in(["mixed", "uncertain_hard", "process_informative"]))
    correct = g.filter(pl.col("reason") == "all_correct").drop(
        "reason", "process_informative", strict=False
    )
    rejected = g.filter(pl.col("reason").is_in(["verifier_error", "all_wrong", "zero_variance"]))
    return Screened(refine, correct, concat_rejections([rejected.select(list(REJECTION_SCHEMA))]))


# -- per-prompt group size ---------------------------------------------------------------------
def informative_prob(p: float, g: int) -> float:
    """P(a group of g binary samples with pass rate p is not constant) = 1 − p^g − (1 − p)^g."""
    return 1.0 - p**g - (1.0 - p) ** g


def group_size_for(p: float, target: float = 0.9, cap: int = 64) -> int | None:
    """Smallest G in [2, cap] whose group is informative with probability ≥ target, else None.

    The probability grows with G (each step adds p^G(1−p) + (1−p)^G p > 0), so the first hit is
    the answer. This loop is the reference `group_sizes_for` is tested against.
    """
    for g in range(2, cap + 1):
        if informative_prob(p, g) >= target:
            return g
    return None


def group_sizes_for(p: pl.Series | np.ndarray, target: float = 0.9, cap: int = 64) -> pl.Series:
    """`group_size_for` over many pass rates at once (Int64; null where even `cap` fails)."""
    if cap < 2:
        raise SieveError(f"max group size must be >= 2, got {cap}")
    probs = np.asarray(p, dtype=np.float64)[:, None]  # (N, 1)
    sizes = np.arange(2, cap + 1, dtype=np.float64)[None, :]  # (1, cap - 1)
    ok = 1.0 - probs**sizes - (1.0 - probs) ** sizes >= target  # (N, cap - 1)
    first = np.where(ok.any(axis=1), ok.argmax(axis=1) + 2, -1)
    sizes_found = pl.Series("group_size", first, dtype=pl.Int64).to_frame()
    return sizes_found.select(pl.when(pl.col("group_size") > 0).then("group_size")).to_series()
