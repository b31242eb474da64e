"""The committed judgement table `verifier_cases.csv` is judged as expected for >= 99 % of rows.

Columns: gold, candidate (a whole completion), expected (1 = correct, 0 = wrong). Policies the
table encodes:
* decimals compare exactly: `0.333`, `0.3333333` and `0.142857` are wrong for 1/3 and 1/7 (the fast
  path decides plain numbers without math-verify, whose default rounding to 6 digits would accept
  `0.333333`);
* a percent matches its face value or value / 100 (`25%` is right for both 25 and 0.25);
* the last `\\boxed{}` wins; in a bare or phrase answer with several numbers, the number after the
  last `=`, `:` or word counts ("3 + 4 = 7" answers 7; "5 apples plus 2 apples is 7 apples" too);
* an empty completion, an empty `\\boxed{}` or a bare marker is wrong (reason "no_answer").
The table keeps known-hard rows (e.g. "The answer is 5 apples, not 6") that the verifier gets wrong;
failing rows are printed.

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
        verdict = verify(row["candidate"], row["gold"], timeout=5.0)
        got = "1" if verdict.correct else "0"
        if verdict.reason == "verifier_error" or got != row["expected"]:
            failures.append((row["gold"], row["candidate"], row["expected"], verdict))
    for gold, candidate, expected, verdict in failures:
        print(f"FAIL gold={gold!r} candidate={candidate!r} expected={expected} -> {verdict}")
    accuracy = 1 - len(failures) / len(rows)
    print(f"table accuracy: {accuracy:.2%} ({len(rows) - len(failures)}/{len(rows)})")
    assert accuracy >= 0.99, f"{len(failures)} of {len(rows)} rows misjudged"
