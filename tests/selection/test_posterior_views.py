"""The difficulty model as ledger views (migration 0016: posterior_clock, posterior_observations,
cell_posterior, prompt_posterior): the lineage clock stated by hand, the views against the Python
twin (`ledger_posterior`) within 1e-12, the macros against PosteriorConfig, and `sieve stats`."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.problems import generate
from pipeline.selection.evidence import ledger_posterior, lineage_clock
from pipeline.selection.posterior import PosteriorConfig
from pipeline.store import Ledger


def _ledger_with_history(ledger: Ledger) -> dict[str, int]:
    """Two chained training runs, curation at the base and at a checkpoint, and rows the model
    must leave out (greedy screen, eval, a skip, held-out problems). Returns hand-stated clocks."""
    probs = pl.concat(
        [
            generate("arith", [1, 2], 12, seed=3),
            generate("linear", [1], 12, seed=4),
            generate("modular", [1], 6, seed=5),  # never observed: starts at the pooled yield
        ]
    )
    ledger.write("problems", probs)
    observed = probs.filter((pl.col("split") == "train") & (pl.col("family") != "modular"))
    train = observed["problem_id"].to_list()
    held = probs.filter(pl.col("split") == "heldout")["problem_id"].to_list()
    rng = np.random.default_rng(7)
    ledger.run(
        "INSERT INTO train_runs (train_id, base_revision, started_at, status) VALUES "
        "('t1', 'base', now(), 'finished'), ('t2', 'r8', now(), 'finished'), "
        "('t3', 'elsewhere', now(), 'finished')"
    )
    ledger.run(
        "INSERT INTO checkpoints (train_id, step, path, model_revision) VALUES "
        "('t1', 4, 'a', 'r4'), ('t1', 8, 'b', 'r8'), ('t2', 6, 'c', 'r14')"
    )
    rows = []
    for tid, steps in (("t1", 8), ("t2", 6), ("t3", 3)):
        for step in range(steps):
            for p in rng.choice(train, 3, replace=False):
                n = int(rng.choice([4, 8]))
                k = int(rng.integers(0, n + 1))
                rows += [(tid, step, str(p), i, "x", float(i < k), i < k) for i in range(n)]
    rows += [("t2", 2, held[0], i, "x", 1.0, True) for i in range(4)]  # held out: left out
    ledger.write(
        "train_rollouts",
        pl.DataFrame(
            rows,
            schema=["train_id", "step", "problem_id", "sample_idx", "policy", "reward", "correct"],
            orient="row",
        ),
    )
    ledger.run("INSERT INTO train_skips VALUES ('t2', 5, $p, 3, 0.5)", {"p": train[0]})
    runs = [  # run_id, purpose, revision, temperature
        ("s0", "screen", "base", 1.0),
        ("f8", "refine", "r8", 0.7),
        ("g0", "screen", "base", 0.0),  # greedy: observes nothing about a sampled pass rate
        ("e8", "eval", "r8", 1.0),
    ]
    ledger.write(
        "sampling_runs",
        pl.DataFrame(
            [(r, p, "m", v, "hf", 4, t, "finished") for r, p, v, t in runs],
            schema=["run_id", "purpose", "model", "model_revision", "backend", "group_size",
                    "temperature", "status"],
            orient="row",
        ),
    )  # fmt: skip
    samples = []
    for run_id, *_ in runs:
        for p in [*rng.choice(train, 5, replace=False), held[1]]:
            k = int(rng.integers(0, 5))
            samples += [(run_id, str(p), i, float(i < k), i < k) for i in range(4)]
    ledger.write(
        "rollouts",
        pl.DataFrame(
            samples, schema=["run_id", "problem_id", "sample_idx", "reward", "correct"],
            orient="row",
        ),
    )  # fmt: skip
    return {"t1": 0, "t2": 8, "t3": 0, "now": 14}


def test_the_lineage_clock_is_the_one_stated_by_hand() -> None:
    with Ledger.memory() as ledger:
        want = _ledger_with_history(ledger)
        sql = dict(ledger.sql("SELECT train_id, start FROM posterior_clock").rows())
        py = lineage_clock(
            ledger.sql("SELECT train_id, base_revision FROM train_runs"),
            ledger.sql("SELECT train_id, step, model_revision FROM checkpoints"),
        )
        obs = ledger.sql("SELECT source, min(update), max(update) FROM posterior_observations "
                         "GROUP BY source ORDER BY source").rows()  # fmt: skip
        now = ledger.sql("SELECT DISTINCT now FROM posterior_weighted").item()
    assert sql == py == {k: v for k, v in want.items() if k != "now"}
    # refine at r8 sits at 8, the base screen at 0, training of t2 at 8..13; t3 from weights
    # this ledger never made starts at 0; greedy and eval runs are not evidence
    assert obs == [("refine", 8, 8), ("screen", 0, 0), ("train", 0, 13)]
    assert now == want["now"]  # t2's checkpoint of step 6


def test_the_views_agree_with_the_python_to_1e_12() -> None:
    with Ledger.memory() as ledger:
        _ledger_with_history(ledger)
        cells_py, prompts_py, now = ledger_posterior(ledger)
        cells_sql = ledger.sql("SELECT * FROM cell_posterior ORDER BY cell")
        prompts_sql = ledger.sql("SELECT * FROM prompt_posterior ORDER BY problem_id")
        n_train = ledger.sql("SELECT count(*) FROM problems WHERE split = 'train'").item()
    assert now == 14
    assert cells_sql["cell"].to_list() == cells_py["cell"].to_list() == [
        "arith 1", "arith 2", "linear 1"
    ]  # fmt: skip
    assert (
        np.max(np.abs(cells_sql["cell_yield"].to_numpy() - cells_py["cell_yield"].to_numpy()))
        < 1e-12
    )
    prompts_py = prompts_py.sort("problem_id")
    assert prompts_sql.height == prompts_py.height == n_train  # every train prompt, seen or not
    assert prompts_sql["problem_id"].to_list() == prompts_py["problem_id"].to_list()
    for col in ("cell_yield", "alpha", "beta", "mean"):
        gap = np.max(np.abs(prompts_sql[col].to_numpy() - prompts_py[col].to_numpy()))
        assert gap < 1e-12, col
    assert (prompts_sql["groups"] == 0).sum() > 0  # unseen prompts start from their cell


def test_the_view_macros_are_the_configs_defaults() -> None:
    with Ledger.memory() as ledger:
        for f in fields(PosteriorConfig):
            if f.name == "candidates":
                continue  # a selection setting, not part of the model
            got = ledger.sql(f"SELECT sieve_posterior_{f.name}()").item()
            assert got == pytest.approx(getattr(PosteriorConfig(), f.name), abs=0), f.name


def test_an_empty_ledger_has_empty_posteriors() -> None:
    with Ledger.memory() as ledger:
        assert ledger.sql("SELECT * FROM cell_posterior").height == 0
        assert ledger.sql("SELECT * FROM prompt_posterior").height == 0


def test_sieve_stats_shows_the_cell_posterior(tmp_path: Path) -> None:
    from flows.cli import app

    home = tmp_path / "home"
    with Ledger.open(home) as ledger:
        _ledger_with_history(ledger)
    result = CliRunner().invoke(app, ["stats", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "difficulty model" in result.output
    for cell in ("arith 1", "arith 2", "linear 1"):
        assert cell in result.output


def test_a_run_reads_the_evidence_of_its_own_lineage_only() -> None:
    """`lineage_observations` (issue 46 point 4: a night's trainer reads the nights before it):
    a run starting from r14 (t2's step 6, itself from t1's step 8) sees the base's screen, r8's
    refine, t1's groups up to step 8 and t2's up to step 6, each at its lineage update; t3 (from
    weights this lineage never had), greedy and eval runs, skips and held-out rows add nothing.
    From r4 (t1's step 4) the same run sees t1 up to step 4 only and nothing of t2 or r8."""
    from pipeline.selection.evidence import lineage_observations

    with Ledger.memory() as ledger:
        _ledger_with_history(ledger)
        split = dict(ledger.sql("SELECT problem_id, split FROM problems").rows())
        trained = ledger.sql(
            "SELECT train_id, step, problem_id, count(*) AS n, sum(correct::INT) AS k "
            "FROM train_rollouts GROUP BY ALL"
        )
        cur = ledger.sql(
            "SELECT run_id, problem_id, count(*) AS n, sum(correct::INT) AS k FROM rollouts "
            "GROUP BY ALL"
        )

        def expect(upto: dict[str, tuple[int, int]], runs: dict[str, int]) -> list[tuple]:
            rows = [
                (p, float(k), float(n), start + s)
                for t, s, p, n, k in trained.rows()
                if t in upto and s <= upto[t][1] and split[p] == "train"
                for start in [upto[t][0]]
            ]
            rows += [
                (p, float(k), float(n), runs[r])
                for r, p, n, k in cur.rows()
                if r in runs and split[p] == "train"
            ]
            return sorted(rows)

        def got(rev: str) -> tuple[list[tuple], int]:
            obs, now = lineage_observations(ledger, rev)
            return sorted(obs.select("problem_id", "k", "n", "update").rows()), now

        rows, now = got("r14")
        assert now == 14
        # t2 skipped a prompt at step 5: a skip has no samples, so no train_rollouts row
        assert rows == expect({"t1": (0, 8), "t2": (8, 6)}, {"s0": 0, "f8": 8})
        rows, now = got("r4")
        assert now == 4
        assert rows == expect({"t1": (0, 4)}, {"s0": 0})
        # weights the lineage never had: only the run trained from them (t3) is evidence there
        rows, now = got("elsewhere")
        assert now == 0 and rows == expect({"t3": (0, 1 << 30)}, {})
        obs, _ = lineage_observations(ledger, "elsewhere", siblings=False)
        assert obs.is_empty()
        # a second run from the base reads every run trained from it at its own clock: t1's
        # groups, t2's (from t1's step 8) at 8 + step, the refine r8 sampled at 8; the base's
        # own lineage alone (siblings off) is its screen
        rows, now = got("base")
        assert now == 0
        assert rows == expect({"t1": (0, 1 << 30), "t2": (8, 1 << 30)}, {"s0": 0, "f8": 8})
        obs, _ = lineage_observations(ledger, "base", siblings=False)
        assert sorted(obs.select("problem_id", "k", "n", "update").rows()) == expect({}, {"s0": 0})
        # a run of its own from r4 (resumed at step 2) adds its groups at 4 + step
        ledger.run("INSERT INTO train_runs (train_id, base_revision, started_at, status) VALUES "
                   "('t4', 'r4', now(), 'running')")  # fmt: skip
        p = next(pid for pid, s in split.items() if s == "train")
        ledger.write(
            "train_rollouts",
            pl.DataFrame(
                [("t4", 2, p, i, "x", 1.0, True) for i in range(4)],
                schema=[
                    "train_id",
                    "step",
                    "problem_id",
                    "sample_idx",
                    "policy",
                    "reward",
                    "correct",
                ],
                orient="row",
            ),
        )
        obs, now = lineage_observations(ledger, "r4", "t4")
        assert now == 4
        assert (p, 4.0, 4.0, 6) in obs.select("problem_id", "k", "n", "update").rows()
