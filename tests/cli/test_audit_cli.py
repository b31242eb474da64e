"""`sieve audit [RUN|latest]`: per-family disagreement rates of a curated home (asserted on the
frames the command shows), ledger text printed literally (never as Rich markup), and one-line
errors that create no ledger.

Test: `.venv/bin/pytest tests/cli/test_audit_cli.py -q`
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
from flows import cli
from flows.curate import curate
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.cli_runner import error_line, run_cli, shown_frames, wide_console
from tests.simulated import RATES, reachable_problems, simulated_policy
from tests.store.audit_rows import LONG, STRAY, hand_built

CFG = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=40)
FAMILIES = "disagreement rate by family (math-verify vs Sieve)"
CELLS = "worst family x level cells (highest disagreement rate first)"
EXAMPLES = "example disagreements (first 200 characters of the completion)"


def shown(monkeypatch: pytest.MonkeyPatch) -> dict[str, pl.DataFrame]:
    return shown_frames(monkeypatch, cli.query)


def wide(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return wide_console(monkeypatch, cli.query)


def test_audit_latest_prints_the_rates_per_family(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # math-verify calls every completion right: the audited wrong verdicts disagree
    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: True)
    with Ledger.open(home) as ledger:
        result = curate(ledger, simulated_policy(reachable_problems(CFG), RATES), CFG)
        runs = [result.screen_run, result.refine_run]
        expected = audit_module.by_family(ledger, runs)
        wrong = ledger.run(
            "SELECT count(*) FROM verifier_audit WHERE NOT sieve_correct AND list_contains($r, "
            "run_id)",
            {"r": runs},
        )[0][0]
    capsys.readouterr()  # the curation's own warning line
    frames = shown(monkeypatch)
    code, out, err = run_cli(["audit", "latest", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    families = frames[FAMILIES]
    assert families.equals(expected)
    assert families["family"].to_list() == ["arith"] and families["disagreements"][0] == wrong > 0
    assert families["disagreement_rate"][0] == pytest.approx(wrong / families["compared"][0])
    assert frames[CELLS]["disagreements"].sum() == wrong
    examples = frames[EXAMPLES]
    assert 0 < examples.height <= 5
    assert set(examples["sieve_correct"]) == {False} and set(examples["second_correct"]) == {True}
    assert set(examples["run_id"]) <= set(runs)
    assert f"curation {result.curriculum_id}" in out  # run_cli: 1,000 columns, nothing wraps


def test_ledger_text_is_printed_literally(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)
    buffer = wide(monkeypatch)
    code, _, err = run_cli(["audit", "screen-k", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    text = buffer.getvalue()
    assert LONG[:200] in text and STRAY in text  # `[bold]` kept, `[/oops]` did not raise
    assert "run screen-k" in text and "6 verdicts audited (1 guessed), 2 disagreements" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["audit", "screen-nope"], "screen-nope"),
        (["audit", "eval-1"], "eval run"),
        (["audit", "--examples", "-1"], "--examples"),
    ],
)
def test_bad_targets_are_one_line(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)
        eval_run = ledger.sql("SELECT * FROM sampling_runs").with_columns(
            pl.lit("eval-1").alias("run_id"), pl.lit("eval").alias("purpose")
        )
        ledger.write("sampling_runs", eval_run)
    code, _, err = run_cli([*argv, "--home", str(home)], capsys)
    assert needle in error_line(code, err)


def test_latest_without_a_curation_and_a_home_without_a_ledger(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)  # audit rows, but no curriculum
    code, _, err = run_cli(["audit", "--home", str(home)], capsys)
    assert "no curation yet" in error_line(code, err)
    empty = tmp_path / "empty"
    code, _, err = run_cli(["audit", "latest", "--home", str(empty)], capsys)
    assert "no ledger" in error_line(code, err)
    assert not empty.exists()  # a read command never creates a ledger
