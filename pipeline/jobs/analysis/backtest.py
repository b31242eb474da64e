"""Backtests of prompt-selection policies over samples already stored (`sieve backtest`).

Every policy is replayed on one pool (`pipeline.jobs.analysis.backtest_pool`: per prompt, its
stored samples in draw order), so every policy sees the same answers and none samples anything;
one that would need more samples of a prompt than the pool holds is refused (`NotEnoughSamples`).
The policies are the arms of `pipeline.jobs.analysis.backtest_arms` (`POLICIES`: uniform, DAPO's
dynamic sampling, GRESO's skip, SPEED-RL's screen-then-continue, pilot-then-commit, the
posterior that selects before rollout, Sieve's curation), named on the command line with their
parameters (`Spec`: `dapo:g=4,batch=16`; `DEFAULTS`).

"Informative" is Sieve's one rule (`pipeline.selection.group_stats`, i.e.
`grpo_core.advantages.is_uninformative`). `backtest` puts the arms in one table: rollouts,
informative groups, rollouts per informative group, and the recall / precision of the prompts
each trains on against the prompts whose pass rate over all stored samples lies in the band;
`plot` draws it, and `run_backtest` is the command: a Parquet pool or a ledger's samples.

Test: `.venv/bin/pytest tests/test_backtest.py tests/test_demo.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from grpo_core.validate import MAX_SEED
from pipeline.core.errors import SieveError, check_range
from pipeline.core.tomlconfig import first_error
from pipeline.jobs.analysis.backtest_arms import (
    Arm,
    dapo_arm,
    greso_arm,
    pilot_arm,
    posterior_arm,
    sieve_arm,
    speed_arm,
    uniform_arm,
)
from pipeline.jobs.analysis.backtest_pool import (
    NotEnoughSamples,
    ids,
    ledger_samples,
    pool_samples,
)
from pipeline.selection import CurateConfig, group_stats
from pipeline.selection.posterior import PosteriorConfig
from pipeline.store import Ledger

POLICIES = ("uniform", "dapo", "greso", "speed", "pilot", "posterior", "sieve")


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
