"""`sieve demo` at the foundation stage: problems land in the ledger and the verifiers agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.demo import perturb, run_demo
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
    assert (curate.sampling.temperature, curate.sampling.max_new_tokens) == (
        cfg.temperature,
        cfg.max_new_tokens,
    )  # curated at the temperature and budget it trains at
    assert engine.max_model_len is not None and engine.max_model_len >= cfg.max_new_tokens + 128


def test_the_real_demo_names_what_is_missing_and_writes_nothing(tmp_path: Path) -> None:
    import importlib.util

    from flows.loop import demo_real
    from pipeline.errors import SieveError

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
    from pipeline.hooks import report

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
