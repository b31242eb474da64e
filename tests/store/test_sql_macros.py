"""The ledger's macros are the Python definitions rendered (pipeline/selection/sql_macros.py): the
migration holds exactly that text, and the SQL computes what the Polars code computes.

Test: `.venv/bin/pytest tests/store/test_sql_macros.py -q`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

import pipeline.store.ledger as ledger_module
from grpo_core.advantages import ZERO_VAR_TOL
from pipeline.selection.sql_macros import BEGIN, END, ledger_macros
from pipeline.selection.sqlexpr import Sql, literal, when
from pipeline.selection.stats import Z95, beta_quantile_value, posterior
from pipeline.store import Ledger, migrations


def generated_block(text: str) -> str | None:
    if BEGIN not in text:
        return None
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def test_the_newest_generated_block_is_the_current_rendering() -> None:
    blocks = [(name, generated_block(text)) for _, name, text in migrations()]
    found = [(name, block) for name, block in blocks if block is not None]
    assert found, "no migration holds the generated macros"
    name, block = found[-1]
    assert block == ledger_macros(), (
        f"{name} holds macros that differ from the Python definitions: add a new migration with "
        "the output of `python -m pipeline.selection.sql_macros`"
    )


def test_literals_are_exact_doubles(ledger: Ledger) -> None:
    for x in (0.1, 5 / 6, -Z95, ZERO_VAR_TOL, 1.0, 1e300, -2.5e-12):
        got, kind = ledger.run(f"SELECT {literal(x)}, typeof({literal(x)})")[0]
        assert (got, kind) == (x, "DOUBLE"), x
    assert literal(3) == "3" and literal(Sql("n")) == "n"
    with pytest.raises(TypeError):
        literal(True)


def test_one_formula_gives_polars_and_sql() -> None:
    def f(x: Any, y: Any) -> Any:
        return when(x == 1, (2 * x + y) ** 0.5 / 3, (1 - y).exp() - x.sqrt())

    frame = pl.DataFrame({"x": [1.0, 4.0], "y": [2.0, 0.5]})
    ours = frame.select(f(pl.col("x"), pl.col("y")).alias("v"))["v"].to_list()
    sql = f"SELECT {f(Sql('x'), Sql('y'))} AS v FROM frame ORDER BY x"
    con = duckdb.connect()
    con.register("frame", frame)
    got = [v for (v,) in con.execute(sql).fetchall()]
    assert got == pytest.approx(ours, rel=1e-15)
    assert ours == pytest.approx([(2 * 1 + 2) ** 0.5 / 3, math.exp(0.5) - 2.0], rel=1e-15)


def test_posterior_macro_matches_polars(ledger: Ledger) -> None:
    grid = pl.DataFrame(
        [(n, k) for n in (0, 1, 2, 3, 7, 8, 16, 40, 117, 400) for k in sorted({0, 1, n // 3, n})],
        schema={"n": pl.Int64, "k": pl.Int64},
        orient="row",
    ).filter(pl.col("k") <= pl.col("n"))
    ledger.con.register("grid", grid)
    cols = ("alpha", "beta", "p_mean", "p_low", "p_high", "learnability")
    fields = ", ".join(f"struct_extract(sieve_posterior(n, k), '{c}') AS {c}" for c in cols)
    sql = ledger.sql(f"SELECT n, k, {fields} FROM grid ORDER BY n, k")
    ours = posterior(grid).sort("n", "k")
    for c in cols:
        assert (sql[c] - ours[c]).abs().max() <= 1e-12, c  # type: ignore[operator]


def test_beta_quantile_macro(ledger: Ledger) -> None:
    for a, b in ((1.0, 1.0), (1.0, 7.0), (3.0, 1.0), (2.5, 9.0), (40.0, 3.0), (101.0, 300.0)):
        for u in (0.05, 0.95):
            sql = ledger.run("SELECT sieve_beta_q($a, $b, $u)", {"a": a, "b": b, "u": u})[0][0]
            assert sql == pytest.approx(beta_quantile_value(a, b, u), abs=1e-12), (a, b, u)
    # SQL knows the normal quantile only at the interval's two levels: NULL, never a wrong value
    assert ledger.run("SELECT sieve_beta_q(2.5, 9.0, 0.3)")[0][0] is None
    exact = ledger.run("SELECT sieve_beta_q(1.0, 9.0, 0.3)")[0][0]  # closed form at a = 1
    assert exact == pytest.approx(beta_quantile_value(1.0, 9.0, 0.3), abs=1e-12)


def test_hand_written_helpers_are_gone(ledger: Ledger) -> None:
    names = ledger.sql(
        "SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_name LIKE 'sieve_%'"
    )["function_name"].to_list()
    assert "sieve_beta_h" not in names and "sieve_beta_w" not in names
    assert {"sieve_uninformative", "sieve_posterior", "sieve_beta_q"} <= set(names)


def test_an_existing_ledger_keeps_its_view_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger made before 0009 shows the same group and prompt stats after it (within 1e-12:
    the same rule and posterior, now computed by the rendered macros)."""
    path = tmp_path / "sieve.duckdb"
    rng = np.random.default_rng(0)
    rows = [
        {"run_id": "s", "problem_id": f"p{i}", "sample_idx": j, "reward": r, "correct": r >= 1}
        for i in range(60)
        for j, r in enumerate(rng.choice([0.0, 0.5, 1.0], size=(i % 30) + 1).tolist())
    ]
    run = {
        "run_id": ["s"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
        "backend": ["hf"], "group_size": [8], "temperature": [1.0],
        "started_at": [datetime(2026, 1, 1, tzinfo=UTC)], "status": ["finished"],
    }  # fmt: skip
    older = [m for m in migrations() if m[0] < 9]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0009
    views = ("group_stats", "prompt_stats")
    with Ledger.open(path=path) as led:
        assert 9 not in led.applied_migrations()
        led.write_batch({"sampling_runs": pl.DataFrame(run), "rollouts": pl.DataFrame(rows)})
        before = {v: led.sql(f"SELECT * FROM {v} ORDER BY problem_id") for v in views}
    monkeypatch.undo()
    with Ledger.open(path=path, read_only=True) as led:
        assert 9 in led.applied_migrations()
        for view, old in before.items():
            new = led.sql(f"SELECT * FROM {view} ORDER BY problem_id")
            assert new.columns == old.columns, view
            for col in new.columns:
                if new[col].dtype == pl.Float64:
                    assert ((new[col] - old[col]).abs() <= 1e-12).all(), (view, col)
                else:
                    assert new[col].to_list() == old[col].to_list(), (view, col)


def test_an_existing_ledger_gets_the_relative_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 0015 (issue 46 point 6): a ledger made under the absolute 1e-6 tolerance calls a
    group spread by 1e-5 informative; after the migration its views call it zero-variance, and
    a 0/1 group or a spread of 1e-3 keeps its verdict."""
    path = tmp_path / "sieve.duckdb"
    groups = {
        "tiny": [0.5, 0.50001],
        "binary": [0.0, 1.0],
        "milli": [0.5, 0.501],
        "flat": [1.0] * 2,
    }
    rows = [
        {"run_id": "s", "problem_id": pid, "sample_idx": j, "reward": r, "correct": r >= 1}
        for pid, rewards in groups.items()
        for j, r in enumerate(rewards)
    ]
    run = {
        "run_id": ["s"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
        "backend": ["hf"], "group_size": [2], "temperature": [1.0],
        "started_at": [datetime(2026, 1, 1, tzinfo=UTC)], "status": ["finished"],
    }  # fmt: skip
    older = [m for m in migrations() if m[0] < 15]
    monkeypatch.setattr(ledger_module, "migrations", lambda: older)  # a Sieve before 0015
    sql = "SELECT problem_id, zero_variance FROM group_stats ORDER BY problem_id"
    with Ledger.open(path=path) as led:
        led.write_batch({"sampling_runs": pl.DataFrame(run), "rollouts": pl.DataFrame(rows)})
        before = dict(led.sql(sql).iter_rows())
    monkeypatch.undo()
    with Ledger.open(path=path, read_only=True) as led:
        assert 15 in led.applied_migrations()
        after = dict(led.sql(sql).iter_rows())
    assert before == {"binary": False, "flat": True, "milli": False, "tiny": False}
    assert after == {**before, "tiny": True}
