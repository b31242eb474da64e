"""The committed judgement table `verifier_cases.csv` is judged as expected on every row.

The table is the raw format's (bare answers, as the tiny policy writes them), so it is judged
with `marker_required=False`; the hedge, retraction, joined-digit and touching-mark rows are there
in both directions (each value of `5 or 7` is wrong; `6, not 5` is right for 6 only).

Columns: gold, candidate (a whole completion), expected (1 = correct, 0 = wrong). Policies the
table encodes:
* decimals compare exactly: `0.333`, `0.3333333` and `0.142857` are wrong for 1/3 and 1/7 (the fast
  path decides plain numbers without math-verify, whose default rounding to 6 digits would accept
  `0.333333`);
* a percent matches its face value or value / 100 (`25%` is right for both 25 and 0.25), the
  latter only for a gold that is not a whole number (`100%` is wrong for 1);
* the last `\\boxed{}` wins; in a bare or phrase answer with several numbers, the number after the
  last `=`, `:` or word counts ("3 + 4 = 7" answers 7; "5 apples plus 2 apples is 7 apples" too);
* an empty completion, an empty `\\boxed{}` or a bare marker is wrong (reason "no_answer").
Failing rows are printed; one misjudged row fails the test (a row cannot regress silently).

Test: `.venv/bin/pytest tests/scoring/test_table.py -q -s`
"""

from __future__ import annotations

import csv
from pathlib import Path

from pipeline.scoring import verify

TABLE = Path(__file__).with_name("verifier_cases.csv")


def load_rows() -> list[dict[str, str]]:
    with TABLE.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_table_shape() -> None:
    rows = load_rows()
    assert len(rows) >= 200
    assert {r["expected"] for r in rows} == {"0", "1"}
    assert all(set(r) == {"gold", "candidate", "expected"} for r in rows)


def test_table_accuracy() -> None:
    rows = load_rows()
    failures = []
    for row in rows:
        verdict = verify(row["candidate"], row["gold"], timeout=5.0, marker_required=False)
        got = "1" if verdict.correct else "0"
        if verdict.reason == "verifier_error" or got != row["expected"]:
            failures.append((row["gold"], row["candidate"], row["expected"], verdict))
    for gold, candidate, expected, verdict in failures:
        print(f"FAIL gold={gold!r} candidate={candidate!r} expected={expected} -> {verdict}")
    print(f"table: {len(rows) - len(failures)}/{len(rows)} rows judged as expected")
    assert failures == [], f"{len(failures)} of {len(rows)} rows misjudged"
