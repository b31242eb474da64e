"""The prompt-selection policies a backtest replays on a pool (`backtest_pool`), each an `Arm`:
the rollouts it spent, its informative groups, the prompts it trains on, and the report
`benchmarks/real_model.py` writes.

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
  v·g .. v·g + g − 1, revealed only once picked (`StoredGroups`). Every rollout it reads trains
  (none decides only). A prompt is picked at most ⌊depth / g⌋ times, depth the fewest samples
  any prompt of the pool holds, so how many samples a prompt has stored (on a ledger: more when
  the screen kept it) never decides what the policy may pick;
- `sieve_arm`: Sieve's two stages with a `CurateConfig`, as a curation samples them: screen
  (`screen_g`), `refine_g` more on the survivors, `screen_survivors` / `build_curriculum` select
  on the pooled screen_g + refine_g, and the kept prompts' training groups (`train_g`, default
  `stage1_g`) are judged on the samples after those, which selection never saw. A curated home
  holds nothing after them, so there it needs a smaller replay (e.g. refine_g lowered by
  train_g) or it is refused.

`backtest_curation` replays one curation on its own runs with its own config, Sieve against
uniform (what `sieve demo` leads its summary with).

Test: `.venv/bin/pytest tests/test_backtest.py tests/test_backtest_posterior.py tests/test_demo.py
-q`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.jobs.analysis.backtest_pool import (
    NotEnoughSamples,
    all_prompts,
    groups,
    ids,
    informative,
    informative_share,
    ledger_samples,
    require,
)
from pipeline.selection import (
    CurateConfig,
    build_curriculum,
    group_stats,
    screen_survivors,
    stable_uniforms,
)
from pipeline.selection.posterior import PosteriorConfig, SelectionConfig
from pipeline.store import Ledger


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
