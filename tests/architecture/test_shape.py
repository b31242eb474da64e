"""The product's shape held to its limits (`tests/architecture/shape.py` counts it): folders of
≤ 12 modules in pipeline/ and flows/, files of ≤ 600 lines (≤ 400 in grpo_core), the ledger's SQL
only in pipeline/store, no "issue N" in product code, the README or the manual pages, a README
of ≤ 150 lines.

What is over a limit today is listed in `OVER` with its count: a listed item may shrink but not
grow, nothing unlisted may cross a limit, and an item that has come under its limit must leave
the list (so the list is always today's). The self-tests run each counter on snippets that
break its rule, so no check passes by finding nothing.

Test: `.venv/bin/pytest tests/architecture -q`; `python tests/architecture/shape.py` prints the
counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.architecture import shape

# today's items over a limit (the redesign's remaining work), each at most its count
OVER: dict[str, dict[str, int]] = {
    "folders_over_limit": {
        "pipeline/problems": 16,
        "pipeline/scoring": 16,
    },
    "files_over_limit": {},
    "sql_outside_store": {
        "flows/cli/nightly.py": 2,
        "flows/commands/training.py": 1,
        "pipeline/integrations/card.py": 2,
        "pipeline/integrations/ledger_run.py": 4,
        "pipeline/jobs/curate/audit.py": 3,
        "pipeline/jobs/analysis/backtest_arms.py": 1,
        "pipeline/jobs/curate/curation.py": 2,
        "pipeline/jobs/data/demo.py": 4,
        "pipeline/jobs/analysis/evaluate.py": 1,
        "pipeline/jobs/data/export.py": 1,
        "pipeline/jobs/train/lineage.py": 3,
        "pipeline/jobs/analysis/policy_forecast.py": 3,
        "pipeline/jobs/train/recorder.py": 3,
        "pipeline/jobs/train/replay.py": 1,
        "pipeline/jobs/analysis/stats.py": 3,
        "pipeline/jobs/train/trainee.py": 3,
        "pipeline/selection/sql_macros.py": 1,
    },
}


def ratchet(name: str, now: dict[str, int], listed: dict[str, int]) -> list[str]:
    """What breaks the ratchet: an unlisted item, a listed one that grew, a listed one no longer
    over its limit (remove it from OVER)."""
    problems = [f"{name}: {k} is {n}, over the limit" for k, n in now.items() if k not in listed]
    problems += [
        f"{name}: {k} grew to {n} (listed at {listed[k]})"
        for k, n in now.items()
        if k in listed and n > listed[k]
    ]
    problems += [f"{name}: {k} is within its limit now: remove it from OVER" for k in listed
                 if k not in now]  # fmt: skip
    return problems


@pytest.mark.parametrize("name", sorted(OVER))
def test_nothing_crosses_a_limit_and_the_list_of_exceptions_only_shrinks(name: str) -> None:
    now = shape.counts()[name]
    assert isinstance(now, dict)
    assert ratchet(name, now, OVER[name]) == []


def test_no_issue_numbers_and_a_short_readme() -> None:
    counts = shape.counts()
    assert counts["issue_references"] == {}
    assert counts["readme_lines"] <= shape.README_LINES


def test_the_ratchet_reports_new_grown_and_stale_items() -> None:
    listed = {"a": 5, "b": 3}
    assert ratchet("x", {"a": 5, "b": 3}, listed) == []
    assert ratchet("x", {"a": 4, "b": 3}, listed) == []  # shrinking is fine
    assert ratchet("x", {"a": 6, "b": 3}, listed) == ["x: a grew to 6 (listed at 5)"]
    assert ratchet("x", {"a": 5, "b": 3, "c": 1}, listed) == ["x: c is 1, over the limit"]
    assert ratchet("x", {"a": 5}, listed) == ["x: b is within its limit now: remove it from OVER"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('q = "SELECT a FROM t"', 1),
        ('q = f"SELECT {col} FROM {table} WHERE x = ?"', 1),
        ('q = """\n  INSERT INTO runs VALUES (?)\n"""', 1),
        ('q = "UPDATE runs SET status = ?"', 1),
        ('q = "DELETE FROM runs"', 1),
        ('q = "CREATE OR REPLACE VIEW v AS SELECT 1 FROM t"', 1),
        ('q = "COPY (SELECT 1) TO ?"', 1),
        ('def f():\n    """Reads SELECT a FROM t, in prose."""\n    return 1', 0),
        ('q = "select the best prompts from the pool"', 0),  # English, not SQL
        ('q = "SELECT"', 0),
    ],
)
def test_sql_is_found_in_code_and_not_in_prose(source: str, expected: int) -> None:
    assert shape.sql_in(source) == expected


def test_the_counters_read_a_tree(tmp_path: Path) -> None:
    for i in range(13):
        (tmp_path / "pipeline" / "big").mkdir(parents=True, exist_ok=True)
        (tmp_path / "pipeline" / "big" / f"m{i}.py").write_text("x = 1\n")
    (tmp_path / "pipeline" / "big" / "__init__.py").write_text("")
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "long.py").write_text("x = 1\n" * 601 + 'q = "SELECT a FROM t"\n')
    (tmp_path / "grpo_core").mkdir()
    (tmp_path / "grpo_core" / "mid.py").write_text("# see issue 12\n" + "x = 1\n" * 400)
    (tmp_path / "README.md").write_text("line\n" * 151)
    counts = shape.counts(tmp_path)
    assert counts["folders_over_limit"] == {"pipeline/big": 13}
    assert counts["files_over_limit"] == {"flows/long.py": 602, "grpo_core/mid.py": 401}
    assert counts["sql_outside_store"] == {"flows/long.py": 1}
    assert counts["issue_references"] == {"grpo_core/mid.py": 1}
    assert counts["readme_lines"] == 151
