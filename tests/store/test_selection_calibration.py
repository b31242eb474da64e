"""The view `selection_calibration` (migration 0018) on a ledger written by hand, its numbers
worked out by hand; `sieve stats` shows the runs' rows (read from the frames the command shows)
and the HTML report has the section.

Test: `.venv/bin/pytest tests/store/test_selection_calibration.py -q`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.store import Ledger
from tests.cli_runner import run_cli, shown_frames

# run train-a (picked by the difficulty model): per step, its predicted_informative and its
# groups of 2 as k correct of 2 (informative when 0 < k < 2)
PICKED = {
    0: (0.5, [1, 2]),
    1: (0.7, [1, 1, 0]),
    2: (0.4, [0, 0]),
    3: (0.4, [1, 0]),
    4: (0.9, [1, 1]),
    5: (0.3, [1]),  # and a skipped prompt: no group
    6: (0.6, [2, 0]),
    7: (0.6, [1, 2]),
}
# 8 steps: quarter q holds steps 2(q-1) and 2q-1; predicted = Σ predicted x groups / groups
EXPECTED = [  # quarter, first, last, steps, groups, informative, predicted, realised
    (1, 0, 1, 2, 5, 3, (0.5 * 2 + 0.7 * 3) / 5, 3 / 5),  # 0.62 vs 0.6
    (2, 2, 3, 2, 4, 1, 0.4, 1 / 4),  # 0.4 vs 0.25
    (3, 4, 5, 2, 3, 3, (0.9 * 2 + 0.3 * 1) / 3, 1.0),  # 0.7 vs 1
    (4, 6, 7, 2, 4, 1, 0.6, 1 / 4),  # 0.6 vs 0.25
]


def write_runs(ledger: Ledger) -> None:
    """train-a as PICKED (a NaN prediction at step 8 counts for nothing), and train-b, a
    curriculum run with groups but no prediction (no rows)."""
    metrics = [("train-a", s, "predicted_informative", p) for s, (p, _) in PICKED.items()]
    metrics += [("train-a", 8, "predicted_informative", float("nan"))]
    metrics += [("train-a", s, "pass_rate", 0.5) for s in PICKED]
    metrics += [("train-b", s, "pass_rate", 0.5) for s in range(4)]
    ledger.write(
        "train_metrics",
        pl.DataFrame(metrics, schema=["train_id", "step", "name", "value"], orient="row"),
    )
    rows = [
        ("train-a", s, f"p{s}-{j}", i, "rev0", float(i < k), i < k)
        for s, (_, groups) in PICKED.items()
        for j, k in enumerate(groups)
        for i in range(2)
    ]
    rows += [
        ("train-b", s, "q", i, "rev0", float(i == 0), i == 0) for s in range(4) for i in range(2)
    ]
    schema = ["train_id", "step", "problem_id", "sample_idx", "policy", "reward", "correct"]
    ledger.write("train_rollouts", pl.DataFrame(rows, schema=schema, orient="row"))
    ledger.write(
        "train_skips",
        pl.DataFrame(
            {"train_id": ["train-a"], "step": [5], "problem_id": ["skipped"], "streak": [3],
             "p_skip": [0.5]}
        ),
    )  # fmt: skip


def test_the_view_sets_predicted_against_realised_by_quarter() -> None:
    with Ledger.memory() as ledger:
        write_runs(ledger)
        got = ledger.sql("SELECT * FROM selection_calibration ORDER BY train_id, quarter")
    assert got["train_id"].unique().to_list() == ["train-a"]
    for row, want in zip(got.iter_rows(named=True), EXPECTED, strict=True):
        quarter, first, last, steps, groups, informative, predicted, realised = want
        assert (row["quarter"], row["first_step"], row["last_step"], row["steps"]) == (
            quarter, first, last, steps
        )  # fmt: skip
        assert (row["groups"], row["informative_groups"]) == (groups, informative)
        assert row["predicted_informative"] == pytest.approx(predicted, abs=1e-12)
        assert row["realised_informative"] == pytest.approx(realised, abs=1e-12)
        assert row["abs_error"] == pytest.approx(abs(predicted - realised), abs=1e-12)


def test_sieve_stats_shows_the_runs_calibration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import flows.cli.query

    with Ledger.open(tmp_path) as ledger:
        write_runs(ledger)
    frames = shown_frames(monkeypatch, flows.cli.query)
    code, _, err = run_cli(["stats", "--home", str(tmp_path)], capsys)
    assert code == 0, err
    (title,) = [t for t in frames if "calibration" in t]
    table = frames[title]
    assert table["train_id"].unique().to_list() == ["train-a"]
    assert table["quarter"].to_list() == [1, 2, 3, 4]
    assert table["steps"].to_list() == ["0-1", "2-3", "4-5", "6-7"]
    assert table["groups"].to_list() == [5, 4, 3, 4]
    assert table["predicted"].to_list() == pytest.approx([0.62, 0.4, 0.7, 0.6])
    assert table["realised"].to_list() == pytest.approx([0.6, 0.25, 1.0, 0.25])
    assert table["abs_error"].to_list() == pytest.approx([0.02, 0.15, 0.3, 0.35])


def test_sieve_stats_leaves_the_table_out_without_such_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import flows.cli.query

    Ledger.open(tmp_path).close()
    frames = shown_frames(monkeypatch, flows.cli.query)
    code, _, err = run_cli(["stats", "--home", str(tmp_path)], capsys)
    assert code == 0, err
    assert not [t for t in frames if "calibration" in t]


def test_the_report_has_the_calibration_section(tmp_path: Path) -> None:
    from pipeline.jobs.report import build_report
    from pipeline.jobs.report.page import table_html
    from pipeline.jobs.report.sections import selection_calibration

    with Ledger.memory() as ledger:
        write_runs(ledger)
        section = selection_calibration(ledger)
        result = build_report(ledger, tmp_path)
    assert not section.note and section.title not in result.empty_sections
    ((caption, frame),) = section.tables
    assert frame["realised"].to_list() == pytest.approx([0.6, 0.25, 1.0, 0.25])
    page = result.path.read_text()
    assert f'<section id="{section.key}"><h2>{section.title}</h2>' in page
    assert table_html(caption, frame) in page
