"""Build the two-stage curriculum from pooled posterior stats (docs/architecture.md: curation
steps 6–7).

`build_curriculum(pooled, all_correct, cfg)` is pure and deterministic (output sorted; the only
randomness is `stable_uniform`). Per refined prompt, pooled over screen + refine samples, two
separate criteria: whether its group is informative — the trainer's rule on the rewards,
max − min > tol (`grpo_core.advantages.is_uninformative` via `stats.reward_informative`) — and
where the Beta(1 + k, 1 + n − k) posterior of its pass rate lies (the band):

- stage 1, reason `mid_band`: informative, p_low ≥ band_low and p_high ≤ band_high; group size
  `stage1_g`;
- stage 2, reason `hard`: informative, otherwise k ≥ 1 and either p_mean < hard_max_p or —
  where the stage-2 range is open at this n (some 1 ≤ k' < n has p_mean < hard_max_p and a
  group size within the cap) — below the band: p_low < band_low and p_high ≤ band_high; group
  size = smallest G with 1 − p^G − (1 − p)^G ≥ informative_target at p = p_mean (none within
  the cap → `out_of_band`). The second clause makes the two stages tile: p_mean < hard_max_p
  and p_low ≥ band_low test different statistics, so at small n a count could fall between
  them (at n = 12, k = 1 once went to stage 2 while k = 2 was rejected). Now, at
  any n, the kept k form one interval — more successes never turn a kept prompt rejected and
  kept again. A config whose stage 2 takes nothing at this n (the tiny policy's hard_max_p 0.01:
  no G within the cap) keeps only its band, as before;
- stage 1, reason `process_informative` (only with `process_signal`): uninformative rewards but
  step verdicts that vary (`pipeline.selection.stats` `process_informative`); group size
  `stage1_g`, weight 1 (an average item: its outcome learnability is ~0 by construction, so it
  cannot rank these);
- any other uninformative group is rejected with a label from its verdicts: `all_wrong` (k = 0),
  `all_correct` (k = n), `zero_variance` (verdicts differ, rewards do not); an informative group
  outside the band → `out_of_band`.

Replay (MiMo / Polaris keep easy data for stability): round(replay_share × stage-1 size)
all-correct screen prompts, those with the smallest stable_uniform(seed, id, "replay"), join
stage 1 with reason `replay` and weight `replay_weight`; the rest are rejected `all_correct`.

Weights: mid_band and hard items get learnability / (mean learnability of those items), so they
average 1 — the design asks only for weights ∝ learnability; the mean-1 scale keeps
replay_weight readable.
Positions: 0, 1, ... over the whole curriculum, stage 1 first, then stage 2; inside a stage by
learnability, highest first, ties by problem_id. Departure from Pilot-Commit (which commits
every pilot survivor to one large G): stage 2 picks G per prompt.

Test: `.venv/bin/pytest tests/selection/test_curriculum.py -q`.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from pipeline.core.errors import SieveError
from pipeline.selection.config import CurateConfig
from pipeline.selection.posterior import group_size_for
from pipeline.selection.rules import (
    REJECTION_SCHEMA,
    concat_rejections,
    group_sizes_for,
    process_flag,
    stable_uniforms,
)
from pipeline.selection.stats import (
    INTERVAL,
    SPREAD_COLUMNS,
    posterior,
    require_columns,
    reward_informative,
)

ITEM_SCHEMA: dict[str, pl.DataType] = {
    "problem_id": pl.Utf8(),
    "stage": pl.Int32(),
    "position": pl.Int32(),
    "group_size": pl.Int32(),
    "weight": pl.Float64(),
    "p_mean": pl.Float64(),
    "p_low": pl.Float64(),
    "p_high": pl.Float64(),
    "reason": pl.Utf8(),
}
_COUNTS = ("problem_id", "n", "k")


def _counts(frame: pl.DataFrame, what: str, spread: bool) -> pl.DataFrame:
    require_columns(frame, (*_COUNTS, *SPREAD_COLUMNS) if spread else _COUNTS, what)
    extra = [pl.col("process_informative")] if "process_informative" in frame.columns else []
    extra += [pl.col(*SPREAD_COLUMNS).cast(pl.Float64)] if spread else []
    cast = frame.select(pl.col("problem_id").cast(pl.Utf8), pl.col("n", "k").cast(pl.Int64), *extra)
    return posterior(cast)


def hard_open(ns: pl.Series, cfg: CurateConfig) -> pl.Series:
    """Per pooled sample count n: whether stage 2 takes some count at n — a 1 ≤ k < n with
    p_mean = (k + 1) / (n + 2) < hard_max_p and a group size within the cap (Boolean)."""
    table: dict[int, bool] = {}
    for n in ns.unique().drop_nulls().to_list():
        p = (np.arange(1, max(int(n), 1)) + 1.0) / (n + 2.0)  # (n − 1,) binary k = 1 .. n − 1
        p = p[p < cfg.hard_max_p]
        sizes = group_sizes_for(p, cfg.informative_target, cfg.max_group_size)
        table[int(n)] = bool(sizes.is_not_null().any())
    return ns.replace_strict(table, default=False, return_dtype=pl.Boolean).alias("_hard_open")


def classify(post: pl.DataFrame, cfg: CurateConfig) -> pl.DataFrame:
    """`post` plus `reason` (mid_band | hard | process_informative | all_wrong | all_correct |
    zero_variance | out_of_band), `stage`, `group_size`."""
    informative = reward_informative()
    p_low, p_high = pl.col("p_low"), pl.col("p_high")
    mid = informative & (p_low >= cfg.band_low) & (p_high <= cfg.band_high)
    below = pl.col("_hard_open") & (p_low < cfg.band_low) & (p_high <= cfg.band_high)
    hard = informative & ((pl.col("p_mean") < cfg.hard_max_p) | below) & (pl.col("k") >= 1)
    process = ~informative & process_flag(post, cfg)
    hard_g = group_sizes_for(post["p_mean"], cfg.informative_target, cfg.max_group_size)
    tagged = post.with_columns(hard_g.alias("_hard_g"), hard_open(post["n"], cfg))
    reason = (
        pl.when(mid).then(pl.lit("mid_band"))
        .when(hard & pl.col("_hard_g").is_not_null()).then(pl.lit("hard"))
        .when(process).then(pl.lit("process_informative"))
        .when(informative).then(pl.lit("out_of_band"))
        .when(pl.col("k") == 0).then(pl.lit("all_wrong"))
        .when(pl.col("k") == pl.col("n")).then(pl.lit("all_correct"))
        .otherwise(pl.lit("zero_variance"))
    )  # fmt: skip
    tagged = tagged.with_columns(reason.alias("reason"))
    stage1 = pl.col("reason").is_in(["mid_band", "process_informative"])
    return tagged.with_columns(
        pl.when(stage1).then(1).otherwise(2).alias("stage"),
        pl.when(stage1)
        .then(pl.lit(cfg.stage1_g, pl.Int64))
        .otherwise(pl.col("_hard_g"))
        .alias("group_size"),
    ).drop("_hard_g", "_hard_open")


def pick_replay(
    all_correct: pl.DataFrame, n_stage1: int, cfg: CurateConfig
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(replay rows, rejected ids): round(replay_share × n_stage1) picked by stable_uniform."""
    count = math.floor(cfg.replay_share * n_stage1 + 0.5)  # round half up, not to even
    u = stable_uniforms(cfg.seed, all_correct["problem_id"], "replay").alias("_u")
    ranked = all_correct.with_columns(u).sort(["_u", "problem_id"]).drop("_u")
    replay = ranked.head(count).with_columns(
        pl.lit("replay").alias("reason"),
        pl.lit(1).alias("stage"),
        pl.lit(cfg.stage1_g, pl.Int64).alias("group_size"),
    )
    rest = ranked.slice(count).select(pl.col("problem_id"), pl.lit("all_correct").alias("reason"))
    return replay, rest


