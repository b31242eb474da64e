"""The difficulty model: each prompt's pass rate as a Beta posterior pooled from every group the
ledger holds of it, shrunk toward its cell's yield, and the selection that picks a training batch
from it before any rollout is spent.

The model, per prompt i of cell c, from observed groups j (k_j correct of n_j, observed at update
u_j; `now` the current update):

- weight w_j = γ^(now − u_j) · min(1, cap / n_j): evidence decays with every update of the
  policy, whether or not the prompt is picked again (MoPPS decays a prompt only when it is
  observed, so a prompt that failed early stays frozen: after two 0/8 groups its
  P(p ≥ 0.3) is 0.002 for ever), and no single group weighs more than `cap` samples;
- the pooled yield m = (Σ w k + 1) / (Σ w n + 2) over every group;
- the cell's yield m_c = (Σ_c w k + s_cell · m) / (Σ_c w n + s_cell), clipped to
  [floor, 1 − floor]: an unseen cell starts at the pooled yield, and a cell keeps a floor so that
  one failing only for want of format comes back once the format is learned (its old zeros
  decay, the pooled yield rises);
- the prompt's posterior Beta(s · m_c + Σ_i w k, s · (1 − m_c) + Σ_i w (n − k)): an unseen
  prompt starts from its cell's yield with strength s, not Beta(1, 1).

`select_batch` Thompson-samples each candidate's pass rate and keeps the `batch` whose draws have
the largest learnability p(1 − p); `posterior_select` is the trainer collector that does it at
every step from the run's own groups (every group it trains is an observation; nothing is sampled
to decide). The same numbers come from the ledger in SQL (`queries/prompt_posterior.sql`); the
tests hold the two to 1e-12. What the model observes in the ledger, on the lineage clock, is
read by `pipeline.selection.evidence`.

Options (`SelectionConfig`; its defaults are the above):
- `model = "learning"`: the learning model (pipeline/selection/learning.py: evidence that moves
  with training, per-cell drift fitted on the run's revisits) instead of this static one; it has
  no SQL twin;
- `score = "ucb"`: the posterior mean of p(1 − p) plus κ times its standard deviation instead of
  a Thompson draw's p(1 − p); `coverage` ρ: a prompt seen v times scores × (1 + v)^−ρ;
- `target_share` τ: a closed loop that spends a share ε of each batch on the least-visited
  prompts ranked below it, ε moving with the realised informative share (`batch_choice`);
- a start prior (`CellPrior`): k of n samples per cell known before the run (a screen or an
  evaluation of the start weights; `evidence.ledger_cell_prior` reads one revision's),
  joined to the cells' evidence at its update, in either model.

The metric `predicted_informative` of a step is the mean over the picked batch of the posterior
predictive P(0 < k < G) (Beta-binomial, `stats.informative_probability`) under the model that
picked it.

Test: `.venv/bin/pytest tests/selection/test_posterior.py tests/selection/test_posterior_learning.py
-q`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from grpo_core.seeds import derive_seed
from grpo_core.types import Collected, Collector, Item, Rollouts, Scores, TrainerError
from grpo_core.validate import AtLeastOne, check_fields
from pipeline.selection.batch_choice import (
    SELECTION,
    SelectionConfig,
    exploration,
    realised_share,
    select_batch,
)
from pipeline.selection.learning import RunLearner
from pipeline.selection.stats import (
    flat_probability,
    informative_probability,
)

OBSERVATION_SCHEMA = pl.Schema(
    {
        "problem_id": pl.String,
        "cell": pl.String,
        "k": pl.Float64,
        "n": pl.Float64,
        "update": pl.Int64,
    }
)


@dataclass(frozen=True)
class PosteriorConfig:
    decay: float = 0.9  # γ: the weight evidence keeps per update of the policy (half-life ~6.6)
    cap: float = 8.0  # the most samples one group counts for
    strength: float = 4.0  # s: pseudo-samples of the cell's yield in an unseen prompt's prior
    cell_strength: float = 8.0  # s_cell: pseudo-samples of the pooled yield in a cell's yield
    floor: float = 0.02  # every cell's yield stays in [floor, 1 − floor]
    candidates: AtLeastOne = 8  # candidates drawn per batch slot (≥ 8x the batch)

    def __post_init__(self) -> None:
        check_fields(self)
        if not (0.0 < self.decay <= 1.0 and self.cap > 0 and self.strength > 0):
            raise ValueError(
                f"need 0 < decay ≤ 1, cap > 0, strength > 0; got decay={self.decay}, "
                f"cap={self.cap}, strength={self.strength}"
            )
        if not (self.cell_strength > 0 and 0.0 <= self.floor < 0.5):
            raise ValueError(
                f"need cell_strength > 0 and 0 ≤ floor < 0.5; got {self.cell_strength}, "
                f"{self.floor}"
            )


@dataclass(frozen=True)
class CellPrior:
    """What is known of each cell ("family level") before the run: `cells` maps a cell to (k
    correct, n samples), measured at update `update` (a screen or a held-out evaluation of the
    start weights). Both models add it to the cell's evidence, never to a prompt's own, and it
    decays like a group observed then (static: γ per update, uncapped: `cap` bounds one group,
    a measurement is many; learning: `cell_decay`)."""

    cells: Mapping[str, tuple[float, float]]
    update: int = 0

    def __post_init__(self) -> None:
        for cell, (k, n) in self.cells.items():
            if not (math.isfinite(k) and math.isfinite(n) and 0.0 <= k <= n):
                raise ValueError(f"cell {cell!r}: need 0 ≤ k ≤ n, finite; got k={k}, n={n}")
        if self.update < 0:
            raise ValueError(f"need update ≥ 0; got {self.update}")

    @classmethod
    def from_rates(
        cls, rates: Mapping[str, float], samples: float | Mapping[str, float], update: int = 0
    ) -> CellPrior:
        """From a pass rate per cell worth `samples` samples (one number, or one per cell): the
        strength of the prior is how many samples the rate was measured on, or less."""
        n = {c: float(samples[c] if isinstance(samples, Mapping) else samples) for c in rates}
        return cls({c: (float(r) * n[c], n[c]) for c, r in rates.items()}, update)

    def frame(self, decay: float, now: int) -> pl.DataFrame:
        """cell, wk, wn: the evidence weighted γ^(now − update), as `cell_posterior` pools it."""
        w = decay ** (now - self.update)
        return pl.DataFrame(
            {"cell": list(self.cells), "wk": [w * k for k, _ in self.cells.values()],
             "wn": [w * n for _, n in self.cells.values()]},
            schema={"cell": pl.String, "wk": pl.Float64, "wn": pl.Float64},
        )  # fmt: skip


def _weighted(obs: pl.DataFrame, cfg: PosteriorConfig, now: int) -> pl.DataFrame:
    """Each group's weight at update `now`; a group of a later update (a sibling run's, further
    along its own lineage) is not evidence yet."""
    w = pl.lit(cfg.decay, pl.Float64).pow(
        (now - pl.col("update")).cast(pl.Float64)
    ) * pl.min_horizontal(pl.lit(1.0), pl.lit(cfg.cap) / pl.col("n"))
    return obs.filter((pl.col("n") > 0) & (pl.col("update") <= now)).with_columns(
        wk=w * pl.col("k"), wn=w * pl.col("n")
    )


def cell_posterior(
    obs: pl.DataFrame, cfg: PosteriorConfig, now: int, prior: CellPrior | None = None
) -> tuple[float, pl.DataFrame]:
    """(pooled yield m, per cell: cell, wk, wn, yield m_c) from observations at update `now`
    (and a start prior's cell evidence, which the pooled yield counts too)."""
    w = _weighted(obs, cfg, now)
    if prior is not None:
        w = pl.concat([w.select("cell", "wk", "wn"), prior.frame(cfg.decay, now)])
    pooled = (float(w["wk"].sum()) + 1.0) / (float(w["wn"].sum()) + 2.0)
    cells = (
        w.group_by("cell")
        .agg(pl.col("wk").sum(), pl.col("wn").sum())
        .with_columns(
            cell_yield=(
                (pl.col("wk") + cfg.cell_strength * pooled) / (pl.col("wn") + cfg.cell_strength)
            ).clip(cfg.floor, 1.0 - cfg.floor)
        )
        .sort("cell")
    )
    return pooled, cells


def prompt_posterior(
    obs: pl.DataFrame,
    prompts: pl.DataFrame,
    cfg: PosteriorConfig,
    now: int,
    prior: CellPrior | None = None,
) -> pl.DataFrame:
    """Beta(alpha, beta) of every prompt in `prompts` (columns problem_id, cell), observed or
    not, at update `now`; also its posterior mean. `prior`: a start prior of the cells."""
    pooled, cells = cell_posterior(obs, cfg, now, prior)
    fallback = min(max(pooled, cfg.floor), 1.0 - cfg.floor)
    mine = (
        _weighted(obs, cfg, now)
        .group_by("problem_id")
        .agg(pk=pl.col("wk").sum(), pn=pl.col("wn").sum())
    )
    out = (
        prompts.select("problem_id", "cell")
        .join(cells.select("cell", "cell_yield"), on="cell", how="left", maintain_order="left")
        .join(mine, on="problem_id", how="left", maintain_order="left")
        .with_columns(
            pl.col("cell_yield").fill_null(fallback),
            pl.col("pk").fill_null(0.0),
            pl.col("pn").fill_null(0.0),
        )
        .with_columns(
            alpha=cfg.strength * pl.col("cell_yield") + pl.col("pk"),
            beta=cfg.strength * (1.0 - pl.col("cell_yield")) + pl.col("pn") - pl.col("pk"),
        )
        .with_columns(mean=pl.col("alpha") / (pl.col("alpha") + pl.col("beta")))
    )
    return out.select("problem_id", "cell", "cell_yield", "alpha", "beta", "mean")


@dataclass
class Observations:
    """The groups a run has seen, as the posterior reads them (in memory; the trainer's recorder
    writes the same groups to the ledger's train_rollouts)."""

    rows: list[tuple[str, str, float, float, int]] = field(default_factory=list)

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame(self.rows, schema=OBSERVATION_SCHEMA, orient="row")

    def add(self, key: str, cell: str, k: float, n: float, update: int) -> None:
        self.rows.append((key, cell, float(k), float(n), int(update)))

    def state(self) -> list[list[Any]]:
        return [list(r) for r in self.rows]

    @classmethod
    def load(cls, rows: Sequence[Sequence[Any]]) -> Observations:
        return cls([(str(a), str(b), float(c), float(d), int(e)) for a, b, c, d, e in rows])


Difficulty = Callable[[Observations, list[str], list[str], int], tuple[np.ndarray, np.ndarray]]


def difficulty_model(
    cfg: PosteriorConfig = PosteriorConfig(),
    select: SelectionConfig = SELECTION,
    prior: CellPrior | None = None,
) -> Difficulty:
    """The model `select.model` names, as a function (observations, keys, cells, now) → the
    prompts' Beta (α, β) at update `now`: the static one (`cfg`) computed afresh each time, or
    the learning one (`select.learning`; `cfg` unused) keeping its state between calls (a
    `RunLearner` over the observations' rows). `prior` joins the cells' evidence in either."""
    if select.model == "learning":
        learner = RunLearner(select.learning, prior.cells if prior else None,
                             prior.update if prior else 0)  # fmt: skip
        return lambda obs, keys, cells, now: learner.params(obs.rows, keys, cells, now)

    def static(
        obs: Observations, keys: list[str], cells: list[str], now: int
    ) -> tuple[np.ndarray, np.ndarray]:
        prompts = pl.DataFrame({"problem_id": keys, "cell": cells})
        post = prompt_posterior(obs.frame(), prompts, cfg, now, prior)
        return post["alpha"].to_numpy(), post["beta"].to_numpy()

    return static


@dataclass
class _Step:
    """A step's distinct candidates, their Beta (α, β) at the step's update (in their order),
    their visits (groups the model holds of each; None unless the score reads them) and the
    step's Thompson generator."""

    cands: list[Item]
    alpha: np.ndarray
    beta: np.ndarray
    visits: np.ndarray | None
    rng: np.random.Generator


def _candidates(
    source: Callable[[int, int], Sequence[Item]],
    cell_of: Mapping[str, str],
    obs: Observations,
    model: Difficulty,
    select: SelectionConfig,
    seed: int,
    step: int,
    size: int,
    now: int,
    fewest: int | None = None,
) -> _Step:
    """The step's candidates and their posteriors; a TrainerError when there are fewer than
    `fewest` distinct ones (default: a batch of `size`)."""
    cands = list({it.key: it for it in source(step, 0)}.values())
    if len(cands) < (size if fewest is None else fewest):
        raise TrainerError(f"{len(cands)} candidates for a batch of {size} at step {step}")
    keys = [it.key for it in cands]
    alpha, beta = model(obs, keys, [cell_of[k] for k in keys], now)
    visits = None
    if select.coverage > 0 or select.target_share is not None:
        seen = Counter(r[0] for r in obs.rows)
        visits = np.array([seen[k] for k in keys], dtype=np.float64)
    rng = np.random.default_rng(derive_seed(seed, "posterior", step))
    return _Step(cands, alpha, beta, visits, rng)


def posterior_select(
    source: Callable[[int, int], Sequence[Item]],
    cell_of: Mapping[str, str],
    obs: Observations,
    batch: int | Callable[[int], int],
    seed: int,
    cfg: PosteriorConfig = PosteriorConfig(),
    update_of: Callable[[int], int] = lambda step: step,
    stored: Mapping[str, Sequence[Any]] | None = None,
    visited: set[str] | None = None,
    select: SelectionConfig = SELECTION,
    prior: CellPrior | None = None,
    shares: list[float] | None = None,
) -> Collector:
    """The trainer collector: candidates of (step, 0) (≥ cfg.candidates x `batch` of them),
    their posteriors at update `update_of(step)` from `obs` (and `prior`) under the model
    `select` names, the `batch` of the largest score (`select_batch`) sampled, each group then
    added to `obs`; with fewer distinct candidates than `batch`, the best-ranked take a second group
    (the step still trains `batch` groups). No rollout is spent to decide. `batch` may be a function
    of the step (the curriculum's stages differ in G). Metric `predicted_informative`: the batch's
    mean posterior predictive P(0 < k < G).

    `stored` (key → samples, e.g. the night's screen/refine samples of the curriculum): a picked
    prompt's first visit (its key not in `visited`, which the collector then extends) trains on
    those samples instead of fresh ones (`grpo_core.history.replay_first_visits`); a replayed
    group is not observed again (the ledger already holds it as curation evidence).

    `shares` (the caller's list, which the collector extends while `select.target_share` is
    set): each step's realised informative share; the step's exploration share ε is
    `batch_choice.exploration` of them (a resumed run hands back the shares its steps recorded).
    Metric `explore`: that ε."""
    from grpo_core.collect import split_scores
    from grpo_core.history import replay_first_visits

    seen_keys = visited if visited is not None else set()
    realised = shares if shares is not None else []
    model = difficulty_model(cfg, select, prior)

    def collect(t: Rollouts, step: int) -> Collected:
        size = batch(step) if callable(batch) else batch
        now = update_of(step)
        at = _candidates(source, cell_of, obs, model, select, seed, step, size, now, fewest=1)
        eps = 0.0
        if select.target_share is not None:
            eps = exploration(realised, select.target_share, select.share_gain,
                              select.explore_most)  # fmt: skip
        n = min(size, len(at.cands))
        idx = select_batch(at.alpha, at.beta, n, at.rng, select, at.visits, eps)
        # fewer distinct prompts than a batch (a small curriculum): the ranking is repeated from
        # the top, so the best-ranked prompts take a second group and every step trains the
        # batch it was given (never a smaller one, which would change the update's size)
        idx = np.resize(idx, size)
        kept = [at.cands[int(i)] for i in idx]
        g = np.array([it.group_size for it in kept], dtype=np.float64)
        metrics = {  # a group of G is informative unless all G agree (posterior predictive)
            "candidates": float(len(at.cands)),
            "predicted_informative": float(
                np.mean(informative_probability(at.alpha[idx], at.beta[idx], g))
            ),
            "explore": eps,
        }
        if stored:
            c, replayed = replay_first_visits(t, step, kept, stored, seen_keys)
            for it, part in zip(c.items, split_scores(c.scores, c.groups), strict=True):
                if it.key in replayed:  # the first copy replayed; a repeat of it was sampled
                    replayed = replayed - {it.key}
                else:
                    _observe(obs, cell_of, it, [part], now)
            if select.target_share is not None:
                parts = split_scores(c.scores, c.groups)
                realised.append(realised_share(parts, t.cfg.zero_var_tol))
            c.metrics.update(metrics)
            return c
        groups, scores, ts, tr = t.sample_and_score(kept, t.step_seed(step))
        parts = split_scores(scores, groups)
        for it, part in zip(kept, parts, strict=True):
            _observe(obs, cell_of, it, [part], now)
        if select.target_share is not None:  # the loop's record (a Rollouts with a config)
            realised.append(realised_share(parts, t.cfg.zero_var_tol))
        seen_keys.update(it.key for it in kept)
        return Collected(kept, groups, scores, sum(len(g) for g in groups), ts, tr, metrics)

    return collect


def group_size_for(
    alpha: np.ndarray, beta: np.ndarray, g_min: np.ndarray, g_max: int, target: float
) -> np.ndarray:
    """Per prompt, the smallest G in [g_min, g_max] whose group is informative with posterior
    predictive probability ≥ `target`; 0 where none is (the posterior is not sure enough)."""
    ok = (1.0 - flat_probability(alpha, beta, g_max)) >= target
    ok &= np.arange(1, g_max + 1)[None, :] >= g_min[:, None]
    first = np.argmax(ok, axis=1) + 1
    return np.where(ok.any(axis=1), first, 0)


@dataclass(frozen=True)
class ScreenConfig:
    """The two stages inside training: a picked prompt the posterior is not
    sure of is screened with `screen_g` samples and, if they disagree, continued to its item's G
    in the same step (the screen's samples stay in its group: same weights, nothing stale); one
    it is sure of goes straight to the smallest G in [item G, g_max] informative with
    probability ≥ `target`. A flat screen trains nothing; the step screens more candidates
    (at most `rounds` times) to fill its batch, and fills what is still short with the next
    candidates straight at their item's G (so a pool with few learnable prompts still trains a
    full batch every step; rounds = 0 is `posterior_select`). A step samples at most its batch
    at full G plus `rounds` x batch x screen_g screen samples that do not train."""

    screen_g: int = 4
    g_max: int = 16
    target: float = 0.9
    rounds: int = 1  # then the rest straight: screens cost at most batch x screen_g a step

    def __post_init__(self) -> None:
        if not (2 <= self.screen_g < self.g_max and 0.0 < self.target < 1.0 and self.rounds >= 0):
            raise ValueError(
                f"need 2 ≤ screen_g < g_max, 0 < target < 1, rounds ≥ 0; got {self.screen_g}, "
                f"{self.g_max}, {self.target}, {self.rounds}"
            )


def posterior_screen(
    source: Callable[[int, int], Sequence[Item]],
    cell_of: Mapping[str, str],
    obs: Observations,
    batch: int | Callable[[int], int],
    seed: int,
    cfg: PosteriorConfig = PosteriorConfig(),
    screen: ScreenConfig = ScreenConfig(),
    update_of: Callable[[int], int] = lambda step: step,
    full: bool = False,
    select: SelectionConfig = SELECTION,
    prior: CellPrior | None = None,
) -> Collector:
    """`posterior_select` with the two stages inside training: the `batch` candidates with the
    largest drawn learnability are sampled at once, each either straight at its G (posterior
    sure) or screened at `screen.screen_g`; the screens that disagree are continued to their
    item's G in a second call of the same step and train with their screen samples; flat screens
    are the only rollouts that decide without training (metric `decided_only`), and the step
    screens further candidates in Thompson order to replace them. `full`: a step that did not
    fill its batch trains nothing (metric `unfilled`; its groups still count as evidence), so
    every update trains the same number of groups (the matched protocol of
    benchmarks/headline.py). `select` and `prior` as in `posterior_select`."""
    from grpo_core.collect import Gather

    model = difficulty_model(cfg, select, prior)

    def collect(t: Rollouts, step: int) -> Collected:
        size = batch(step) if callable(batch) else batch
        now = update_of(step)
        pick = _candidates(source, cell_of, obs, model, select, seed, step, size, now)
        cands, alpha, beta = pick.cands, pick.alpha, pick.beta
        # every candidate, best first
        order = select_batch(alpha, beta, len(cands), pick.rng, select, pick.visits)
        item_g = np.array([it.group_size for it in cands])
        direct_g = group_size_for(alpha, beta, item_g, max(screen.g_max, int(item_g.max())),
                                  screen.target)  # fmt: skip
        got = Gather(t)
        counts = {"straight": 0, "screened": 0, "continued": 0, "decided_only": 0}
        at = 0
        for round_ in range(screen.rounds):
            chunk = [int(i) for i in order[at : at + size - len(got.items)]]
            at += len(chunk)
            if not chunk:
                break
            picks = [  # (item, G of the first call, G it ends at when screened; 0: straight)
                (cands[i], int(direct_g[i]), 0) if direct_g[i]
                else (cands[i], screen.screen_g, int(item_g[i]))
                for i in chunk
            ]  # fmt: skip
            observe = lambda item, part: _observe(obs, cell_of, item, [part], now)  # noqa: E731
            _screen_round(got, t, t.step_seed(step, round_), picks, counts, observe)
            if len(got.items) >= size:
                break
        short = [int(i) for i in order[at : at + size - len(got.items)]]
        if short:  # the rest of the batch straight at the items' G, unscreened
            picks = [(cands[i], int(max(direct_g[i], item_g[i])), 0) for i in short]
            counts["filled"] = 0
            observe = lambda item, part: _observe(obs, cell_of, item, [part], now)  # noqa: E731
            seed_ = t.step_seed(step, screen.rounds)
            _screen_round(got, t, seed_, picks, counts, observe, straight="filled")
        if full and len(got.items) < size:
            counts["decided_only"] += sum(len(g) for g in got.groups)
            got.items, got.groups, got.parts = [], [], []
            counts["unfilled"] = 1
        c = got.collected()
        c.metrics.update({k: float(v) for k, v in counts.items()})
        c.metrics["candidates"] = float(len(cands))
        return c

    return collect


def _screen_round(
    got: Any,
    t: Rollouts,
    seed: int,
    picks: Sequence[tuple[Item, int, int]],
    counts: dict[str, int],
    observe: Callable[[Item, Scores], None],
    straight: str = "straight",
) -> None:
    """One round of `posterior_screen`: sample every pick at its first G in one call; keep the
    straight ones; continue the screens that disagree to the G they end at in a second call
    (their screen samples first in the group) and keep them; count flat screens as rollouts
    that decided only. Every group sampled is observed once, whole."""
    from grpo_core.collect import is_informative, join_scores

    first = got.sample([p[0] for p in picks], seed, [p[1] for p in picks])
    cont = []
    for (_, g, end), (item, grp, part) in zip(picks, first, strict=True):
        if not end:
            counts[straight] += 1  # sure of it, or filling the batch ("filled")
            got.keep(item, grp, part)
            observe(item, part)
            continue
        counts["screened"] += 1
        if is_informative(part, t.cfg.zero_var_tol):
            cont.append((item, grp, part, max(end - g, 0)))
        else:
            counts["decided_only"] += len(grp)
            observe(item, part)
    more = [c for c in cont if c[3] > 0]
    extra = {}
    if more:
        got_more = got.sample([c[0] for c in more], derive_seed(seed, "continue"),
                              [c[3] for c in more])  # fmt: skip
        extra = {id(c[0]): m for c, m in zip(more, got_more, strict=True)}
    for item, grp, part, _ in cont:
        counts["continued"] += 1
        if id(item) in extra:
            _, grp2, part2 = extra[id(item)]
            grp, part = grp + grp2, join_scores([part, part2])
        got.keep(item, grp, part)
        observe(item, part)


def _observe(
    obs: Observations, cell_of: Mapping[str, str], item: Item, parts: Sequence[Any], now: int
) -> None:
    known = [x for p in parts for x in p.correct if x is not None]
    if known:
        obs.add(item.key, cell_of[item.key], sum(known), len(known), now)
