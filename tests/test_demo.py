"""`sieve demo` at the foundation stage: problems land in the ledger and the verifiers agree."""

from __future__ import annotations

from pathlib import Path

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
