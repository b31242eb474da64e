"""`sieve plan`: before any training rollout, what each way of choosing prompts would get out of
this pool and this model, replayed on samples already stored with the arms of
`pipeline.jobs.analysis.backtest_arms`, so nothing is sampled.

Per policy (`PLAN_POLICIES`: uniform, DAPO's dynamic sampling, GRESO's skip, the posterior that
selects before rollout, Sieve's curation) it reports the groups it trains, the share of them that
are informative (Sieve's one rule), the rollouts it spends per informative group with every
rollout counted, and the share of its rollouts that only decided (sampled, never trained), then
one line: does curation pay on this data, against uniform.

Every policy trains groups of the same size G (default `group_size`: half the fewest samples a
prompt of the pool holds, at most 8, at least 2), so their costs compare: GRESO reads two groups
of a prompt, the posterior may revisit a prompt while it has groups left. Sieve's curation keeps
its config's screen and reads as much refine as the pool leaves after its training group of G
(`sieve_replays`; on a curated home that is refine_g − G, as `backtest_curation` replays a
night). A policy the pool is too small for gets a row saying what it needs.

Pools: a Parquet file (`pipeline.jobs.analysis.backtest_pool.pool_samples`; `--model` keeps the
rows of one `model_revision`), or a ledger (`ledger_pool`): the screen and refine samples of one
model revision (`--model`: a revision, or a model as curation recorded it, its newest revision),
else the training groups sampled by exactly those weights. A ledger with none says so in one line
and names the small screen that would give it some.

Test: `.venv/bin/pytest tests/test_plan.py -q`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.errors import SieveError
from pipeline.jobs.analysis import backtest_arms as arms
from pipeline.jobs.analysis.backtest_pool import NotEnoughSamples, pool_samples
from pipeline.selection import CurateConfig, load_curate_config
from pipeline.selection.posterior import SelectionConfig
from pipeline.store import Ledger

PLAN_POLICIES = ("uniform", "dapo", "greso", "posterior", "sieve")
PAYS_BELOW = 0.95  # curation pays when its cost per informative group is below 0.95x uniform's
EVEN_BELOW = 1.05  # ... and about breaks even up to 1.05x


@dataclass(frozen=True)
class PlanRow:
    """One policy's prediction (None: refused, `note` says why)."""

    policy: str
    label: str
    groups: float | None = None  # training groups (seeded policies: the mean over replays)
    informative: float | None = None  # of them informative
    rollouts: float | None = None  # every rollout spent
    deciding: float | None = None  # of them sampled only to decide (never trained)
    note: str = ""

    @property
    def share(self) -> float | None:
        return (
            self.informative / self.groups if self.groups and self.informative is not None else None
        )

    @property
    def per_informative(self) -> float | None:
        return self.rollouts / self.informative if self.informative and self.rollouts else None

    @property
    def deciding_share(self) -> float | None:
        return (
            self.deciding / self.rollouts if self.rollouts and self.deciding is not None else None
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "label": self.label,
            "training_groups": self.groups,
            "informative_groups": self.informative,
            "informative_share": self.share,
            "rollouts": self.rollouts,
            "rollouts_per_informative_group": self.per_informative,
            "rollouts_deciding": self.deciding,
            "note": self.note,
        }


@dataclass(frozen=True)
class Plan:
    source: str
    prompts: int
    samples: int
    depth: int  # the fewest samples a prompt of the pool holds
    g: int
    replays: int  # seeds the seeded policies are averaged over
    rows: list[PlanRow]
    # the difficulty model and score the posterior policy picked with
    select: SelectionConfig = field(default_factory=SelectionConfig)

    @property
    def verdict(self) -> str:
        """One line: does curation cost less per informative group here (`verdict`)?"""
        return verdict(self.rows)


