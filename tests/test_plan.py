"""`pipeline.jobs.analysis.policy_forecast` and `sieve plan` (issue 46 point 7): per policy, the
informative share and rollouts per informative group a pool and model would give, before any
training rollout, and whether curation pays. The rows on a hand-made pool, the verdict's three
answers, the Sieve replay's screen and refine, then the CLI on a tiny curated home (its uniform row
checked against the ledger's own group_stats view), on a pool file, on training samples, and its
error lines; every line printed fits 80 columns.

Test: `.venv/bin/pytest tests/test_plan.py -q`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
from flows.curate import curate
from pipeline.jobs.analysis import policy_forecast as pp
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.cli_runner import error_line, run_cli
from tests.simulated import RATES, reachable_problems, simulated_policy
from tests.test_backtest import pool

CURATE = CurateConfig(n_candidates=60, mix={"arith": "1-6"}, seed=3, chunk_size=60)
POLICY_ROWS = ("uniform", "dapo (", "greso (", "posterior (", "sieve (")


def test_rows_on_the_hand_pool() -> None:
    # tests/test_backtest.py's five prompts of 8 samples: G = 4 (half of 8); uniform over
    # samples 0-3 finds c (1010) and e (1000) informative, 20 rollouts, 10 per informative group
    result = pp.plan(pool(), CurateConfig(uncertain_hard_share=0.0, screen_g=2, refine_g=2))
    assert (result.g, result.depth, result.prompts) == (4, 8, 5)
    rows = {r.policy: r for r in result.rows}
    assert list(rows) == list(pp.PLAN_POLICIES)
    u = rows["uniform"]
    assert (u.groups, u.informative, u.rollouts, u.deciding) == (5, 2, 20, 0)
    assert u.share == 0.4 and u.per_informative == 10.0
    # DAPO trains only informative groups; the flat ones it drew only decided
    d = rows["dapo"]
    assert d.share == 1.0 and d.deciding == pytest.approx(
        (d.rollouts or 0) - 4 * (d.informative or 0)
    )
    assert rows["posterior"].deciding == 0 and rows["greso"].deciding == 0
    # Sieve: screen 2, refine 2, then its kept prompts' training groups of 4 (samples 4-7)
    assert rows["sieve"].label == "sieve (screen 2, refine 2)" and not rows["sieve"].note


def test_a_policy_the_pool_is_too_small_for_is_a_row_saying_so() -> None:
    result = pp.plan(pool(), CurateConfig(), g=8)  # GRESO needs two groups of 8 a prompt
    greso = next(r for r in result.rows if r.policy == "greso")
    assert greso.note == "refused: needs 16 samples a prompt, some hold 8"
    assert greso.share is None and greso.per_informative is None


def test_the_verdict_says_whether_curation_pays() -> None:
    def rows(*costs: tuple[str, float]) -> list[pp.PlanRow]:
        # 10 informative groups each, rollouts = 10 x the cost per informative group
        return [pp.PlanRow(p, p, 20, 10, 10 * c, 0) for p, c in costs]

    base = ("uniform", 10.0)
    assert pp.verdict(rows(base, ("sieve", 12.0), ("posterior", 6.0))) == (
        "Curation pays here: posterior costs 0.60x uniform per informative group."
    )
    assert pp.verdict(rows(base, ("dapo", 10.2))) == (
        "Curation about breaks even: the cheapest, dapo, costs 1.02x uniform."
    )
    assert pp.verdict(rows(base, ("greso", 15.0), ("sieve", 30.0))) == (
        "Curation does not pay here: the cheapest, greso, costs 1.50x uniform."
    )
    refused = [pp.PlanRow("uniform", "uniform", note="refused: x"), *rows(("sieve", 5.0))]
    assert pp.verdict(refused).startswith("No verdict: uniform gives nothing to compare with")


def test_sieve_replays_keep_the_screen_and_fit_the_refine_to_the_pool() -> None:
    cfg = CurateConfig()  # screen 8, refine 32
    home = [(c.screen_g, c.refine_g) for c in pp.sieve_replays(cfg, top=40, g=4)]
    assert home == [(8, 28)]  # a curated home: refine_g - G, as a night's replay
    file = [(c.screen_g, c.refine_g) for c in pp.sieve_replays(cfg, top=16, g=8)]
    assert file == [(4, 4)]  # 16 a prompt: screen 4, refine 4, train 8
    assert pp.sieve_replays(cfg, top=2, g=2) == []


# ------------------------------------------------------------------ the command


@pytest.fixture
def curated_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, tuple[int, int]]:
    """A home with one simulated curation (revision rev-sim, model "simulated"); also the
    (groups, informative groups) of its screen run, from the ledger's group_stats view."""
    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: None)
    with Ledger.open(home) as ledger:
        result = curate(ledger, simulated_policy(reachable_problems(CURATE), RATES), CURATE)
        n, informative = ledger.sql(
            "SELECT count(*), count(*) FILTER (WHERE NOT zero_variance) FROM group_stats "
            "WHERE run_id = $r",
            {"r": result.screen_run},
        ).row(0)
    return home, (int(n), int(informative))