def _weighted(
    main: pl.DataFrame, process: pl.DataFrame, replay: pl.DataFrame, cfg: CurateConfig
) -> pl.DataFrame:
    mean = main["learnability"].mean() if main.height else None
    main = main.with_columns((pl.col("learnability") / pl.lit(mean)).alias("weight"))
    process = process.with_columns(pl.lit(1.0, pl.Float64).alias("weight"))
    replay = replay.with_columns(pl.lit(cfg.replay_weight, pl.Float64).alias("weight"))
    return pl.concat([main, process, replay], how="diagonal_relaxed")


def _ordered(items: pl.DataFrame) -> pl.DataFrame:
    order = items.sort(["stage", "learnability", "problem_id"], descending=[False, True, False])
    positioned = order.with_columns(pl.int_range(pl.len()).alias("position"))
    return positioned.select([pl.col(c).cast(t) for c, t in ITEM_SCHEMA.items()])


PRIOR_QUANTILE_DRAWS = 4096


def prior_items(post: pl.DataFrame, cfg: CurateConfig) -> pl.DataFrame:
    """Curriculum rows for candidates that go by their cell's prior (`screen = "unknown"`):
    `post` holds problem_id, alpha, beta, mean (the difficulty model's posterior, no sample of
    the prompt itself needed). Stage 2, G the smallest in [stage1_g, max_group_size] whose group
    is informative with predictive probability ≥ informative_target (reason cell_prior), else
    max_group_size (cell_prior_explore: the posterior is too unsure or too flat for any G; the
    trainer's Thompson draw rarely picks such a prompt, and its cell's floor keeps it possible);
    p_low / p_high are the posterior's 5 % / 95 % quantiles from 4,096 seeded draws (Beta
    parameters below 1 are outside the closed-form approximation the screen's rows use)."""
    if post.is_empty():
        return pl.DataFrame(schema={**ITEM_SCHEMA, "learnability": pl.Float64()}).drop("position")
    a, b = post["alpha"].to_numpy(), post["beta"].to_numpy()
    g_min = np.full(len(a), cfg.stage1_g)
    g = group_size_for(a, b, g_min, cfg.max_group_size, cfg.informative_target)
    rng = np.random.default_rng(0)
    draws = rng.beta(a[:, None], b[:, None], size=(len(a), PRIOR_QUANTILE_DRAWS))
    low, high = np.quantile(draws, [INTERVAL[0], 1.0 - INTERVAL[0]], axis=1)
    return post.select(
        pl.col("problem_id").cast(pl.Utf8),
        pl.lit(2, pl.Int32).alias("stage"),
        pl.Series("group_size", np.where(g > 0, g, cfg.max_group_size), dtype=pl.Int64),
        pl.col("mean").alias("p_mean"),
        pl.Series("p_low", low, dtype=pl.Float64),
        pl.Series("p_high", high, dtype=pl.Float64),
        (pl.col("alpha") * pl.col("beta") / (
            (pl.col("alpha") + pl.col("beta")) * (pl.col("alpha") + pl.col("beta") + 1)
        )).alias("learnability"),
        pl.Series("reason", np.where(g > 0, "cell_prior", "cell_prior_explore")),
    )  # fmt: skip


