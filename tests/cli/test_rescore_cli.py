"""`sieve rescore [RUN|latest]`: the changes per family of a curated home (asserted on the
frames the command shows and on a wide console), ledger text printed literally (never as Rich
markup), and one-line errors that create no ledger.

Test: `.venv/bin/pytest tests/cli/test_rescore_cli.py -q`
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import polars as pl
import pytest

import pipeline.jobs.curate.audit as audit_module
from flows import cli
from flows.curate import curate
from pipeline.jobs.curate import rescore as rescore_lib
from pipeline.scoring import VERIFIER_VERSION
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.cli_runner import error_line, run_cli, shown_frames, wide_console
from tests.simulated import RATES, reachable_problems, simulated_policy
from tests.store.audit_rows import AUDITED, LONG, STRAY, hand_built

CFG = CurateConfig(n_candidates=120, mix={"arith": "1-6"}, seed=3, chunk_size=40)
CHANGES = f"verdict changes by family under {VERIFIER_VERSION}"
EXAMPLES = "example changed verdicts (first 200 characters of the completion)"


def shown(monkeypatch: pytest.MonkeyPatch) -> dict[str, pl.DataFrame]:
    return shown_frames(monkeypatch, cli.replay)


def wide(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return wide_console(monkeypatch, cli.replay)


def test_rescore_latest_prints_the_changes_per_family(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(audit_module, "math_verify_only", lambda text, answer, timeout: None)
    with Ledger.open(home) as ledger:
        result = curate(ledger, simulated_policy(reachable_problems(CFG), RATES), CFG)
        runs = [result.screen_run, result.refine_run]
        n = ledger.run("SELECT count(*) FROM rollouts WHERE list_contains($r, run_id)", {"r": runs})
        before = ledger.checksum("rollouts")
    capsys.readouterr()
    frames, buffer = shown(monkeypatch), wide(monkeypatch)
    code, _, err = run_cli(["rescore", "latest", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    with Ledger.open(home, read_only=True) as ledger:
        expected = rescore_lib.changes(ledger, runs, VERIFIER_VERSION)
        assert ledger.checksum("rollouts") == before
        assert ledger.checksum("rescored_verdicts")[0] == n[0][0] > 0
    changes = frames[CHANGES]
    assert changes.equals(expected) and changes["family"].to_list() == ["arith"]
    assert changes["rescored"].to_list() == [n[0][0]] and changes["changed"].to_list() == [0]
    assert frames[EXAMPLES].height == 0
    text = buffer.getvalue()
    assert f"curation {result.curriculum_id} ({', '.join(runs)})" in text
    assert f"{n[0][0]} verdicts re-judged under verifier {VERIFIER_VERSION} (0 rescored" in text
    assert "0 of " in text and "0 correct -> wrong, 0 wrong -> correct" in text
    buffer.truncate(0)
    code, _, err = run_cli(["rescore", "--home", str(home)], capsys)  # latest is the default
    assert code == 0 and err == "", err
    assert f"0 verdicts re-judged under verifier {VERIFIER_VERSION} ({n[0][0]} rescored" in (
        buffer.getvalue()
    )


def test_ledger_text_is_printed_literally(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)  # rollouts without a stored verdict: every rescored one is a change
    buffer = wide(monkeypatch)
    code, _, err = run_cli(["rescore", "screen-k", "--examples", "10", "--home", str(home)], capsys)
    assert code == 0 and err == "", err
    text = buffer.getvalue()
    assert LONG[:200] in text and STRAY in text  # `[bold]` kept, `[/oops]` did not raise
    assert f"run screen-k (screen-k): {len(AUDITED)} verdicts re-judged" in text
    n = len(AUDITED)  # none had a stored verdict
    assert f"{n} of {n} changed: 0 correct -> wrong, 0 wrong -> correct, {n} to or from" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["rescore", "screen-nope"], "screen-nope"),
        (["rescore", "cur-nope"], "cur-nope"),
        (["rescore", "--examples", "-1"], "--examples"),
    ],
)
def test_bad_targets_are_one_line(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)
    code, _, err = run_cli([*argv, "--home", str(home)], capsys)
    assert needle in error_line(code, err)
    with Ledger.open(home, read_only=True) as ledger:
        assert ledger.checksum("rescored_verdicts")[0] == 0


def test_latest_without_a_curation_and_a_home_without_a_ledger(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)  # rollouts, but no curriculum
    code, _, err = run_cli(["rescore", "--home", str(home)], capsys)
    assert "no curation yet" in error_line(code, err)
    empty = tmp_path / "empty"
    code, _, err = run_cli(["rescore", "latest", "--home", str(empty)], capsys)
    assert "no ledger" in error_line(code, err)
    assert not empty.exists()  # rescore adds to a ledger, never creates one


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_home_is_one_line(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Ledger.open(home) as ledger:
        hand_built(ledger)
        path = ledger.path
    assert path is not None
    path.chmod(0o444)
    home.chmod(0o555)
    try:
        code, _, err = run_cli(["rescore", "screen-k", "--home", str(home)], capsys)
    finally:
        home.chmod(0o755)
        path.chmod(0o644)
    assert "cannot open ledger" in error_line(code, err)