def fits(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    return lines


def policy_lines(lines: list[str]) -> dict[str, str]:
    return {p: next(x for x in lines if x.startswith(p)) for p in POLICY_ROWS}


def test_plan_on_a_curated_home(
    curated_home: tuple[Path, tuple[int, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    home, (groups, informative) = curated_home
    capsys.readouterr()
    # G = 8, the screen's own group size: uniform's row is the screen run's group_stats
    code, out, err = run_cli(["plan", "--home", str(home), "--g", "8"], capsys)
    assert code == 0 and err == "", err
    lines = fits(out)
    assert lines[0].startswith("Plan over the screen and refine samples of revision rev-sim")
    rows = policy_lines(lines)
    share = f"{100 * informative / groups:.1f} %"
    per = f"{8 * groups / informative:,.1f}"
    assert rows["uniform"].split()[1:4] == [str(groups), *share.split()] and per in rows["uniform"]
    assert "refused: needs 16 samples a prompt, some hold 8" in rows["greso ("]
    assert rows["sieve ("].startswith("sieve (screen 8, refine 24)")  # the curation's own config
    assert lines[-1].startswith("Curation ")
    # the default G is half the screen (4): every policy runs; --json has the same rows
    code, out, err = run_cli(["plan", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    assert "refused" not in out and fits(out)[-1].startswith("Curation ")
    code, out, err = run_cli(["plan", "--home", str(home), "--json"], capsys)
    data = json.loads(out)
    assert [r["policy"] for r in data["rows"]] == list(pp.PLAN_POLICIES)
    assert data["group_size"] == 4 and data["verdict"].startswith("Curation ")
    assert all(r["rollouts_deciding"] == 0 for r in data["rows"] if r["policy"] == "posterior")
    # --model by revision, by the model curation recorded, the same rows
    for model in ("rev-sim", "simulated"):
        code, again, err = run_cli(["plan", "--home", str(home), "--model", model], capsys)
        assert code == 0 and err == "" and "revision rev-sim" in again
    # the backtest runs the posterior arm on the same home
    argv = ["backtest", "--home", str(home), "--format", "json", "--policy", "posterior:g=4"]
    code, out, err = run_cli(argv, capsys)
    assert code == 0 and err == "", err
    (row,) = json.loads(out)
    assert row["policy"].startswith("posterior g=4 batch=8") and row["rollouts"] % 4 == 0


def test_plan_error_lines(
    curated_home: tuple[Path, tuple[int, int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, _ = curated_home
    capsys.readouterr()
    code, _, err = run_cli(["plan", "--home", str(home), "--model", "nope"], capsys)
    assert error_line(code, err) == (
        "error: the ledger holds no curation or training samples of model nope: screen a few "
        "prompts first (sieve curate --model nope --n 200), then run sieve plan --model nope again"
    )
    empty = tmp_path / "empty"
    Ledger.open(empty).close()  # a migrated ledger without any sample
    code, _, err = run_cli(["plan", "--home", str(empty)], capsys)
    line = error_line(code, err)
    assert "holds no curation or training samples of any model" in line
    assert "(sieve curate --n 200)" in line
    code, _, err = run_cli(["plan", "--home", str(tmp_path / "none")], capsys)
    assert "no ledger at" in error_line(code, err)
    code, _, err = run_cli(["plan", "--home", str(home), "--g", "1"], capsys)
    assert "--g 1: a group needs at least 2 samples" in error_line(code, err)


def write_pool(path: Path) -> None:
    """Two model revisions: r1 with 6 prompts x 8 samples, r2 with 2 prompts."""
    rows = []
    for rev, prompts in (("r1", 6), ("r2", 2)):
        for p in range(prompts):
            for i in range(8):
                right = (i + p) % (p + 2) == 0
                rows.append((f"{rev}-p{p}", i, float(right), right, rev, "arith", 1 + p % 3))
    schema = ["problem_id", "sample_idx", "reward", "correct", "model_revision", "family", "level"]
    pl.DataFrame(rows, schema=schema, orient="row").write_parquet(path)


def test_plan_over_a_pool_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pool.parquet"
    write_pool(path)
    code, out, err = run_cli(["plan", "--pool", str(path), "--home", str(tmp_path)], capsys)
    assert code == 0 and err == "", err
    assert "8 prompts, 64 samples" in " ".join(fits(out))
    assert set(policy_lines(fits(out))) == set(POLICY_ROWS)
    argv = ["plan", "--pool", str(path), "--model", "r1", "--home", str(tmp_path)]
    code, out, err = run_cli(argv, capsys)
    assert code == 0 and "6 prompts, 48 samples" in " ".join(fits(out))
    code, _, err = run_cli([*argv[:3], "--model", "r3", "--home", str(tmp_path)], capsys)
    assert "holds no samples of model r3 (it holds: r1, r2)" in error_line(code, err)
    bare = tmp_path / "bare.parquet"
    pl.read_parquet(path).drop("model_revision").write_parquet(bare)
    code, _, err = run_cli(["plan", "--pool", str(bare), "--model", "r1"], capsys)
    assert "has no model_revision column to pick --model r1 by" in error_line(code, err)


def test_plan_reads_training_groups_when_a_revision_has_no_curation(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # weights "ckpt-1" sampled two steps' groups in a training run and screened nothing
    now = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        ("t1", step, f"q{p}", i, "ckpt-1", float(c == "1"), c == "1")
        for step in (0, 1)
        for p, text in enumerate(["1010", "0000", "1111", "1000"])
        for i, c in enumerate(text)
    ]
    with Ledger.open(home) as ledger:
        ledger.run(
            "INSERT INTO train_runs (train_id, started_at, status) VALUES ('t1', $t, 'finished')",
            {"t": now},
        )
        ledger.con.executemany(
            "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, policy, reward, "
            "correct) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    capsys.readouterr()
    code, out, err = run_cli(["plan", "--home", str(home), "--model", "ckpt-1"], capsys)
    assert code == 0 and err == "", err
    text = " ".join(fits(out))
    assert "training groups sampled by revision ckpt-1" in text and "4 prompts, 32 samples" in text
    # G = 4 (half of 8): uniform's groups are step 0's, q0 and q3 informative
    assert policy_lines(fits(out))["uniform"].split()[1:4] == ["4", "50.0", "%"]
