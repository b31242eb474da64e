"""The selection headline: matched updates, paired seeds, intervals (issue 45's protocol).

What it measures: at the same number of optimizer updates per *trained* rollout, with the same
schedules by update, the same pool, evaluation and seeds, which way of choosing a step's prompts
reaches a held-out accuracy with the fewest rollouts (every rollout sampled counted, those that
decided and did not train included). The earlier headline (real_curriculum.py) let arms differ
3-4x in updates, group size and schedules; this one does not.

The protocol:
- **Matched training.** Every update trains `batch_prompts` groups of `group_size` (64 rollouts
  by default); no arm trains a bigger or smaller batch. The learning rate is constant (no
  warm-up) and the KL β fixed, so the schedules are the same function of the update index for
  every arm. A step whose batch is all zero-variance trains nothing and is not an update
  (`empty_steps`). No step starts that could overrun the budget.
- **Settings.** `warm` (the headline): every arm starts from one checkpoint that already states
  its answers the way the verifier reads them, built by the uniform recipe for `warm_updates`
  updates on a pool of its own (seed 0, never a campaign seed); its cost is reported, charged to
  no arm; the cells' pass rates are measured again from it (`cell_prompts` x `cell_samples`
  per cell, every cell, its zone stored). `cold`: the base model.
- **Arms** (grpo_core.collect / grpo_core.select): `uniform` (8 prompts drawn uniformly per
  step); `dapo` (DAPO dynamic sampling: draw rounds of 8 until 8 informative groups; the dropped
  rollouts count and do not train; a batch the budget cannot fill trains nothing); `greso`
  (GRESO with refill: skip prompts by zero-variance streak, refill from further candidates);
  `mopps` (MoPPS-style Thompson selection from `candidates` per step, no extra rollouts);
  `sieve` (Sieve's difficulty model, pipeline/selection/posterior.py: each prompt's Beta
  posterior shrunk toward its cell's yield, evidence decaying with every update, Thompson draws
  from `candidates` per step, the batch with the largest learnability p(1 - p); no extra
  rollouts; the model learns only from the run's own training groups, like every other arm);
  `sieve_learning` (the same selection on the learning model, pipeline/selection/learning.py:
  evidence that moves with training, per-cell drift fitted on the run's own revisits, plus a
  start prior: per cell what the start weights were measured to pass before any arm ran, the
  warm start's train-split cell measurement, else the start evaluation's sampled accuracy per
  cell, `start_prior`).
- **Seeds.** A seed fixes the pool (train-split problems of the mix), every draw, and the
  trainer's seed; every arm gets the same. The evaluation's sampling seed is the same for
  every run.
- **Evaluation.** `per_level` held-out problems per cell (the scored count is reported);
  greedy only at the intermediate marks (budget x i / marks), greedy plus `samples` samples at
  T at the start and the end, per problem, so differences are paired over problems too.
- **Statistics** (`--summarise`, headline_stats.py): per arm, the paired difference to uniform
  of the final sampled and greedy accuracy, with a crossed bootstrap (blocks resampled, and one
  draw of held-out problems shared by every block of a replicate: the same problems recur in
  every block) and a t interval over blocks beside it; rollouts to three targets that favour
  neither arm (each block's start plus 1/3, 2/3 and all of uniform's seed-mean greedy gain),
  read from each run's isotonic (monotone) fit of its greedy curve, as geometric-mean ratios to
  uniform's rollouts in the same blocks; the paired area under the gain curve per rollout; the
  informative share the Sieve posterior expected, from its posterior predictive; curves
  against rollouts and against updates. benchmarks/power.py reads the same runs for the
  smallest effects a campaign of N seeds and H held-out problems can detect.

Resumable and seed-major: each arm x seed x setting writes `results/headline_runs/<setting>_
<arm>_s<seed>.json` (its accounting per step, its curve, its final per-problem scores) and its
weights, optimiser and selection state to `/tmp/sieve-headline/` at every eval mark; a stopped
run resumes there, or starts over where the weights are gone. The warm checkpoint lives in
/tmp too: a new machine builds it again, and each run records the hash of the weights it
started from (`start`), so a comparison pairs only runs that started from the same weights.

    nohup benchmarks/headline_driver.sh > /tmp/sieve-headline/driver.log 2>&1 &
    .venv-vllm/bin/python benchmarks/headline.py --summarise     # JSON + PNG

`--smoke`: the same code on the tiny built-in policy, hf backend, tiny budgets, in a temp folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

if __name__ == "__main__":  # before anything imports Prefect: the night arm runs its flows
    from pipeline.core.home import use_prefect_home

    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    use_prefect_home(Path("/tmp/sieve-headline/prefect"))  # keyed by the Prefect version

sys.path.insert(0, str(Path(__file__).parent))
from campaign_time import run_list
from headline_stats import Curve, compare_curves, paired_delta, run_curve, seed_bootstrap
from real_curriculum import Policy, atomic_write, held_out, load, reward_fn, verifier_version

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
STATE = Path("/tmp/sieve-headline")
MODEL = Path("/tmp/sieve-real-model/models/smollm2-135m")
MIX_FILE = ROOT / "data" / "configs" / "real_mix.toml"
USER_MIX_FILE = Path(__file__).parent / "user_mix.toml"  # the `user` setting's pool
ARMS = (
    "uniform", "dapo", "greso", "mopps", "sieve", "sieve_learning", "sieve_screen", "night",
    "second", "oracle",
)  # fmt: skip
SETTINGS = ("warm", "cold", "user")
ZONES = ((0.8, "always"), (0.05, "learnable"), (0.0, "never"))  # lower bounds, first match
TOP_P = 1.0
CELL_OF: dict[str, str] = {}  # problem_id -> "family level", filled by pool_items


@dataclass(frozen=True)
class Setup:
    budget: int = 2_048  # rollouts sampled per arm x seed, every one counted
    batch_prompts: int = 8  # groups per update: every update trains batch_prompts x group_size
    group_size: int = 8
    pool_size: int = 128  # train-split problems per seed: two epochs of uniform in the budget
    candidates: int = 64  # mopps: prompts Thompson-sampled per step (8x the batch)
    marks: int = 4  # greedy evaluations at budget x i / marks (the last one full)
    per_level: int = 16  # held-out problems asked per cell
    samples: int = 4  # held-out samples per problem at T, at the start and the end
    lr: float = 1e-5  # constant: no warm-up
    beta: float = 0.02  # fixed KL β
    temperature: float = 0.6
    max_new_tokens: int = 256
    backend: str = "vllm"
    prompt_format: str = "chat"
    warm_updates: int = 12  # the warm checkpoint: uniform updates from the base, seed 0's pool
    cell_prompts: int = 16  # the warm checkpoint's cell measurement: prompts per cell
    cell_samples: int = 8  # ... samples per prompt
    recipe: str = "real_train.toml"  # data/configs/: the GRPO recipe under the protocol's lr/β

    @property
    def per_update(self) -> int:
        return self.batch_prompts * self.group_size


# `--setting user`: the pool a user would bring (issue 63 point 4). Every family and level of the
# generator mix plus reasoning-gym cells (benchmarks/user_mix.toml, 62 cells chosen by rule, not
# by measuring the model), 2,048 train prompts per seed: the budget (256 groups) visits an eighth
# of it, well under one epoch. Held-out: 5 problems per cell (about 310, the size the power
# analysis asked for). The start is the warm checkpoint (built exactly as the `warm` setting's,
# on real_mix's seed-0 pool), its cells measured again on the user mix (6 prompts x 8 samples per
# cell: the oracle's knowledge and the pool's pass-rate histogram).
USER = Setup(pool_size=2_048, per_level=5, cell_prompts=6)
SMOKE = Setup(
    budget=96,
    batch_prompts=2,
    group_size=4,
    pool_size=12,
    candidates=8,
    marks=2,
    per_level=2,
    samples=2,
    lr=1e-3,
    max_new_tokens=6,
    backend="hf",
    prompt_format="raw",
    warm_updates=2,
    cell_prompts=2,
    cell_samples=2,
)
SMOKE_MIX = {"arith": [1, 2], "linear": [1]}
# `--policy tiny`: the tiny headline (issue 45 point 6) under the same protocol. The start is
# the bootstrapped tiny policy as given (`sieve bootstrap`, which `make demo` runs: its revision
# and held-out accuracy are recorded), the `cold` setting; the pool is the whole generator mix.
TINY = Setup(
    budget=49_152,  # 96 updates of 512: uniform's old run reached its final within 43 k
    batch_prompts=64,
    group_size=8,
    pool_size=2_048,
    candidates=512,
    marks=4,
    per_level=20,
    samples=8,
    lr=2e-4,
    temperature=1.0,
    max_new_tokens=16,
    backend="hf",
    prompt_format="raw",
    recipe="tiny_train.toml",
)
TINY_MODEL = ROOT / "data" / "models" / "tiny"


# ---------------------------------------------------------------- training settings


def grpo(setup: Setup, seed: int) -> Any:
    """real_train.toml's recipe with the protocol's schedules: constant lr, fixed β."""
    from pipeline.jobs.train.settings import load_settings
    from pipeline.jobs.train.trainee import for_device

    settings = load_settings(ROOT / "data" / "configs" / setup.recipe)
    cfg = settings.grpo_config(
        lr=setup.lr,
        lr_warmup_steps=0,
        beta_schedule="fixed",
        beta=setup.beta,
        total_steps=10 * setup.budget,  # the budget stops a run; the schedules are constant
        temperature=setup.temperature,
        seed=seed,
        max_new_tokens=setup.max_new_tokens,
        checkpoint_every=0,
    )
    return for_device(cfg, torch.device("cpu"))


def weights_hash(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().float().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the pool and the evaluation


def pool_items(setup: Setup, mix: dict[str, list[int]], pol: Policy, seed: int) -> list[Any]:
    """`pool_size` train-split problems of the mix for `seed` (seed 0: the warm checkpoint's);
    each item's `weight` is 1 and its cell ("family level") is in `cell_of`."""
    from grpo_core.trainer import Item
    from pipeline.problems import generate_mix

    frame = generate_mix(mix, setup.pool_size * 2, 10_000 + seed).filter(pl.col("split") == "train")
    frame = frame.sample(fraction=1.0, shuffle=True, seed=seed).head(setup.pool_size)
    prompts = pol.render(frame["question"].to_list())
    for pid, fam, lv in zip(frame["problem_id"], frame["family"], frame["level"], strict=True):
        CELL_OF[pid] = f"{fam} {lv}"
    return [
        Item(q, a, setup.group_size, key=p, verifier=v, params=pa)
        for q, a, p, v, pa in zip(
            prompts,
            frame["answer"],
            frame["problem_id"],
            frame["verifier"],
            frame["params"],
            strict=True,
        )
    ]


def evaluate(setup: Setup, pol: Policy, held: pl.DataFrame, full: bool) -> dict[str, Any]:
    """Greedy (and with `full`, `samples` samples at T) on the held-out set, per problem."""
    from pipeline.jobs.analysis.evaluate import EvalConfig, overall
    from pipeline.jobs.analysis.evaluate import evaluate as run_eval
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.store import Ledger

    temperature = setup.temperature if full else 0.0
    sampling = SamplingConfig(
        temperature=temperature, top_p=TOP_P, max_new_tokens=setup.max_new_tokens
    )
    cfg = EvalConfig(per_level=setup.per_level, samples=setup.samples, sampling=sampling, seed=0)
    qs = held["question"].to_list()
    prompts_of = dict(zip(qs, pol.render(qs), strict=True))
    began = time.perf_counter()
    with Ledger.memory() as ledger:
        table = run_eval(
            pol.engine, ledger, "eval", prompts_of, cfg, held, prompt_format=setup.prompt_format
        )
        per = ledger.sql(
            "SELECT r.problem_id, s.temperature = 0 AS greedy, "
            "avg(CASE WHEN r.correct THEN 1.0 ELSE 0.0 END) AS acc "
            "FROM rollouts r JOIN sampling_runs s USING (run_id) GROUP BY ALL"
        )
        right = ledger.sql(
            "SELECT p.family, p.level, p.question, p.answer, r.completion FROM rollouts r "
            "JOIN problems p USING (problem_id) WHERE r.correct "
            "QUALIFY row_number() OVER (PARTITION BY r.problem_id ORDER BY hash(r.completion)) = 1 "
            "ORDER BY hash(r.problem_id) LIMIT 20"
        ).to_dicts()
    ids = sorted(held["problem_id"].to_list())
    by = {(r["problem_id"], r["greedy"]): r["acc"] for r in per.to_dicts()}
    return {
        "greedy": overall(table, "greedy"),
        "sampled": overall(table, "sampled") if full else None,
        "scored": per.filter(pl.col("greedy"))["problem_id"].n_unique(),
        "per_problem_greedy": [by.get((i, True)) for i in ids],
        "per_problem_sampled": [by.get((i, False)) for i in ids] if full else None,
        "by_level": table.select(
            "family", "level", "problems", "greedy", *(["sampled"] if full else [])
        ).to_dicts(),
        "seconds": time.perf_counter() - began,
        "correct": right,
    }


def measure_cells(setup: Setup, pol: Policy, mix: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Every cell's pass rate from the current weights: `cell_prompts` train-split prompts (a
    seed of their own) x `cell_samples` samples at the training temperature; zone and the share
    of prompts whose group disagreed (informative at this G)."""
    from pipeline.jobs.curate.rollouts import RunInfo, record_run
    from pipeline.problems import generate_cells
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.store import Ledger

    counts = [(f, lv, setup.cell_prompts * 2) for f, lvs in mix.items() for lv in lvs]
    frame = generate_cells(counts, 77_777).filter(pl.col("split") == "train")
    frame = frame.group_by("family", "level", maintain_order=True).head(setup.cell_prompts)
    sampling = SamplingConfig(
        temperature=setup.temperature, top_p=TOP_P, max_new_tokens=setup.max_new_tokens
    )
    params = sampling.params(setup.prompt_format, 0, greedy=False)
    groups = pol.engine.sample(pol.render(frame["question"].to_list()), setup.cell_samples, params)
    with Ledger.memory() as ledger:
        ledger.write("problems", frame)
        info = RunInfo(
            "screen",
            pol.engine.model_name,
            "cells",
            pol.engine.backend,
            setup.cell_samples,
            params,
            prompt_format=setup.prompt_format,
        )
        record_run(ledger, info, frame, groups)
        rows = ledger.sql(
            "WITH g AS (SELECT p.family, p.level, r.problem_id, "
            "sum(CASE WHEN r.correct THEN 1 ELSE 0 END) AS k, count(*) AS n "
            "FROM rollouts r JOIN problems p USING (problem_id) GROUP BY ALL) "
            "SELECT family, level, count(*) AS prompts, sum(k) / sum(n) AS pass_rate, "
            "avg(CASE WHEN k > 0 AND k < n THEN 1.0 ELSE 0.0 END) AS informative "
            "FROM g GROUP BY ALL ORDER BY family, level"
        ).to_dicts()
    for r in rows:
        r["zone"] = next(z for lo, z in ZONES if r["pass_rate"] >= lo)
    return rows


# ---------------------------------------------------------------- one arm x seed


def progress_path(runs_dir: Path, setting: str, arm: str, seed: int) -> Path:
    return runs_dir / f"{setting}_{arm}_s{seed}.json"


def fresh(setting: str, arm: str, seed: int, setup: Setup, start: str) -> dict[str, Any]:
    return {
        "setting": setting,
        "arm": arm,
        "seed": seed,
        "setup": asdict(setup),
        "start": start,
        "verifier": verifier_version(),
        "steps": [],
        "curve": [],
        "final": None,
        "saved": None,
        "state": {},
        "done": False,
        "seconds": 0.0,
        "resumed": 0,
        "restarts": 0,
    }


def code_commit() -> str | None:
    """The commit of the checkout this process runs from (None outside git)."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def finished(path: Path) -> bool:
    if not path.is_file():
        return False
    p = json.loads(path.read_text())
    return bool(p["done"]) and p.get("verifier") == verifier_version()


def totals(steps: list[dict[str, Any]]) -> dict[str, int]:
    """Rollouts sampled, trained and updates over `steps`: a step that made no update trained
    nothing, whatever groups it sampled (they decided and did not train)."""
    return {
        "sampled": sum(s["sampled"] for s in steps),
        "trained": sum(s["trained"] for s in steps if s["update"]),
        "updates": sum(bool(s["update"]) for s in steps),
    }


def run_arm(
    setup: Setup,
    setting: str,
    arm: str,
    seed: int,
    pol: Policy,
    start_weights: dict[str, torch.Tensor],
    start: dict[str, Any],
    mix: dict[str, list[int]],
    held: pl.DataFrame,
    runs_dir: Path,
    state_dir: Path,
    final_eval: bool = True,
) -> dict[str, Any]:
    """One arm x seed from `start_weights` (hash `start["hash"]`, evaluated as `start`);
    `final_eval` False (the warm checkpoint's own run) skips the closing evaluation."""
    from grpo_core import checkpoint as ckpt
    from grpo_core.collect import dynamic_sampling, plain
    from grpo_core.history import ZeroVarSkip
    from grpo_core.seeds import derive_seed, seed_torch
    from grpo_core.select import (
        BetaPosterior,
        greso_refill,
        informative_groups,
        ranked_select,
        thompson_select,
    )
    from grpo_core.trainer import Hooks, Trainer
    from pipeline.selection.posterior import (
        Observations,
        PosteriorConfig,
        ScreenConfig,
        SelectionConfig,
        posterior_screen,
        posterior_select,
    )

    path = progress_path(runs_dir, setting, arm, seed)
    weights = state_dir / f"{setting}_{arm}_s{seed}"
    p = fresh(setting, arm, seed, setup, start["hash"])
    if path.is_file():
        old = json.loads(path.read_text())
        if old["setup"] != asdict(setup):
            raise SystemExit(f"{path} was measured on another setup: move it away to start over")
        if old["done"] and old.get("verifier") == verifier_version():
            return old
        why = (
            "another verifier"
            if old.get("verifier") != verifier_version()
            else "other start weights"
            if old["start"] != start["hash"]
            else "its weights are gone"
            if old["saved"] is not None and not weights.is_dir()
            else None
        )
        if why is None:
            p = {**old, "resumed": old["resumed"] + 1}
        else:
            print(f"{path.name}: {why}, starting over", flush=True)
            p["restarts"] = old.get("restarts", 0) + 1
    if p["saved"] is None:
        shutil.rmtree(weights, ignore_errors=True)
    commits = p.setdefault("commits", [])  # the code each process of this run ran (resumes add)
    here = code_commit()
    if here and (not commits or commits[-1] != here):
        commits.append(here)
    print(f"{setting} {arm} s{seed}" + (" (resumed)" if p["resumed"] else ""), flush=True)
    began = time.perf_counter() - p["seconds"]
    if not p["curve"]:
        p["curve"] = [
            {"rollouts": 0, "updates": 0, "greedy": start["greedy"], "sampled": start["sampled"]}
        ]
    else:  # the points after the last saved state are measured again
        done = totals(p["steps"][: p["saved"]] if p["saved"] is not None else [])
        p["curve"] = [c for c in p["curve"] if c["rollouts"] <= done["sampled"]]
    if p["saved"] is not None:
        p["steps"] = p["steps"][: p["saved"]]
    else:
        p["steps"], p["state"] = [], {}

    pol.model.load_state_dict(start_weights)  # the KL reference is the start, for every arm
    pol.sync()
    pool = pool_items(setup, mix, pol, seed)
    n = setup.batch_prompts

    def draw(step: int, round_: int, k: int = n) -> list[Any]:
        rng = np.random.default_rng(derive_seed(seed, "draw", step, round_))
        return [pool[int(i)] for i in rng.choice(len(pool), min(k, len(pool)), replace=False)]

    skip = ZeroVarSkip(streaks=dict(p["state"].get("streaks", {})), seed=seed)
    posterior = BetaPosterior()
    posterior.load(p["state"].get("posterior", {}))
    seen = Observations.load(p["state"].get("observations", []))
    left = lambda: setup.budget - totals(p["steps"])["sampled"]  # noqa: E731
    if arm == "uniform":
        inner: Any = plain
    elif arm == "dapo":
        inner = lambda t, st: dynamic_sampling(  # noqa: E731
            draw, n, max(1, left() // setup.per_update), full=True
        )(t, st)
    elif arm == "greso":
        inner = greso_refill(draw, skip, n)
    elif arm == "mopps":
        inner = thompson_select(lambda st, r: draw(st, r, setup.candidates), posterior, n, seed)
    elif arm in ("sieve", "sieve_learning"):
        # sieve: Sieve's default, the ledger posterior (cell prior, decay, cap); sieve_learning:
        # the learning model with the start's cell prior, Thompson draws as well
        learning = arm == "sieve_learning"
        inner = posterior_select(
            lambda st, r: draw(st, r, setup.candidates),
            CELL_OF,
            seen,
            n,
            seed,
            PosteriorConfig(candidates=setup.candidates // n),
            select=SelectionConfig(model="learning") if learning else SelectionConfig(),
            prior=start_prior(start, setup.cell_samples, setup.samples) if learning else None,
        )
    elif arm == "sieve_screen":  # the same pick, then two stages inside the step (issue 46.3)
        g = setup.group_size
        inner = lambda t, st: posterior_screen(  # noqa: E731
            lambda st, r: draw(st, r, setup.candidates),
            CELL_OF,
            seen,
            n,
            seed,
            PosteriorConfig(candidates=setup.candidates // n),
            # straight, continued and filled groups all end at the arm's G: 64 trained per
            # update; besides them the one screening round spends at most n x G/2 that does not
            # train, and none when the budget left has no room for it (no overrun)
            ScreenConfig(
                screen_g=max(2, g // 2),
                g_max=g,
                rounds=min(1, (left() - setup.per_update) // (n * max(2, g // 2))),
            ),
            full=True,
        )(t, st)
    elif arm == "oracle":  # knows every cell's measured P(informative) at the start, uncharged
        known = oracle_scores(start)
        inner = ranked_select(
            lambda st, r: draw(st, r, setup.candidates),
            lambda it: known.get(CELL_OF[it.key], 0.0),
            n,
            seed,
        )
    else:
        raise SystemExit(f"unknown arm {arm!r}: choose from {', '.join(ARMS)}")
    last: dict[str, Any] = {}

    def collector(t: Any, step: int) -> Any:
        c = inner(t, step)
        trained = [(it, g) for it, g in zip(c.items, c.groups, strict=True) if g]
        last.update(
            sampled=int(c.rollouts),
            trained=sum(len(g) for _, g in trained),
            groups=len(trained),
            informative=informative_groups(c, t.cfg.zero_var_tol) if trained else 0,
            keys=[it.key for it, _ in trained],
        )
        return c

    seed_torch(seed)
    trainer = Trainer(
        pol.model,
        pol.tok,
        pol.group,
        reward_fn(setup),
        lambda st: draw(st, 0),
        grpo(setup, seed),
        weights / "ckpt",
        collector=collector,
        hooks=Hooks(warning=lambda m: None),
    )
    if p["saved"] is not None:
        trainer.resume(ckpt.step_dir(weights / "ckpt", p["saved"]))
        pol.sync()
    marks = [round(setup.budget * (i + 1) / setup.marks) for i in range(setup.marks - 1)]
    while left() >= setup.per_update:
        out = trainer.run_step(trainer.step)
        trainer.step += 1
        m = out.metrics
        update = m.get("trained_samples", 0.0) > 0
        p["steps"].append(
            {
                "sampled": last["sampled"],
                "trained": last["trained"] if update else 0,  # a step with no update trained none
                "groups": last["groups"],
                "informative": last["informative"],
                "update": update,
                "keys": last["keys"],
                "unfilled": bool(m.get("unfilled", 0.0)),
                "skipped": int(m.get("skipped_zero_var", 0.0)),
                # the batch's posterior predictive P(informative) (runs recorded before it
                # kept `predicted_informative`: the same read at the posterior mean)
                "expected_informative": m.get("predicted_informative"),
                "seconds": round(
                    m.get("time_sample", 0.0)
                    + m.get("time_score", 0.0)
                    + m.get("time_update", 0.0),
                    2,
                ),
                "load_1m": round(os.getloadavg()[0], 2),
            }
        )
        t = totals(p["steps"])
        print(
            f"    {setting} {arm} s{seed} step {trainer.step}: {t['sampled']} sampled, "
            f"{t['updates']} updates, {time.perf_counter() - began:.0f} s, load "
            f"{p['steps'][-1]['load_1m']}",
            flush=True,
        )
        passed = sum(mk <= t["sampled"] for mk in marks)
        if passed > len(p["curve"]) - 1 and left() >= setup.per_update:
            ev = evaluate(setup, pol, held, full=False)
            p["curve"].append(
                {
                    "rollouts": t["sampled"],
                    "updates": t["updates"],
                    "greedy": ev["greedy"],
                    "sampled": None,
                    # the crossed bootstrap resamples held-out problems at every mark
                    "per_problem_greedy": ev["per_problem_greedy"],
                }
            )
            print(
                f"    {setting} {arm} s{seed} {t['sampled']} rollouts: greedy {ev['greedy']:.4f}",
                flush=True,
            )
            trainer.save_checkpoint()
            ckpt.prune(weights / "ckpt", 1)
            p["saved"] = len(p["steps"])
            p["state"] = {
                "streaks": dict(skip.streaks),
                "posterior": posterior.state(),
                "observations": seen.state(),
            }
            p["seconds"] = time.perf_counter() - began
            atomic_write(path, p)
    t = totals(p["steps"])
    if final_eval:
        ev = evaluate(setup, pol, held, full=True)
        p["curve"].append(
            {
                "rollouts": t["sampled"],
                "updates": t["updates"],
                "greedy": ev["greedy"],
                "sampled": ev["sampled"],
            }
        )
        p["final"] = ev
    p["state"] = {  # the selection state at the end too (the last checkpoint's is a mark behind)
        "streaks": dict(skip.streaks),
        "posterior": posterior.state(),
        "observations": seen.state(),
    }
    p["done"] = True
    p["seconds"] = time.perf_counter() - began
    atomic_write(path, p)
    print(
        f"    {setting} {arm} s{seed} done: {t['updates']} updates, {p['seconds']:.0f} s",
        flush=True,
    )
    shutil.rmtree(weights, ignore_errors=True)  # a finished run never resumes
    return p


# ---------------------------------------------------------------- the product's own night


NIGHT_CANDIDATES = 8  # a night's curation generates this many x the batch's prompts
NIGHT_SCREEN_G = 4  # its screen (unknown cells only): decides, does not train
NIGHT_UPDATES = 12  # updates a night trains (the last night: what the budget has left)
NIGHT_START = "2026-01-01"  # the first night's date (each night's curation seed follows it)
SECOND_START = "2029-01-01"  # the second run's nights: dates (and curation seeds) of their own


def night_settings(
    setup: Setup,
    seed: int,
    updates: int,
    candidates: int,
    mix: dict[str, list[int]],
    replay: bool = False,
) -> tuple[Any, Any]:
    """(CurateConfig, TrainSettings) of the `night` arm: `sieve loop` as a user would set it to
    train on what the ledger knows (issue 46 point 4) under the protocol. Curation refreshes the
    difficulty model (screen = "unknown": only cells the lineage has no evidence of are
    screened, with NIGHT_SCREEN_G samples; the rest enter by their cell's posterior); every
    training group has the arm's G (stage1_g = max_group_size = G); training picks each batch
    with the posterior before sampling (selection = "posterior", 8x candidates), carries AdamW
    and the schedules over the nights (carry_over) at the protocol's constant lr and fixed β,
    and `rollouts_per_step` = the batch, so an update trains batch_prompts x G rollouts (a night
    that kept fewer prompts than a batch gives its best-ranked a second group). `replay` (the
    `user` setting: Sieve as a user runs it): a kept prompt's first pick trains on its stored
    curation samples (its latest G), so the rollouts curation spent also train."""
    from pipeline.jobs.train.settings import TrainSettings
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.selection import CurateConfig, load_curate_config

    g = setup.group_size
    # the curation recipe a user of this policy has (the tiny policy's bands; CurateConfig's
    # defaults for a chat model), under the protocol's G, sampling and budget
    base = (
        load_curate_config(ROOT / "data" / "configs" / "tiny_curate.toml")
        if setup.recipe == "tiny_train.toml"
        else CurateConfig()
    )
    curate = base.model_copy(
        update=dict(
            n_candidates=candidates,
            mix={f: ",".join(map(str, lv)) for f, lv in mix.items()},
            seed=1_000 * seed,
            screen="unknown",
            screen_g=NIGHT_SCREEN_G,
            refine_g=g,
            stage1_g=g,
            max_group_size=g,
            sampling=SamplingConfig(
                temperature=setup.temperature, top_p=TOP_P, max_new_tokens=setup.max_new_tokens
            ),
            allocate_by_history=False,
        )
    )
    curate = CurateConfig.model_validate(curate.model_dump())  # the copy's fields checked
    cfg = grpo(setup, seed)
    knobs = {
        k: getattr(cfg, k)
        for k in ("lr", "lr_warmup_steps", "beta_schedule", "beta", "temperature", "seed",
                  "max_new_tokens")
    }  # fmt: skip
    train = TrainSettings(
        grpo={**knobs, "total_steps": updates, "checkpoint_every": updates},
        rollouts_per_step=setup.per_update,
        eval_per_level=1,
        eval_samples=1,
        tensorboard=False,
        selection="posterior",
        carry_over=True,
        replay_curation=replay,
    )
    return curate, train


def night_steps(ledger: Any, train_id: str) -> list[dict[str, Any]]:
    """One protocol step record per training step of `train_id`, read from the ledger."""
    m = ledger.sql(
        "SELECT step, name, value FROM train_metrics WHERE train_id = $t "
        "AND name IN ('rollouts', 'trained_samples', 'predicted_informative', 'time_sample', "
        "'time_score', 'time_update')",
        {"t": train_id},
    )
    by: dict[int, dict[str, float]] = {}
    for step, name, value in m.iter_rows():
        by.setdefault(int(step), {})[name] = float(value)
    g = ledger.sql(
        "SELECT step, list(problem_id ORDER BY problem_id) AS keys, sum(n_samples) AS trained, "
        "count(*) AS groups, sum(informative::INT) AS informative FROM train_group_stats "
        "WHERE train_id = $t AND NOT skipped GROUP BY step",
        {"t": train_id},
    )
    groups = {int(r["step"]): r for r in g.iter_rows(named=True)}
    out = []
    for step in sorted(by):
        mm, gg = by[step], groups.get(step, {})
        out.append(
            {
                "sampled": int(mm.get("rollouts", 0)),
                "trained": int(gg.get("trained") or 0),
                "groups": int(gg.get("groups") or 0),
                "informative": int(gg.get("informative") or 0),
                "update": mm.get("trained_samples", 0.0) > 0,
                "keys": list(gg.get("keys") or []),
                "unfilled": False,
                "skipped": 0,
                "expected_informative": mm.get("predicted_informative"),
                "seconds": round(
                    mm.get("time_sample", 0.0) + mm.get("time_score", 0.0)
                    + mm.get("time_update", 0.0), 2
                ),
                "load_1m": round(os.getloadavg()[0], 2),
            }
        )  # fmt: skip
    return out


def run_night(
    setup: Setup,
    setting: str,
    seed: int,
    pol: Policy,
    start_weights: dict[str, torch.Tensor],
    start: dict[str, Any],
    mix: dict[str, list[int]],
    held: pl.DataFrame,
    runs_dir: Path,
    state_dir: Path,
    model_dir: Path,
    arm: str = "night",
) -> dict[str, Any]:
    """The `night` arm: the product's nightly loop (`flows.loop.loop`, the code `sieve loop`
    runs) on a home of its own, one night per call, from the run's start weights, until the
    budget is spent. Each night's curation rollouts are a record of their own (sampled, none
    trained: they decided); each training step is one record read from the ledger. After a
    night that passed an evaluation mark the night's weights are evaluated as every arm's are.
    Resumable: a stopped run continues with the next unfinished night of its home (the loop
    skips finished nights, and a crashed one resumes from its own checkpoints).

    `second` (Sieve's second run): the same, from the same start weights, on a home whose
    ledger already holds another seed's finished night run (its partner: seeds pair 1-2, 3-4,
    ...; kept by that run in `<state>/ledgers/`), charged nothing for it: the first night is
    `sieve loop --fresh` (a new lineage from the start folder itself, reading the groups of
    the runs from the same weights), on dates of its own."""
    from datetime import date, timedelta

    from flows.cli.summary import night_line
    from flows.loop import loop
    from pipeline.jobs.train.lineage import nightly_model
    from pipeline.store import Ledger
    from pipeline.store.ids import curation_runs

    partner = seed + 1 if seed % 2 else seed - 1
    ledger_kept = (
        state_dir / "ledgers" / f"{setting}_night_s{partner if arm == 'second' else seed}.duckdb"
    )
    if arm == "second" and not ledger_kept.is_file():
        raise SystemExit(
            f"{setting} second s{seed} reads the finished night run of seed {partner}: "
            f"{ledger_kept} is missing (run {setting}:night:{partner} first)"
        )
    path = progress_path(runs_dir, setting, arm, seed)
    folder = state_dir / f"{setting}_{arm}_s{seed}"
    home, start_dir = folder / "home", folder / "home" / "models" / "start"
    p = fresh(setting, arm, seed, setup, start["hash"])
    if path.is_file():
        old = json.loads(path.read_text())
        if old["done"] and old.get("verifier") == verifier_version():
            return old
        if (
            old.get("verifier") == verifier_version()
            and old["start"] == start["hash"]
            and (home / "sieve.duckdb").is_file()
        ):
            p = {**old, "resumed": old["resumed"] + 1}
        else:
            print(f"{path.name}: starting over", flush=True)
            p["restarts"] = old.get("restarts", 0) + 1
    if not p["resumed"]:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(model_dir, start_dir)
        pol.model.load_state_dict(start_weights)
        pol.model.save_pretrained(start_dir)  # the run's start weights, in the home
        if arm == "second":  # what the partner's run left in its ledger, charged nothing
            shutil.copyfile(ledger_kept, home / "sieve.duckdb")
            p["partner"] = {"seed": partner, "ledger_sha256": file_hash(ledger_kept)}
    commits = p.setdefault("commits", [])
    here = code_commit()
    if here and (not commits or commits[-1] != here):
        commits.append(here)
    print(f"{setting} {arm} s{seed}" + (" (resumed)" if p["resumed"] else ""), flush=True)
    began = time.perf_counter() - p["seconds"]
    p["curve"] = p["curve"] or [
        {"rollouts": 0, "updates": 0, "greedy": start["greedy"], "sampled": start["sampled"]}
    ]
    p.setdefault("nights", [])
    marks = [round(setup.budget * (i + 1) / setup.marks) for i in range(setup.marks - 1)]
    most = NIGHT_SCREEN_G + setup.group_size  # the most one candidate's curation can cost
    first = date.fromisoformat(NIGHT_START if arm == "night" else SECOND_START)
    while True:  # no night may overrun: its curation is costed as if every candidate refined
        left = setup.budget - totals(p["steps"])["sampled"]
        candidates = min(NIGHT_CANDIDATES * setup.batch_prompts, (left - setup.per_update) // most)
        updates = min(NIGHT_UPDATES, (left - candidates * most) // setup.per_update)
        if candidates < setup.batch_prompts or updates < 1:
            break
        night = first + timedelta(days=len(p["nights"]))
        cur_cfg, train = night_settings(
            setup, seed, updates, candidates, mix, replay=setting == "user"
        )
        result = loop(
            home, 1, cur_cfg, train, night,
            lambda i, summary: print(f"    {night_line(i, summary)}", flush=True),
            model=str(start_dir), backend=setup.backend,
            fresh=arm == "second" and not p["nights"],
        )[0]  # fmt: skip
        done = result.get("done")  # finished before a stop, its record not yet written
        cid = done["curriculum_id"] if done else result["curate"]["curriculum_id"]
        tid = done["train_id"] if done else (result.get("train") or {}).get("train_id")
        with Ledger.open(home, read_only=True) as ledger:
            spent = ledger.sql(
                "SELECT count(*) FROM rollouts WHERE list_contains($runs, run_id)",
                {"runs": list(curation_runs(cid))},
            ).item()
            kept = dict(
                ledger.sql(
                    "SELECT reason, count(*) FROM curriculum_items WHERE curriculum_id = $c "
                    "GROUP BY reason ORDER BY reason",
                    {"c": cid},
                ).rows()
            )
            steps = [
                {
                    "sampled": spent, "trained": 0, "groups": 0, "informative": 0,
                    "update": False, "keys": [], "unfilled": False, "skipped": 0,
                    "expected_informative": None, "seconds": 0.0,
                    "load_1m": round(os.getloadavg()[0], 2), "curation": True,
                }
            ]  # fmt: skip
            if tid is not None:
                steps += night_steps(ledger, tid)
            weights, _ = nightly_model(ledger, str(start_dir), home)
        p["steps"] += steps
        p["nights"].append(
            {
                "night": result["night"],
                "model": Path(result.get("model") or "").name or None,  # what it started from
                "curation_rollouts": spent,
                "kept": sum(kept.values()),
                "kept_by_reason": kept,
                "updates": sum(bool(s["update"]) for s in steps),
            }
        )
        from transformers import AutoModelForCausalLM

        now = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)
        pol.model.load_state_dict(now.state_dict())
        pol.sync()
        t = totals(p["steps"])
        print(
            f"    {setting} {arm} s{seed} night {len(p['nights'])}: {t['sampled']} sampled, "
            f"{t['updates']} updates, {time.perf_counter() - began:.0f} s",
            flush=True,
        )
        passed = sum(mk <= t["sampled"] for mk in marks)
        if passed > len(p["curve"]) - 1:
            ev = evaluate(setup, pol, held, full=False)
            p["curve"].append(
                {"rollouts": t["sampled"], "updates": t["updates"], "greedy": ev["greedy"],
                 "sampled": None, "per_problem_greedy": ev["per_problem_greedy"]}
            )  # fmt: skip
        p["saved"] = len(p["steps"])
        p["seconds"] = time.perf_counter() - began
        atomic_write(path, p)
    t = totals(p["steps"])
    ev = evaluate(setup, pol, held, full=True)
    p["curve"].append(
        {"rollouts": t["sampled"], "updates": t["updates"], "greedy": ev["greedy"],
         "sampled": ev["sampled"]}
    )  # fmt: skip
    p["final"], p["done"] = ev, True
    p["seconds"] = time.perf_counter() - began
    atomic_write(path, p)
    print(f"    {setting} {arm} s{seed} done: {t['updates']} updates, {p['seconds']:.0f} s")
    if arm == "night":  # its ledger, for the second run that pairs with this seed
        with Ledger.open(home) as ledger:  # every write in the database file, none in a WAL
            ledger.run("CHECKPOINT")
        ledger_kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(home / "sieve.duckdb", ledger_kept.with_suffix(".tmp"))
        ledger_kept.with_suffix(".tmp").replace(ledger_kept)
    shutil.rmtree(folder, ignore_errors=True)
    return p


def file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- the start weights


def start_point(
    setup: Setup,
    setting: str,
    pol: Policy,
    base: dict[str, torch.Tensor],
    mix: dict[str, list[int]],
    held: pl.DataFrame,
    runs_dir: Path,
    state_dir: Path,
    model_dir: Path | None = None,
    warm_mix: dict[str, list[int]] | None = None,
    warm_setup: Setup | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The setting's start weights and their record (hash, evaluation, cells, cost), cached:
    the record under results (it outlives the machine), the warm weights under `state_dir`.
    The `user` setting starts from the same warm weights: built (if missing) on `warm_mix` under
    `warm_setup` (the `warm` setting's), its record and cells measured on the user's mix."""
    pol.model.load_state_dict(base)
    pol.sync()
    from pipeline.policy.model import folder_revision

    if setting in ("warm", "user"):
        folder = state_dir / "warm"
        if not (folder / "config.json").is_file():
            print("warm: building the shared checkpoint (uniform, seed 0's pool)", flush=True)
            began = time.perf_counter()
            built = warm_setup or setup
            wsetup = replace(built, budget=built.warm_updates * built.per_update, marks=1)
            wrun = run_arm(
                wsetup,
                "warmup",
                "uniform",
                0,
                pol,
                base,
                {"hash": "base", "greedy": None, "sampled": None},
                warm_mix or mix,
                held,
                runs_dir / "warmup",
                state_dir,
                final_eval=False,
            )
            tmp = folder.with_name("warm.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            pol.model.save_pretrained(tmp)
            (tmp / "cost.json").write_text(
                json.dumps(
                    {
                        "updates": totals(wrun["steps"])["updates"],
                        "rollouts": totals(wrun["steps"])["sampled"],
                        "seconds": time.perf_counter() - began,
                    }
                )
            )
            tmp.rename(folder)
            shutil.rmtree(runs_dir / "warmup", ignore_errors=True)  # the cost is in the record
        from transformers import AutoModelForCausalLM

        warm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        pol.model.load_state_dict(warm.state_dict())
        pol.sync()
        cost = json.loads((folder / "cost.json").read_text())
    else:
        cost = None
    digest = weights_hash(pol.model)
    record_path = runs_dir / f"start_{setting}_{digest}.json"
    old = json.loads(record_path.read_text()) if record_path.is_file() else None
    if old is not None and old.get("verifier") == verifier_version():
        record = old
    else:  # none yet, or scored under another verifier than the runs will be: score it again
        ev = evaluate(setup, pol, held, full=True)
        record = {
            "setting": setting,
            "hash": digest,
            "verifier": verifier_version(),
            "greedy": ev["greedy"],
            "sampled": ev["sampled"],
            "scored": ev["scored"],
            "per_problem_greedy": ev["per_problem_greedy"],
            "per_problem_sampled": ev["per_problem_sampled"],
            "by_level": ev["by_level"],
            "eval_seconds": ev["seconds"],
            "cost": cost,
            "model_revision": folder_revision(model_dir) if model_dir is not None else None,
            "cells": measure_cells(setup, pol, mix) if setting in ("warm", "user") else None,
        }
        atomic_write(record_path, record)
    print(
        f"{setting} start {digest}: greedy {record['greedy']:.4f} sampled "
        f"{record['sampled']:.4f} on {record['scored']} problems",
        flush=True,
    )
    return {k: v.detach().clone() for k, v in pol.model.state_dict().items()}, record


def oracle_scores(start: dict[str, Any]) -> dict[str, float]:
    """The `oracle` arm's knowledge: per cell ("family level"), the share of the start's measured
    prompts whose group of `cell_samples` disagreed (P(informative) at G, measured on the train
    split before any arm ran). The ceiling of what cell-level knowledge buys: no arm pays for it,
    and the oracle learns nothing from its own groups."""
    if not start.get("cells"):
        raise SystemExit("the oracle arm needs the start's cell measurement (settings warm, user)")
    return {f"{c['family']} {c['level']}": float(c["informative"]) for c in start["cells"]}


def start_prior(start: dict[str, Any], cell_samples: int, samples: int) -> Any:
    """The `sieve_learning` arm's start prior (a `CellPrior`, None without a measurement): per
    cell, k of n samples the start weights were measured to pass before any arm ran. The warm
    start's train-split cell measurement (`cells`: prompts x `cell_samples` per cell) where the
    record has one, else the start evaluation's sampled accuracy per held-out cell (`by_level`:
    problems x `samples`). benchmarks/forecast.py scores the same prior on recorded runs."""
    from pipeline.selection.posterior import CellPrior

    if start.get("cells"):
        n = cell_samples
        return CellPrior(
            {f"{c['family']} {c['level']}": (c["pass_rate"] * c["prompts"] * n, c["prompts"] * n)
             for c in start["cells"]}
        )  # fmt: skip
    rows = [c for c in start.get("by_level") or [] if c.get("sampled") is not None]
    if not rows:
        return None
    n = samples
    return CellPrior(
        {f"{c['family']} {c['level']}": (c["sampled"] * c["problems"] * n, c["problems"] * n)
         for c in rows}
    )  # fmt: skip


# ---------------------------------------------------------------- statistics


def expected_informative(alpha: np.ndarray, beta: np.ndarray, g: int) -> np.ndarray:
    """The chance that a group of g is informative (not all alike) when p ~ Beta(α, β): the
    posterior predictive (Beta-binomial) 1 − E[p^g] − E[(1 − p)^g], with E[p^g] = Π_{i<g}
    (α + i) / (α + β + i). At the posterior mean m, 1 − m^g − (1 − m)^g ignores the spread of p
    and is larger (m^g ≤ E[p^g], Jensen). The product's `informative_probability`."""
    from pipeline.selection.stats import informative_probability

    return informative_probability(alpha, beta, np.full(len(alpha), g))


def predictive_steps(r: dict[str, Any]) -> list[float | None] | None:
    """Per step of a Sieve run (`posterior_select`), the informative share its posterior
    expected of the batch, from the posterior predictive: as the run recorded it
    (`expected_informative`; None for the run when no step has one), or, for a run that
    recorded the share at the posterior mean only (`predicted_informative`, the static model's
    `sieve` arm before the predictive was recorded), rebuilt from the observations the run
    keeps: at step i the posterior is a function of the groups observed before update i. None
    for a step past the last observation kept (runs that saved them only with their last
    checkpoint), and None for the run when the rebuilt posterior's mean does not give the share
    the run recorded at the mean (a posterior configured otherwise than the defaults)."""
    from pipeline.selection.posterior import OBSERVATION_SCHEMA, PosteriorConfig, prompt_posterior

    if any("expected_informative" in s for s in r["steps"]):
        got = [s.get("expected_informative") for s in r["steps"]]
        return got if any(x is not None for x in got) else None
    kept = (r.get("state") or {}).get("observations")
    if r.get("arm") != "sieve" or not kept:
        return None
    obs = pl.DataFrame([tuple(o) for o in kept], schema=OBSERVATION_SCHEMA, orient="row")
    cell = dict(zip(obs["problem_id"], obs["cell"], strict=True))
    g = int(r["setup"]["group_size"])
    covered = int(obs["update"].max()) + 1  # every step before it observed all its groups
    out: list[float | None] = []
    for i, s in enumerate(r["steps"]):
        recorded = s.get("predicted_informative")
        if i >= covered or recorded is None or not s["keys"]:
            out.append(None)
            continue
        prompts = pl.DataFrame({"problem_id": s["keys"], "cell": [cell[k] for k in s["keys"]]})
        post = prompt_posterior(obs.filter(pl.col("update") < i), prompts, PosteriorConfig(), i)
        a, b = post["alpha"].to_numpy(), post["beta"].to_numpy()
        m = a / (a + b)
        if abs(float(np.mean(1.0 - m**g - (1.0 - m) ** g)) - recorded) > 1e-9:
            return None
        out.append(float(expected_informative(a, b, g).mean()))
    return out


def run_row(r: dict[str, Any]) -> dict[str, Any]:
    """One run's accounting: what it sampled, trained, decided and learnt."""
    steps = r["steps"]
    t = totals(steps)
    upd = [s for s in steps if s["update"]]
    return {
        "arm": r["arm"],
        "seed": r["seed"],
        "start": r["start"],
        "updates": t["updates"],
        "empty_steps": sum(not s["update"] for s in steps),
        "rollouts_sampled": t["sampled"],
        "rollouts_trained": t["trained"],
        "rollouts_decided_not_trained": t["sampled"] - t["trained"],
        "trained_per_update": (t["trained"] / t["updates"]) if t["updates"] else None,
        "informative_share_per_update": (
            float(np.mean([s["informative"] / s["groups"] for s in upd])) if upd else None
        ),
        "distinct_prompts_trained": len({k for s in steps for k in s["keys"]}),
        "skipped_draws": sum(s["skipped"] for s in steps),
        "unfilled_batches": sum(s["unfilled"] for s in steps),
        "final_greedy": r["final"]["greedy"],
        "final_sampled": r["final"]["sampled"],
        "scored": r["final"]["scored"],
        "seconds": r["seconds"],
        "load_1m_median": float(np.median([s["load_1m"] for s in steps])) if steps else None,
    }


# the Sieve arms, each against every competitor
SIEVE_ARMS = ("sieve", "sieve_learning", "sieve_screen", "night", "second")
COMPETITORS = ("mopps", "greso", "dapo")  # the selection methods the goal names


def cells_vs_uniform(
    mine: list[dict[str, Any]], uniform: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per held-out cell (family × level), the arm's final pass@1 against uniform's on the same
    seeds: sampled where the final evaluation sampled, else greedy; means over the paired seeds
    (the runs' own `by_level`), most gained first. Where an arm's overall difference comes from."""
    key = "sampled" if all(f.get("sampled") is not None for f in (*mine, *uniform)) else "greedy"
    cells: dict[tuple[str, int], dict[str, Any]] = {}
    for a, u in zip(mine, uniform, strict=True):
        theirs = {(c["family"], c["level"]): c for c in u["by_level"]}
        for c in a["by_level"]:
            other = theirs.get((c["family"], c["level"]))
            if other is None or c[key] is None or other[key] is None:
                continue
            cell = cells.setdefault(
                (c["family"], c["level"]),
                {"family": c["family"], "level": c["level"], "problems": c["problems"],
                 "arm": [], "uniform": []},
            )  # fmt: skip
            cell["arm"].append(c[key])
            cell["uniform"].append(other[key])
    out = []
    for cell in cells.values():
        arm, uni = float(np.mean(cell["arm"])), float(np.mean(cell["uniform"]))
        out.append({**cell, "arm": arm, "uniform": uni, "delta": arm - uni,
                    "seeds": len(cell["uniform"]), "measure": key})  # fmt: skip
    return sorted(out, key=lambda c: -c["delta"])


PARTS = 4  # a run's updates are read in quarters: does an arm's selection hold up as it trains?
OUTCOMES = ("mixed", "all_wrong", "all_right")


def _quarters(rows: list[list[float | None]]) -> list[float | None] | None:
    """Per quarter, the mean over seeds; None for a quarter some seed has no value for."""
    if not rows:
        return None
    return [
        None if any(r[q] is None for r in rows) else float(np.mean([r[q] for r in rows]))
        for q in range(PARTS)
    ]


def updates_by_part(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per quarter of each run's updates (in update order): the share of trained groups that
    were informative (not all G answers alike) and, where the arm predicts it before sampling,
    the share its posterior expected, from the posterior predictive (`predicted`: as the run
    recorded it, or rebuilt from its observations where it recorded only the next,
    `predictive_steps`) and at the posterior mean (`predicted_at_mean`, where the run recorded
    it: larger, since it ignores the posterior's spread); means over the runs (seeds).
    `expected_vs_realized` sets both against the realised share over every update the
    predictive covers. Also informative groups trained per 1,000 rollouts sampled, per seed:
    the quantity an arm's selection buys."""
    realized, at_mean, predictive, per_k = [], [], [], []
    covered: dict[str, list[float]] = {"predictive": [], "at_mean": [], "informative": [],
                                       "groups": []}  # fmt: skip
    for r in runs:
        idx = [i for i, s in enumerate(r["steps"]) if s["update"]]
        upd = [r["steps"][i] for i in idx]
        if len(upd) < PARTS:
            continue
        parts = np.array_split(np.arange(len(upd)), PARTS)
        realized.append(
            [sum(upd[i]["informative"] for i in ix) / sum(upd[i]["groups"] for i in ix)
             for ix in parts]
        )  # fmt: skip
        if all(s.get("predicted_informative") is not None for s in upd):
            at_mean.append(
                [float(np.mean([upd[i]["predicted_informative"] for i in ix])) for ix in parts]
            )
        pred = predictive_steps(r)
        if pred is not None:
            mine = [pred[i] for i in idx]
            predictive.append(
                [None if any(mine[i] is None for i in ix) else float(np.mean([mine[i] for i in ix]))
                 for ix in parts]
            )  # fmt: skip
            for p, s in zip(mine, upd, strict=True):
                if p is not None:
                    covered["predictive"].append(p)
                    covered["at_mean"].append(s.get("predicted_informative"))
                    covered["informative"].append(s["informative"])
                    covered["groups"].append(s["groups"])
        sampled = totals(r["steps"])["sampled"]
        per_k.append(1000.0 * sum(s["informative"] for s in upd) / sampled if sampled else 0.0)
    return {
        "seeds": len(realized),
        "realized": np.mean(realized, 0).tolist() if realized else None,
        "predicted": _quarters(predictive),
        "predicted_at_mean": np.mean(at_mean, 0).tolist() if at_mean else None,
        "expected_vs_realized": (
            {
                "updates": len(covered["groups"]),
                "seeds": len(predictive),
                "predictive": float(np.mean(covered["predictive"])),
                "at_mean": (
                    float(np.mean(covered["at_mean"])) if None not in covered["at_mean"] else None
                ),
                "realized": sum(covered["informative"]) / sum(covered["groups"]),
            }
            if covered["groups"]
            else None
        ),
        "informative_per_1k_sampled": per_k,
    }


def _start_rates(rates: dict[tuple[int, str, str], list[float]]) -> dict[str, float | None]:
    """Per kind of group (visit_outcome), the mean start rate of its cells over every part."""
    out: dict[str, float | None] = {}
    for v in ("first", "revisit"):
        for o in OUTCOMES:
            x = [y for q in range(PARTS) for y in rates[(q, v, o)]]
            out[f"{v}_{o}"] = float(np.mean(x)) if x else None
    return out


def group_outcomes(
    runs: list[dict[str, Any]], cell_rate: dict[str, dict[str, float]] | None = None
) -> dict[str, Any] | None:
    """What a posterior arm's trained groups turned out to be, from the observations it keeps
    (key, cell, k, n, update): per quarter of the run's updates, its first visits to a prompt and
    its revisits, each split into mixed groups (informative), all wrong and all right; summed
    over the seeds. The observations are those saved with the run's last checkpoint, so the
    updates they cover are reported (`covered`: the first update they do not reach;
    `whole_parts`: how many leading quarters every seed's observations cover in full, since a
    quarter the checkpoint cut holds only its first updates' groups). With
    `cell_rate` (start hash → cell → that start's measured pass rate), also the mean start rate
    of the cells
    of each kind of group (`start_rate`): did the misses come from cells the start's own
    measurement already called hard?"""
    kept = [r for r in runs if r.get("state", {}).get("observations")]
    if not kept:
        return None
    counts = {(q, v, o): 0 for q in range(PARTS) for v in ("first", "revisit") for o in OUTCOMES}
    rates: dict[tuple[int, str, str], list[float]] = {k: [] for k in counts}
    covered, whole, change, gap = [], [], [], []
    for r in kept:
        total = totals(r["steps"])["updates"]
        seen: set[str] = set()
        before: dict[str, tuple[float, int]] = {}  # a prompt's last pass rate and update
        obs = sorted(r["state"]["observations"], key=lambda o: o[4])
        for key, cell, k, n, update in obs:
            visit = "revisit" if key in seen else "first"
            seen.add(key)
            out = "mixed" if 0 < k < n else ("all_right" if k >= n else "all_wrong")
            at = (min(PARTS - 1, update * PARTS // max(1, total)), visit, out)
            counts[at] += 1
            if key in before:  # how the prompt's pass rate moved since the run last trained it
                change.append(k / n - before[key][0])
                gap.append(update - before[key][1])
            before[key] = (k / n, update)
            mine = (cell_rate or {}).get(r.get("start", ""), {})
            if cell in mine:
                rates[at].append(mine[cell])
        covered.append(max(o[4] for o in obs) + 1)
        # quarter q's last update is ceil((q + 1) * total / PARTS) - 1
        whole.append(sum(-(-(q + 1) * total // PARTS) <= covered[-1] for q in range(PARTS)))
    return {
        "seeds": len(kept),
        "covered": covered,
        "whole_parts": min(whole),
        "parts": [
            {v: {o: counts[(q, v, o)] for o in OUTCOMES} for v in ("first", "revisit")}
            for q in range(PARTS)
        ],
        "start_rate": _start_rates(rates) if cell_rate else None,
        # a revisit's pass rate minus the prompt's previous group's, the run having trained on it
        "revisit_change": {
            "groups": len(change),
            "mean": float(np.mean(change)) if change else None,
            "share_up": float(np.mean([c > 0 for c in change])) if change else None,
            "share_down": float(np.mean([c < 0 for c in change])) if change else None,
            "median_updates_between": float(np.median(gap)) if gap else None,
        },
    }


START_KEYS = ("hash", "greedy", "sampled", "scored", "cost", "cells", "model_revision")


def block_label(seed: int, suffix: str) -> str:
    """A paired block's name: the seed, marked with its start's letter where it is not the main
    start ("3" from the main start, "3b" from the second)."""
    return f"{seed}{suffix}"


def _block_order(label: str) -> tuple[str, int]:
    digits = "".join(ch for ch in label if ch.isdigit())
    return (label[len(digits) :], int(digits))


def held_out_check(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The held-out problems the runs scored: how many, and whether every run scored the same
    set (the same cells with the same counts, and per-problem lists of one length). The paired
    statistics read problem j of one run against problem j of another, in every block."""
    finals = [r["final"] for r in runs]
    sizes = {len(f["per_problem_greedy"]) for f in finals}
    cells = {tuple((c["family"], c["level"], c["problems"]) for c in f["by_level"]) for f in finals}
    return {"problems": max(sizes), "same_in_every_run": len(sizes) == 1 and len(cells) == 1}


def summarise_setting(
    runs: list[dict[str, Any]],
    start: dict[str, Any],
    others: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One setting's comparison: arms paired to uniform in blocks of one seed and one start.

    `start` is the main start's record; `others` (hash → record) the starts some runs began
    from instead (a warm start rebuilt on another machine is other weights: its hash differs).
    A run pairs only with runs of the same seed *and* start, so a block is named by its seed and
    its start's letter (`block_label`); intervals are over blocks and the held-out problems
    every block shares (headline_stats.py)."""

    def rng(*names: str) -> np.random.Generator:
        """Each interval's own resampling stream, named by what it compares: an interval
        never moves because another arm's run finished (one shared stream did)."""
        return np.random.default_rng([0, *(zlib.crc32(n.encode()) for n in names)])

    others = others or {}
    suffix = {start.get("hash"): "", **{h: chr(ord("b") + i) for i, h in enumerate(others)}}
    record = {start.get("hash"): start, **others}
    one = len({r["start"] for r in runs}) <= 1  # every run from one start: it is the main one

    def blk(r: dict[str, Any]) -> str:
        return block_label(r["seed"], "" if one else suffix[r["start"]])

    def s0(r: dict[str, Any]) -> float:
        return float(record.get(r["start"], start)["greedy"])

    def curve(r: dict[str, Any]) -> Curve:
        return run_curve(r, record.get(r["start"], start))

    uni = {blk(r): r for r in runs if r["arm"] == "uniform"}
    budget = max((float(r["curve"][-1]["rollouts"]) for r in runs), default=0.0)
    out: dict[str, Any] = {
        "start": {k: start.get(k) for k in START_KEYS},
        "other_starts_used": [
            {**{k: st.get(k) for k in START_KEYS}, "suffix": suffix[h]}
            for h, st in others.items()
            if any(r["start"] == h for r in runs)
        ],
        "held_out": held_out_check(runs) if runs else None,
        "runs": [{**run_row(r), "block": blk(r)} for r in runs],
        # blocks whose uniform run ended at or below its start's greedy accuracy (targets are
        # set by uniform's mean gain over blocks, so these blocks still have them)
        "blocks_without_gain": sorted(
            (sd for sd, r in uni.items() if r["final"]["greedy"] <= s0(r)), key=_block_order
        ),
    }
    arms: dict[str, Any] = {}
    for arm in ARMS:
        mine = {blk(r): r for r in runs if r["arm"] == arm}
        if not mine:
            continue
        paired = sorted((sd for sd in mine if sd in uni), key=_block_order)
        row: dict[str, Any] = {
            "seeds": sorted(mine, key=_block_order),
            "paired_seeds": paired,
            "final_greedy": seed_bootstrap(
                [mine[s]["final"]["greedy"] for s in mine], rng(arm, "final_greedy")
            ),
            "final_sampled": seed_bootstrap(
                [mine[s]["final"]["sampled"] for s in mine], rng(arm, "final_sampled")
            ),
            "updates": [run_row(mine[s])["updates"] for s in sorted(mine, key=_block_order)],
        }
        if arm != "uniform" and paired:
            for key in ("sampled", "greedy"):
                row[f"diff_{key}_vs_uniform"] = paired_delta(
                    [mine[s]["final"][f"per_problem_{key}"] for s in paired],
                    [uni[s]["final"][f"per_problem_{key}"] for s in paired],
                    rng(arm, "uniform", key),
                )
            vs = compare_curves(
                [curve(mine[s]) for s in paired],
                [curve(uni[s]) for s in paired],
                paired,
                rng(arm, "uniform", "curves"),
                budget=budget,
            )
            row["target_gain"] = vs["target_gain"]
            row["rollouts_to_target"] = vs["targets"]
            row["auc_gain_delta"] = vs["auc_gain_delta"]
        if arm in SIEVE_ARMS:  # the goal: ahead of the other selection methods, not only uniform
            row["diff_sampled_vs_others"] = {}
            for other in COMPETITORS:
                theirs = {blk(r): r for r in runs if r["arm"] == other}
                both = sorted((sd for sd in mine if sd in theirs), key=_block_order)
                if both:
                    row["diff_sampled_vs_others"][other] = paired_delta(
                        [mine[sd]["final"]["per_problem_sampled"] for sd in both],
                        [theirs[sd]["final"]["per_problem_sampled"] for sd in both],
                        rng(arm, other, "sampled"),
                    )
        row["by_part"] = updates_by_part(list(mine.values()))
        # Sieve's observations are its trained groups; the two-stage arm's hold its screens too
        rates = {
            h: {f"{c['family']} {c['level']}": c["pass_rate"] for c in st.get("cells") or []}
            for h, st in record.items()
        }
        row["group_outcomes"] = (
            group_outcomes(list(mine.values()), rates if any(rates.values()) else None)
            if arm in ("sieve", "sieve_learning")
            else None
        )
        if arm != "uniform" and paired:
            row["cells_vs_uniform"] = cells_vs_uniform(
                [mine[s]["final"] for s in paired], [uni[s]["final"] for s in paired]
            )
        arms[arm] = row
    out["arms"] = arms
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "uniform": "tab:gray",
        "dapo": "tab:blue",
        "greso": "tab:orange",
        "mopps": "tab:purple",
        "sieve": "tab:green",
        "sieve_learning": "tab:olive",
    }
    settings = [s for s in SETTINGS if s in result["settings"]]
    fig, axes = plt.subplots(len(settings), 2, figsize=(11, 4 * len(settings)), squeeze=False)
    for row, setting in zip(axes, settings, strict=True):
        runs = result["settings"][setting]["curves"]
        for ax, xkey in zip(row, ("rollouts", "updates"), strict=True):
            for arm, curves in runs.items():
                end = min(c[-1][xkey] for c in curves)
                grid = np.linspace(0.0, end, 100)
                # gain over the run's own start: runs from two builds of a start begin at
                # different accuracies, and a mean of raw curves would mix the builds' levels
                ys = np.array(
                    [
                        np.interp(
                            grid, [p[xkey] for p in c], [p["greedy"] - c[0]["greedy"] for p in c]
                        )
                        for c in curves
                    ]
                )
                m = ys.mean(0)
                ax.plot(grid, m, color=colors.get(arm, "k"), label=f"{arm} ({len(curves)} seeds)")
                if len(curves) > 1:
                    se = ys.std(0, ddof=1) / math.sqrt(len(curves))
                    ax.fill_between(grid, m - se, m + se, color=colors.get(arm, "k"), alpha=0.15)
            ax.set_xlabel("rollouts sampled (all counted)" if xkey == "rollouts" else "updates")
            ax.set_ylabel("held-out greedy gain over the run's start\n(band: ±1 s.e. over seeds)")
            ax.set_title(f"{result['model']}, {setting} start")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def campaign_verifier(runs_dir: Path) -> str:
    """The verifier version of the campaign: the one most finished runs were scored under (a
    campaign runs pinned code, so the repository's verifier may have moved on since); the
    current one when no run has finished."""
    found = Counter(
        json.loads(f.read_text()).get("verifier")
        for f in sorted(runs_dir.glob("*_s*.json"))
        if json.loads(f.read_text())["done"]
    )
    return str(found.most_common(1)[0][0]) if found else verifier_version()


def start_order(
    runs_dir: Path, setting: str, starts: dict[str, Any], runs: list[dict[str, Any]]
) -> list[str]:
    """The setting's start hashes, oldest first: by the time git first committed each record
    (so a start's letter never changes as runs finish), then by the runs that began from it,
    then by hash; records git does not know (uncommitted, or no repository) come last."""

    def added(h: str) -> float:
        path = runs_dir / f"start_{setting}_{h}.json"
        try:
            out = subprocess.run(
                ["git", "log", "--diff-filter=A", "--format=%ct", "--", path.name],
                cwd=runs_dir, capture_output=True, text=True, check=False, timeout=30,
            ).stdout.split()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return math.inf
        return float(out[-1]) if out else math.inf

    return sorted(starts, key=lambda h: (added(h), -sum(r["start"] == h for r in runs), h))


def planned_runs(policy: str, runs_dir: Path) -> list[str]:
    """The campaign's planned runs (setting:arm:seed): benchmarks/headline_runs.txt for the real
    model, the list the driver runs; on the tiny policy every arm that has a run file, seeds 1-5
    (the protocol's seeds there)."""
    if policy != "tiny":
        return run_list()
    arms = {f.name.rsplit("_s", 1)[0].split("_", 1)[1] for f in runs_dir.glob("cold_*_s*.json")}
    return [f"cold:{a}:{s}" for s in range(1, 6) for a in ARMS if a in arms]


def planned_left(runs_dir: Path, setting: str, plan: list[str], scored_by: str) -> list[str]:
    """The planned runs of a setting not finished under the campaign's verifier, in plan order."""
    left = []
    for run in plan:
        where, arm, seed = run.split(":")
        if where != setting:
            continue
        path = progress_path(runs_dir, where, arm, int(seed))
        p = json.loads(path.read_text()) if path.is_file() else {}
        if not (p.get("done") and p.get("verifier") == scored_by):
            left.append(run)
    return left


def summary(
    runs_dir: Path, setup: Setup, model: str, plan: list[str] | None = None
) -> dict[str, Any]:
    """The JSON the docs render: per setting, every arm's finished runs compared to uniform's.
    `plan` (setting:arm:seed) names the campaign's runs, so a setting can say which are left."""
    scored_by = campaign_verifier(runs_dir)
    out: dict[str, Any] = {
        "benchmark": "headline",
        "model": model,
        "setup": asdict(setup),
        "verifier": scored_by,  # every run summarised was scored under it
        "verifier_now": verifier_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {},
        "starts": {},  # each setting's start records, finished runs or not
    }
    keep = ("hash", "greedy", "sampled", "scored", "cost", "cells", "model_revision", "verifier")
    for setting in SETTINGS:
        runs = [json.loads(f.read_text()) for f in sorted(runs_dir.glob(f"{setting}_*_s*.json"))]
        out.setdefault("left_out_other_verifier", []).extend(
            f"{r['setting']} {r['arm']} s{r['seed']} ({r.get('verifier')})"
            for r in runs
            if r["done"] and r.get("verifier") != scored_by
        )
        runs = [r for r in runs if r["done"] and r.get("verifier") == scored_by]
        starts = {
            json.loads(f.read_text())["hash"]: json.loads(f.read_text())
            for f in sorted(runs_dir.glob(f"start_{setting}_*.json"))
        }
        out["starts"][setting] = [{k: st.get(k) for k in keep} for st in starts.values()]
        if not runs:
            continue
        # the main start: the first committed (else the one most runs began from); runs from
        # another (a warm start rebuilt on a new machine is other weights) pair in blocks of
        # their own seed and start, lettered in the same order
        order = start_order(runs_dir, setting, starts, runs)
        main, others = order[0], {h: starts[h] for h in order[1:]}
        block = summarise_setting([r for r in runs if r["start"] in starts], starts[main], others)
        block["other_starts"] = [run_row(r) for r in runs if r["start"] not in starts]
        if plan is not None:  # unknown without a plan: the docs then call the verdict provisional
            block["planned_left"] = planned_left(runs_dir, setting, plan, scored_by)
        block["curves"] = {  # the points only: per-problem scores stay in the run files
            arm: [
                [{k: v for k, v in c.items() if k != "per_problem_greedy"} for c in r["curve"]]
                for r in runs
                if r["arm"] == arm and r["start"] in starts
            ]
            for arm in ARMS
            if any(r["arm"] == arm and r["start"] in starts for r in runs)
        }
        out["settings"][setting] = block
    return out


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help=f"default: {MODEL}")
    ap.add_argument("--setting", choices=SETTINGS, default="warm")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--smoke", action="store_true", help="tiny policy, hf backend, seconds")
    ap.add_argument(
        "--policy",
        choices=("smollm2", "tiny"),
        default="smollm2",
        help="tiny: the bootstrapped tiny policy on the whole generator mix (results "
        "headline_tiny*; setting cold only: the policy as bootstrapped)",
    )
    ap.add_argument("--results", type=Path, default=None, help="output folder")
    ap.add_argument("--state", type=Path, default=None, help=f"weights folder (default {STATE})")
    ap.add_argument("--summarise", action="store_true", help="JSON + PNG from the progress files")
    ap.add_argument("--is-done", action="store_true", help="exit 0 if every run asked is done")
    args = ap.parse_args(argv)
    setup = (
        SMOKE if args.smoke else TINY if args.policy == "tiny"
        else USER if args.setting == "user" else Setup()
    )  # fmt: skip
    arms = [a for a in args.arms.split(",") if a]
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"unknown arm {bad[0]!r}: choose from {', '.join(ARMS)}")
    if args.smoke:
        out = args.results or Path(tempfile.mkdtemp(prefix="headline_smoke_"))
        state = args.state or out / "state"
        mix = SMOKE_MIX
        model_dir = args.model
        if model_dir is None:
            from pipeline.policy.model import create_tiny_model

            model_dir = state / "tiny"
            if not (model_dir / "config.json").is_file():
                create_tiny_model(model_dir, seed=0)
    elif args.policy == "tiny":
        from pipeline.problems import FAMILIES, family_levels

        if args.setting != "cold":
            raise SystemExit("--policy tiny has one start, the bootstrapped policy: --setting cold")
        out, state = args.results or RESULTS, args.state or STATE / "tiny"
        mix = {f: list(family_levels(f)) for f in FAMILIES}
        model_dir = args.model or TINY_MODEL
    else:
        from pipeline.selection.config import load_mix

        out, state = args.results or RESULTS, args.state or STATE
        mix = load_mix(USER_MIX_FILE if args.setting == "user" else MIX_FILE).levels()
        model_dir = args.model or MODEL
    name = "headline_smoke" if args.smoke else f"headline_{args.policy}".replace("_smollm2", "")
    runs_dir = out / f"{name}_runs"
    if args.is_done:
        paths = [progress_path(runs_dir, args.setting, a, s) for s in args.seeds for a in arms]
        raise SystemExit(0 if all(finished(x) for x in paths) else 1)
    if not args.summarise:
        if not (model_dir / "config.json").is_file():
            raise SystemExit(f"no model at {model_dir}: `sieve models add smollm2-135m`")
        # one row per problem (two cells can draw the same one); a cell whose generator space
        # is small has fewer (rg:count_bits 1 has 15 problems in all, 2 of them held out)
        held = held_out(mix, setup.per_level).unique(
            "problem_id", keep="first", maintain_order=True
        )
        pol = load(setup, model_dir)  # type: ignore[arg-type]  # the fields load reads
        base = {k: v.detach().clone() for k, v in pol.model.state_dict().items()}
        warm_mix, warm_setup = None, None
        if args.setting == "user" and not args.smoke:  # the warm setting's start weights
            from pipeline.selection.config import load_mix

            warm_mix, warm_setup = load_mix(MIX_FILE).levels(), Setup()
        weights, start = start_point(
            setup, args.setting, pol, base, mix, held, runs_dir, state, model_dir,
            warm_mix=warm_mix, warm_setup=warm_setup,
        )  # fmt: skip
        for seed in args.seeds:
            for arm in arms:
                if arm in ("night", "second"):  # the product's own loop (`sieve loop`)
                    run_night(
                        setup, args.setting, seed, pol, weights, start, mix, held, runs_dir,
                        state, model_dir, arm,
                    )  # fmt: skip
                    continue
                run_arm(
                    setup, args.setting, arm, seed, pol, weights, start, mix, held, runs_dir, state
                )
    plan = None if args.smoke else planned_runs(args.policy, runs_dir)
    result = summary(runs_dir, setup, model_dir.name if model_dir else "smollm2-135m", plan)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    if result["settings"]:
        plot(result, out / f"{name}.png")
    print(f"wrote {out / f'{name}.json'}")


if __name__ == "__main__":
    main()
