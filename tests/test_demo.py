"""`sieve demo`: at the foundation stage problems land in the ledger and the verifiers agree;
the real demo's cells and settings; the summary, led by what the night's curation bought (its
own samples replayed, Sieve against uniform), then the held-out cells that moved, in 80 columns.

The nights themselves are not run here (tests/flows/test_loop.py runs nights): a curation with a
simulated policy stands for the night's, and the CLI test stubs the night with it.

Test: `.venv/bin/pytest tests/test_demo.py -q`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from flows.cli.summary import WIDTH, before_after, bought_lines, demo_summary, moved_lines
from flows.loop import DemoRun, curation_bought
from pipeline.jobs.data.demo import EXAMPLE_SQL, perturb, run_demo
from pipeline.selection import TINY_CURATE, CurateConfig
from pipeline.store import Ledger


def test_demo_fills_the_ledger_and_the_self_check_passes(tmp_path: Path) -> None:
    result = run_demo(tmp_path, n=200, seed=3)
    check = result.check
    assert check.problems == result.counts["problems"].sum() >= 200
    assert check.own_correct == check.problems
    assert check.perturbed_rejected == check.problems
    assert check.verifier_errors == 0
    with Ledger.open(tmp_path, read_only=True) as led:
        families = set(led.sql("SELECT DISTINCT family FROM problems")["family"].to_list())
    assert families == {"arith", "linear", "modular", "word", "gsm8k_example"}
    assert run_demo(tmp_path, n=200, seed=3).new_problems == 0  # idempotent re-run


def test_perturb_changes_every_kind_of_answer() -> None:
    assert perturb("41") == "42"
    assert perturb("-1/2") == "1/2"
    assert perturb("12.5") == "27/2"
    assert perturb("x+1") == "x+11"


# --- the real-model demo (`sieve demo --model`, `make demo-real`) ---------------------------------


def test_the_real_demo_cells_are_the_ones_smollm2_learns_in() -> None:
    """Each cell the real demo curates and evaluates has a measured pass rate in the learnable
    zone (5-80 %) in the committed results, and the night's settings fit together."""
    import json

    from flows.loop import DEMO_REAL_CELLS, demo_real_settings

    results = Path(__file__).parents[1] / "benchmarks" / "results"
    measured = {}
    for name, key in (("real_model.json", "by_family_level"), ("rg_pass_rates.json", "pass_rates")):
        for row in json.loads((results / name).read_text())[key]:
            measured[(row["family"], int(row["level"]))] = row["pass_rate"]
    curate, train, engine = demo_real_settings()
    cells = [(f, int(lv)) for f, spec in DEMO_REAL_CELLS.items() for lv in spec.split("-")]
    assert all(0.05 <= measured[c] <= 0.8 for c in cells), {c: measured[c] for c in cells}
    assert curate.mix == train.eval_families == DEMO_REAL_CELLS
    assert curate.max_group_size <= train.rollouts_per_step  # a group fits in one step
    cfg = train.grpo_config()
    from pipeline.jobs.train.settings import curation_sampling

    night, _ = curation_sampling(curate, Path("a-served-chat-model"), (), train)  # the night's rule
    assert (night.sampling.temperature, night.sampling.max_new_tokens) == (
        cfg.temperature,
        cfg.max_new_tokens,
    )  # curated at the temperature and budget it trains at
    assert engine.max_model_len is not None and engine.max_model_len >= cfg.max_new_tokens + 128