def build_curriculum(
    pooled: pl.DataFrame,
    all_correct: pl.DataFrame,
    cfg: CurateConfig,
    prior: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(items, rejections) from refined prompts' pooled counts and the screen's all-correct ones.

    `pooled` needs problem_id, n, k, reward_min, reward_max and `all_correct` problem_id, n, k
    (one row per problem; posterior columns are recomputed). Items have the `curriculum_items`
    columns minus curriculum_id; rejections are (problem_id, reason). No problem appears twice.
    """
    post = _counts(pooled, "pooled stats", spread=True)
    easy = _counts(all_correct, "all-correct frame", spread=False)
    for frame, what in ((post, "pooled stats"), (easy, "all-correct frame")):
        if frame["problem_id"].is_duplicated().any():
            raise SieveError(f"{what} has several rows for one problem_id; pool them first")
    if easy["problem_id"].is_in(post["problem_id"].implode()).any():
        raise SieveError("a problem is both in the pooled stats and all-correct at the screen")
    tagged = classify(post, cfg)
    main = tagged.filter(pl.col("reason").is_in(["mid_band", "hard"]))
    process = tagged.filter(pl.col("reason") == "process_informative")
    n_stage1 = main.filter(pl.col("stage") == 1).height + process.height
    replay, easy_rejected = pick_replay(easy, n_stage1, cfg)
    kept = ["mid_band", "hard", "process_informative"]
    dropped = tagged.filter(~pl.col("reason").is_in(kept))
    rejected = concat_rejections([dropped.select(list(REJECTION_SCHEMA)), easy_rejected])
    if prior is not None and prior.height:  # unscreened candidates of known cells (stage 2)
        main = pl.concat([main, prior_items(prior, cfg)], how="diagonal_relaxed")
    return _ordered(_weighted(main, process, replay, cfg)), rejected
