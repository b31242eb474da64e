"""Math-Verify's own regression table (math_verify_cases.csv, see math_verify_cases.md): Sieve's
`verify` agrees with `expected` on >= 97.6 % of the scored rows (those whose expectation does not
depend on non-default math-verify options). Failing rows are printed.

Test: `.venv/bin/pytest tests/scoring/test_math_verify_table.py -q -s`
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from pipeline.scoring import verify

TABLE = Path(__file__).with_name("math_verify_cases.csv")
BAR = 0.976  # math-verify alone on Math-Verify's table, as measured in issue 15


def load_rows() -> list[dict[str, str]]:
    text = TABLE.read_text(encoding="utf-8")
    header, body = text.split("\n", 1)
    assert header.startswith("# ") and "HuggingFace" in header and "MIT" in header
    return list(csv.DictReader(io.StringIO(body)))


def test_table_shape() -> None:
    rows = load_rows()
    assert len(rows) >= 200
    assert {r["expected"] for r in rows} == {"0", "1"}
    assert {r["scored"] for r in rows} == {"0", "1"}
    assert all(r["group"].startswith("test_") for r in rows)


def test_sieve_agrees_with_math_verify_table() -> None:
    rows = [r for r in load_rows() if r["scored"] == "1"]
    failures = []
    for row in rows:
        verdict = verify(row["candidate"], row["gold"], timeout=10.0)
        got = "1" if verdict.correct else "0"
        if verdict.reason == "verifier_error" or got != row["expected"]:
            failures.append((row, verdict))
    for row, verdict in failures:
        print(
            f"FAIL {row['group']} gold={row['gold'][-80:]!r} candidate={row['candidate'][-80:]!r}"
            f" expected={row['expected']} -> {verdict.reason} ({verdict.detail})"
        )
    agreement = 1 - len(failures) / len(rows)
    print(f"math-verify table agreement: {agreement:.3f} ({len(rows) - len(failures)}/{len(rows)})")
    assert agreement >= BAR, f"{len(failures)} of {len(rows)} rows disagree"