def test_both_demos_hand_the_night_to_the_loop_alike(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sieve demo` and `sieve demo --model` run one night through `flows.loop.loop` the same
    way: today's date (no start given), again, and the caller's `on_night` (a positional slip
    once passed it as the start date)."""
    import importlib.util

    import flows.loop

    seen: list[dict[str, object]] = []
    night = night_summary("cur-x")

    def fake_loop(home: object, nights: int, *args: object, **kwargs: object) -> list[dict]:
        seen.append({"nights": nights, "args": args, **kwargs})
        return [night]

    def on_night(index: int, summary: dict) -> None:
        pass

    real_spec = importlib.util.find_spec
    monkeypatch.setattr(flows.loop, "loop", fake_loop)
    monkeypatch.setattr(flows.loop, "curation_bought", lambda home, night: (None, "stubbed"))
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "vllm" else real_spec(name, *a),
    )
    (tmp_path / "models").mkdir()
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny")
    flows.loop.demo(tmp_path, say=lambda line: None, on_night=on_night)
    flows.loop.demo_real(tmp_path, str(tiny_model_dir), say=lambda line: None, on_night=on_night)
    for call in seen:
        assert call["nights"] == 1 and call["again"] is True and call["on_night"] is on_night
        assert len(call["args"]) == 2  # config and settings; the start left to its default


def test_the_real_demo_names_what_is_missing_and_writes_nothing(tmp_path: Path) -> None:
    import importlib.util

    from flows.loop import demo_real
    from pipeline.core.errors import SieveError

    with pytest.raises(SieveError, match="neither a model folder nor a built-in model"):
        demo_real(tmp_path, "no-such-model")
    if importlib.util.find_spec("vllm") is None:  # this venv: the demo says where vLLM is
        with pytest.raises(SieveError, match="make demo-real"):
            demo_real(tmp_path, "smollm2-135m")
    assert not (tmp_path / "models").exists()


def test_stage_lines_say_each_stage_once_off_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import time

    from flows.cli.common import progress, stage_lines
    from pipeline.core.hooks import report

    with progress("night") as bar:
        hook = stage_lines(bar, time.monotonic())
        report(hook, "night", "engine", 0, 1)
        report(hook, "night", "engine", 1, 1)
        for i in range(1, 4):
            report(hook, "curate", "screen", i, 3)
        for i in range(1, 3):
            report(hook, "train", "train", i, 2, {"reward_mean": 0.5})
    lines = [line.split(" (")[0] for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "night engine: started",
        "night engine: 1 of 1 done",
        "curate screen: 3 of 3 done",
        "train: 2 of 2 done",
    ]


# --- the demo's summary: what the night's curation bought (issue 47 point 2) --------------------

# the tiny policy's curation (screen G 8, refine +8, stage 1 G 8: replayed with groups of 4) on a
# simulated policy, small enough to curate in seconds
NIGHT = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=120, **{
    k: v for k, v in TINY_CURATE.items() if k != "mix"
})  # type: ignore[arg-type]  # fmt: skip
MOVED = {("arith", 2): (0.25, 0.5), ("linear", 1): (0.5, 0.25), ("modular", 3): (0.0, 0.125)}
UNMOVED_FAMILY = "word"  # no cell of it moves: named only by --wide


@pytest.fixture
def night_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home to curate in, with the curation's verifier audit off (as tests/test_backtest.py)."""
    import pipeline.jobs.curate.audit as audit_module

    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: None)
    return home


def curated(home: Path, seed: int = 3) -> tuple[str, str, str]:
    """(curriculum id, screen run, refine run) of one curation with NIGHT's knobs."""
    from flows.curate import curate
    from tests.simulated import RATES, reachable_problems, simulated_policy

    cfg = NIGHT.model_copy(update={"seed": seed})
    with Ledger.open(home) as ledger:
        result = curate(ledger, simulated_policy(reachable_problems(cfg), RATES), cfg)
    return result.curriculum_id, result.screen_run, result.refine_run


def mixed_groups(home: Path, run: str, first: int, last: int, among: list[str] | None) -> int:
    """Groups of samples first..last of `run` whose answers disagree, counted in SQL."""
    where = "" if among is None else "AND list_contains($among, problem_id)"
    with Ledger.open(home, read_only=True) as ledger:
        return int(
            ledger.run(
                "SELECT count(*) FROM (SELECT problem_id FROM rollouts WHERE run_id = $run AND "
                f"sample_idx BETWEEN $first AND $last {where} GROUP BY problem_id "
                "HAVING max(reward) > min(reward))",
                {"run": run, "first": first, "last": last}
                | ({} if among is None else {"among": among}),
            )[0][0]
        )


def night_summary(curriculum: str) -> dict[str, Any]:
    """A night's summary as `flows.nightly` returns it: 34 held-out cells, 3 of them moved."""
    cells = [(f, lv) for f in ("arith", "linear", "modular", "word") for lv in range(1, 9)]
    cells += [("gsm8k_example", 1), ("rg:basic_arithmetic", 1)]
    rows = lambda side: [  # noqa: E731
        {"family": f, "level": lv, "problems": 20, "greedy": 0.0, "errors": 0,
         "sampled": MOVED.get((f, lv), (0.0, 0.0))[side]}
        for f, lv in cells
    ]  # fmt: skip
    train = {
        "before": rows(0), "after": rows(1), "rollouts": 15360, "steps": 30,
        "heldout_before": {"sampled": 0.028, "greedy": 0.0},
        "heldout_after": {"sampled": 0.030, "greedy": 0.0},
        "final_revision": "rev-after",
    }  # fmt: skip
    curate = {"curriculum_id": curriculum, "kept": {"stage1": 1}, "rollouts_spent": {"screen": 1}}
    return {"night": "2026-12-05", "curate": curate, "train": train}


def demo_run(home: Path) -> DemoRun:
    curriculum, _, _ = curated(home)
    night = night_summary(curriculum)
    run = DemoRun(home, False, night)
    run.bought, run.bought_note = curation_bought(home, night)
    return run


def test_the_replay_is_the_nights_own_samples_sieve_against_uniform(night_home: Path) -> None:
    """The night's curation replayed on its own screen and refine runs: uniform's groups of 4
    are the first 4 screen samples of every candidate, Sieve's the last 4 refine samples of its
    kept prompts, which its selection (on the rest) never read; counted here in SQL. Another
    curation of the same revision in the ledger changes nothing."""
    home = night_home
    curriculum, screen, refine = curated(home)
    before, note = curation_bought(home, night_summary(curriculum))
    curated(home, seed=4)  # a second curation, same model revision
    replay, note = curation_bought(home, night_summary(curriculum))
    assert note is None and replay is not None and before is not None
    for arm in ("sieve", "uniform"):
        first, again = getattr(before, arm), getattr(replay, arm)
        assert (first.report, first.selected.to_list()) == (again.report, again.selected.to_list())
    g = replay.group_size
    assert g == 4 and replay.selected_on == NIGHT.screen_g + NIGHT.refine_g - g == 12
    with Ledger.open(home, read_only=True) as ledger:
        candidates = ledger.sql(
            "SELECT DISTINCT problem_id FROM rollouts WHERE run_id = $r", {"r": screen}
        )["problem_id"].to_list()
        refined = set(
            ledger.sql("SELECT DISTINCT problem_id FROM rollouts WHERE run_id = $r", {"r": refine})[
                "problem_id"
            ].to_list()
        )
    u, s = replay.uniform, replay.sieve
    assert replay.candidates == len(candidates) == u.rollouts // g
    assert u.informative_groups == mixed_groups(home, screen, 0, g - 1, None) > 0
    kept = s.selected.to_list()
    assert 0 < len(kept) == s.report["kept"] and set(kept) <= refined
    fresh = mixed_groups(home, refine, NIGHT.refine_g - g, NIGHT.refine_g - 1, kept)
    assert s.informative_groups == fresh
    assert s.report["informative_share"] == fresh / len(kept)
    assert u.report["informative_share"] == u.informative_groups / len(candidates)
    # curation as replayed: the screen on every candidate, refine_g - g on each survivor
    assert s.report["curation_rollouts"] == len(candidates) * NIGHT.screen_g + len(refined) * (
        NIGHT.refine_g - g
    )


def test_the_summary_leads_with_what_curation_bought_in_80_columns(night_home: Path) -> None:
    run = demo_run(night_home)
    lines = demo_summary(run)
    assert max(map(len, lines)) <= WIDTH
    assert lines[0] == "What the night's curation bought, on its own stored samples:"
    assert run.bought is not None
    s, u = run.bought.sieve, run.bought.uniform
    share = next(line for line in lines if line.strip().startswith("informative groups"))
    assert share.split()[-2:] == [
        f"{100 * s.report['informative_share']:.1f}%",
        f"{100 * u.report['informative_share']:.1f}%",
    ]
    counts = next(line for line in lines if line.strip().startswith("informative / groups"))
    assert counts.split()[-2:] == [
        f"{s.informative_groups}/{s.report['kept']}",
        f"{u.informative_groups}/{run.bought.candidates}",
    ]
    cost = next(line for line in lines if line.strip().startswith("rollouts per informative"))
    assert cost.split()[-2:] == [
        f"{s.report['rollouts_per_informative_group_training']:,.1f}",
        f"{u.report['rollouts_per_informative_group']:,.1f}",
    ]
    # then the cells that moved, largest sampled change first, and nothing of the others
    start = lines.index("Held-out cells whose pass@1 moved: 3 of 34, before -> after:")
    assert start > lines.index(cost)
    rows = [line.split() for line in lines[start + 2 : start + 5]]
    assert [r[:2] for r in rows] == [["arith", "2"], ["linear", "1"], ["modular", "3"]]
    assert rows[0][2:6] == ["20", "25.0%", "->", "50.0%"]
    assert rows[1][3:6] == ["50.0%", "->", "25.0%"]
    assert not any(UNMOVED_FAMILY in line for line in lines)
    assert lines[-1] == "All held-out cells together: sampled pass@1 2.8% -> 3.0%."


def test_the_summary_says_why_when_the_night_cannot_be_replayed() -> None:
    lines = bought_lines(None, "sieve needs 16 samples of 3 prompts")
    assert lines[1] == "  not replayed: sieve needs 16 samples of 3 prompts"
    table = before_after(night_summary("cur-x")["train"]).with_columns(
        sampled_after=pl.col("sampled_before"), sampled_gain=pl.lit(0.0)
    )
    assert moved_lines(table) == [
        "Held-out cells whose pass@1 moved: 0 of 34 (sieve demo --wide shows every cell)."
    ]


@pytest.mark.parametrize("model", [None, "smollm2-135m"])
@pytest.mark.parametrize("wide", [False, True])
def test_sieve_demo_prints_the_summary_first_and_the_table_only_with_wide(
    night_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    model: str | None,
    wide: bool,
) -> None:
    """`sieve demo` (and `--model`, the same code path) with the night itself stubbed: every
    line fits 80 columns; the summary comes before the rollouts and the ledger; the 34-cell
    table only with --wide."""
    from types import SimpleNamespace

    import flows.commands.common
    import flows.loop
    import pipeline.jobs.data.demo
    from flows.cli import nightly
    from tests.cli_runner import run_cli

    home = night_home
    run = demo_run(home)
    found = SimpleNamespace(
        check=SimpleNamespace(problems=3, own_correct=3, perturbed_rejected=3),
        counts=pl.DataFrame({"problems": [3]}),
        new_problems=0,
        ledger=home / "sieve.duckdb",
    )  # the foundation check, passed
    monkeypatch.setattr(pipeline.jobs.data.demo, "run_demo", lambda *args, **kwargs: found)
    monkeypatch.setattr(flows.loop, "demo", lambda *args, **kwargs: run)
    monkeypatch.setattr(flows.loop, "demo_real", lambda *args, **kwargs: run)
    monkeypatch.setattr(flows.commands.common, "start_flows", lambda home: None)
    argv = ["demo", "--home", str(home)] + (["--model", model] if model else [])
    code, out, err = run_cli(argv + (["--wide"] if wide else []), capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert max(map(len, lines)) <= WIDTH
    order = [
        "What the night's curation bought, on its own stored samples:",
        "Held-out cells whose pass@1 moved: 3 of 34, before -> after:",
        "All held-out cells together: sampled pass@1 2.8% -> 3.0%.",
    ]
    at = [lines.index(line) for line in order]
    assert at == sorted(at)
    spent = next(i for i, line in enumerate(lines) if line.startswith("rollouts spent:"))
    assert spent > at[-1]
    table = [line for line in lines[at[-1] : spent] if UNMOVED_FAMILY in line]
    assert len(table) == (8 if wide else 0)  # every cell of the family, one row each
    # each query to try is one command, its clauses on continuation lines inside the quotes
    commands: list[str] = []
    for line in lines[lines.index("try (after `source .venv/bin/activate`):") + 1 :]:
        if line.startswith("  sieve sql "):
            commands.append(line.strip())
        else:
            assert line.startswith("    ") and commands, line
            commands[-1] += " " + line.strip()
    assert commands == [f'sieve sql "{q}"' for q in [*EXAMPLE_SQL, *nightly.LOOP_SQL]]
