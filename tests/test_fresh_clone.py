"""benchmarks/fresh_clone.py's reader of pytest's summary line (issue 47 point 1)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from fresh_clone import pytest_counts


def test_the_last_pytest_summary_line_is_read() -> None:
    log = (
        "collected 10 items\n"
        "===== 3 passed in 1.20s =====\n"
        "more output\n"
        "========= 2577 passed, 4 skipped, 1 xfailed in 312.44s (0:05:12) =========\n"
    )
    assert pytest_counts(log) == {"passed": 2577, "skipped": 4, "xfailed": 1}
    assert pytest_counts("== 1 failed, 2 passed in 3.0s ==") == {"failed": 1, "passed": 2}
    assert pytest_counts("no summary here") == {}