def group_size(depth: int) -> int:
    """The training group size a pool of `depth` samples a prompt is planned with: two groups
    a prompt (GRESO's epochs, a posterior revisit), at most 8, at least 2."""
    return min(8, max(2, depth // 2))


def sieve_replays(cfg: CurateConfig, top: int, g: int) -> list[CurateConfig]:
    """Sieve's curation as a pool whose prompts hold at most `top` samples can replay it, with
    training groups of g after its screen and refine, in the order tried: its own screen and as
    much of its refine as `top` leaves (on a curated home: refine_g − g, as a night's replay),
    then a screen and refine halved around what is left."""
    s, r = cfg.screen_g, cfg.refine_g
    half = min(s, (top - g) // 2)
    out: list[CurateConfig] = []
    for screen, refine in [(s, min(r, top - s - g)), (half, min(r, top - g - half))]:
        if screen >= 1 and refine >= 1 and all(c.screen_g != screen for c in out):
            # a replay, so no config validation (refine_g may drop below screen_g)
            out.append(cfg.model_copy(update={"screen_g": screen, "refine_g": refine}))
    return out


def _refused(policy: str, label: str, exc: NotEnoughSamples) -> PlanRow:
    text = str(exc)
    need = re.search(r"needs (\d+) samples of", text)
    fewest = re.search(r"fewest (\d+)", text)
    batch = re.search(r"a batch of (\d+) prompts; the pool holds (\d+)", text)
    if need and fewest:
        note = f"refused: needs {need[1]} samples a prompt, some hold {fewest[1]}"
    elif batch:
        note = f"refused: a batch of {batch[1]} from {batch[2]} prompts"
    else:
        note = f"refused: {text}"
    return PlanRow(policy, label, note=note)


Counts = tuple[float, float, float, float]  # training groups, informative, rollouts, deciding


def plan(
    scored: pl.DataFrame,
    cfg: CurateConfig,
    *,
    g: int | None = None,
    seed: int = 0,
    replays: int = 5,
    source: str = "",
    select: SelectionConfig | None = None,
) -> Plan:
    """Every policy of `PLAN_POLICIES` replayed on `scored` with training groups of `g` (default
    `group_size` of the pool's depth); the seeded ones (DAPO's order, GRESO's exploration, the
    posterior's candidates and draws) averaged over `replays` seeds from `seed` on. `select`:
    the difficulty model and score the posterior picks with (default the static model and
    Thompson draws, as a train recipe's defaults)."""
    select = select or SelectionConfig()
    counts = scored.group_by("problem_id").len()["len"]
    depth, top = int(counts.min() or 0), int(counts.max() or 0)  # type: ignore[arg-type]
    g = g or group_size(depth)
    prompts = counts.len()
    volume = max(1, prompts // 8)  # DAPO's batch: about the groups the posterior trains
    rows: list[PlanRow] = []

    def run(policy: str, label: str, arm: Callable[[int], Counts], seeded: bool = False) -> None:
        try:
            got = [arm(seed + i) for i in range(replays if seeded else 1)]
        except NotEnoughSamples as exc:
            rows.append(_refused(policy, label, exc))
            return
        mean = [sum(c[j] for c in got) / len(got) for j in range(4)]
        rows.append(PlanRow(policy, label, mean[0], mean[1], mean[2], mean[3]))

    def uniform(_: int) -> Counts:
        a = arms.uniform_arm(scored, g)
        return prompts, a.informative_groups, a.rollouts, 0

    def dapo(s: int) -> Counts:
        a = arms.dapo_arm(scored, g, volume, s)
        kept = a.informative_groups  # trains only these; the flat groups it drew decided only
        return kept, kept, a.rollouts, a.rollouts - kept * g

    def greso(s: int) -> Counts:
        a = arms.greso_arm(scored, g, 0.25, s)  # both epochs train, flat groups included
        return prompts + int(a.report["epoch2_sampled"]), a.informative_groups, a.rollouts, 0

    def posterior(s: int) -> Counts:
        a = arms.posterior_arm(scored, g, min(8, max(1, prompts // 4)), s, select=select)
        return int(a.report["groups_trained"]), a.informative_groups, a.rollouts, 0

    labels: dict[str, str] = {}

    def sieve(_: int) -> Counts:
        tries = sieve_replays(cfg, top, g)
        if not tries:
            raise NotEnoughSamples(
                f"sieve needs {cfg.screen_g + 1 + g} samples of 1 prompts"
                f"; 1 of them have fewer stored (fewest {top})"
            )
        for i, replay in enumerate(tries):
            try:
                a = arms.sieve_arm(scored, replay, g)
            except NotEnoughSamples:
                if i == len(tries) - 1:
                    raise
                continue
            labels["sieve"] = f"sieve (screen {replay.screen_g}, refine {replay.refine_g})"
            curation = int(a.report["curation_rollouts"])
            return int(a.report["kept"]), a.informative_groups, a.rollouts, curation
        raise AssertionError("unreachable")

    run("uniform", "uniform", uniform)
    run("dapo", "dapo (drops flat groups)", dapo, seeded=True)
    run("greso", "greso (skips flat prompts)", greso, seeded=True)
    run("posterior", posterior_label(select), posterior, seeded=True)
    run("sieve", f"sieve (screen {cfg.screen_g}, refine {cfg.refine_g})", sieve)
    if "sieve" in labels:  # the screen and refine it could replay
        rows[-1] = replace(rows[-1], label=labels["sieve"])
    return Plan(source, prompts, scored.height, depth, g, replays, rows, select)


def posterior_label(select: SelectionConfig) -> str:
    """The posterior row's label: which model picks, where it is not the default."""
    if select == SelectionConfig():
        return "posterior (picks first)"
    return f"posterior ({select.model}{', ucb' if select.score == 'ucb' else ''})"


def verdict(rows: list[PlanRow]) -> str:
    """One line: does curation (any policy but uniform) cost less per informative group?"""
    base = next((r for r in rows if r.policy == "uniform"), None)
    if base is None or base.per_informative is None:
        why = base.note if base is not None and base.note else "no informative group"
        return f"No verdict: uniform gives nothing to compare with ({why})."
    priced = [r for r in rows if r.policy != "uniform" and r.per_informative is not None]
    if not priced:
        return "Curation does not pay here: no curated policy found an informative group."
    best = min(priced, key=lambda r: r.per_informative or 0.0)
    ratio = (best.per_informative or 0.0) / base.per_informative
    if ratio < PAYS_BELOW:
        return (
            f"Curation pays here: {best.policy} costs {ratio:.2f}x uniform per informative group."
        )
    if ratio < EVEN_BELOW:
        return (
            f"Curation about breaks even: the cheapest, {best.policy}, costs {ratio:.2f}x uniform."
        )
    return f"Curation does not pay here: the cheapest, {best.policy}, costs {ratio:.2f}x uniform."


# ------------------------------------------------------------------ where the samples come from


def pool_for_model(pool: pl.DataFrame, path: Path, model: str | None) -> pl.DataFrame:
    """A Parquet pool's rows of `model` (its `model_revision`, or `model` column), or all."""
    if model is None:
        return pool
    columns = [c for c in ("model_revision", "model") if c in pool.columns]
    if not columns:
        raise SieveError(f"pool {path} has no model_revision column to pick --model {model} by")
    mine = pool.filter(pl.any_horizontal(pl.col(c).cast(pl.String) == model for c in columns))
    if mine.is_empty():
        held = ", ".join(sorted({str(v) for v in pool[columns[0]].unique().to_list()})[:5])
        raise SieveError(f"pool {path} holds no samples of model {model} (it holds: {held})")
    return mine


def no_samples(model: str | None) -> SieveError:
    flag = f" --model {model}" if model else ""
    what = f"model {model}" if model else "any model"
    return SieveError(
        f"the ledger holds no curation or training samples of {what}: screen a few prompts "
        f"first (sieve curate{flag} --n 200), then run sieve plan{flag} again"
    )


def resolve_revision(ledger: Ledger, model: str | None) -> str:
    """The model revision whose samples `sieve plan` reads: `model` as a revision (screened, or
    the weights that sampled training groups), or as a model curation recorded (its path, or
    the path's last part), its newest screened revision; None: the newest screen run's."""
    if model is None:
        newest = ledger.query("backtest_revision")
        if newest.is_empty():
            raise no_samples(None)
        return str(newest["model_revision"][0])
    runs = ledger.sql(
        "SELECT model, model_revision FROM sampling_runs WHERE purpose IN ('screen', 'refine') "
        "AND coalesce(temperature, 1.0) > 0 ORDER BY started_at DESC NULLS LAST, run_id DESC"
    )
    for name, revision in runs.iter_rows():
        if model in (revision, name, Path(name).name) or _same_path(name, model):
            return str(revision)
    trained = ledger.run("SELECT count(*) FROM train_rollouts WHERE policy = $m", {"m": model})
    if trained[0][0]:
        return model
    raise no_samples(model)


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def ledger_pool(ledger: Ledger, model: str | None) -> tuple[pl.DataFrame, str, CurateConfig | None]:
    """(samples, what they are, the config of the revision's newest curation or None)."""
    revision = resolve_revision(ledger, model)
    samples = ledger.query("backtest_samples", revision=revision, runs=[])
    source = f"the screen and refine samples of revision {revision}"
    if samples.is_empty():
        samples = ledger.query("plan_train_samples", revision=revision)
        source = f"the training groups sampled by revision {revision} (a curriculum's prompts)"
    if samples.is_empty():
        raise no_samples(model or revision)
    row = ledger.sql(
        "SELECT config FROM curricula WHERE model_revision = $r AND config IS NOT NULL "
        "ORDER BY created_at DESC LIMIT 1",
        {"r": revision},
    )
    cfg = None if row.is_empty() else CurateConfig.model_validate_json(str(row["config"][0]))
    return samples, source, cfg


def plan_for(
    home: str | Path | None,
    pool: Path | None = None,
    model: str | None = None,
    *,
    g: int | None = None,
    seed: int = 0,
    config: Path | None = None,
    raw_answers: bool = False,
    train_config: Path | None = None,
    selection: Mapping[str, Any] | None = None,
) -> Plan:
    """`sieve plan`: the samples of `pool` (a Parquet file, scored if needed; `model` picks its
    rows) or of the ledger of `home` (`model`'s newest screened revision, default the newest
    screen run's), planned with the config file `config` (else, from the ledger, the config its
    samples were curated with, else the defaults); the posterior picks with the difficulty
    model the train recipe names (`plan_selection`)."""
    if g is not None and g < 2:
        raise SieveError(f"--g {g}: a group needs at least 2 samples to disagree")
    select = plan_selection(train_config, model, selection)
    cfg = load_curate_config(config) if config else None
    if pool is not None:
        samples = pool_samples(pool, marker_required=not raw_answers)
        samples = pool_for_model(samples, pool, model)
        source = f"pool {pool}" + (f" (model {model})" if model else "")
    else:
        with Ledger.open(home, read_only=True) as ledger:
            samples, source, stored = ledger_pool(ledger, model)
        cfg = cfg or stored
    return plan(samples, cfg or CurateConfig(), g=g, seed=seed, source=source, select=select)


def plan_selection(
    train_config: Path | None, model: str | None, selection: Mapping[str, Any] | None = None
) -> SelectionConfig:
    """The difficulty model and score `sieve plan`'s posterior picks with: those of the train
    recipe `sieve train` would use (`train_config`, its `--config`; else, where `model` is a
    model folder, the recipe for it; else a recipe's defaults), with `selection`'s fields
    (`--selection-model`, `--selection-score`) replacing them. A bad value is one SieveError
    line."""
    from pipeline.jobs.train.selection_settings import selection_config

    select = SelectionConfig()
    if train_config is not None or (model is not None and (Path(model) / "config.json").is_file()):
        from pipeline.jobs.train.settings import given_recipe, recipe_for  # torch: only when read

        recipe = given_recipe(train_config) if train_config else recipe_for(str(model))
        select = selection_config(recipe.settings)
    given = {k.removeprefix("selection_"): v for k, v in (selection or {}).items() if v is not None}
    try:
        return replace(select, **given)  # SelectionConfig checks the values
    except (TypeError, ValueError) as exc:
        raise SieveError(f"sieve plan: {exc}") from None
