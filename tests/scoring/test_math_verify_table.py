"""Math-Verify's own regression tables (math_verify_cases.csv: every parametrized gold/prediction
case of all its stored test files, see math_verify_cases.md): Sieve's `verify`, reading the bare
text (default, not marker mode), agrees with `expected` on at least as many scored rows (those
whose expectation does not depend on non-default math-verify options) as math-verify alone does
(`verify(parse(gold), parse(pred))`, its defaults), and fails no row outside
math_verify_known_failures.txt, so a row that passed cannot regress unnoticed. Failing rows are
printed, and so are listed rows that now pass (trim the list then).

Test: `.venv/bin/pytest tests/scoring/test_math_verify_table.py -q -s`
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from pipeline.scoring import verify

pytestmark = pytest.mark.integration  # 11 s

TABLE = Path(__file__).with_name("math_verify_cases.csv")
KNOWN = Path(__file__).with_name("math_verify_known_failures.txt")
REASON_SEP = "  # "  # a known-failure line: `group|gold|candidate  # reason`


def load_rows() -> list[dict[str, str]]:
    with TABLE.open(encoding="utf-8", newline="") as f:  # keep a case's "\r\n"
        text = f.read()
    header, body = text.split("\n", 1)
    assert header.startswith("# ") and "HuggingFace" in header
    assert "MIT" in header and "Apache" in header  # test_all.py's header; the repository's LICENCE
    return list(csv.DictReader(io.StringIO(body)))


def key(row: dict[str, str]) -> str:
    """`group|gold|candidate` on one line: line breaks and tabs written as \\n, \\r, \\t."""
    fields = (row["group"], row["gold"], row["candidate"])
    return "|".join(
        f.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") for f in fields
    )


def load_header() -> str:
    with TABLE.open(encoding="utf-8", newline="") as f:
        return f.readline()


def load_known() -> dict[str, str]:
    """Known failing rows: key -> reason (blank lines and `#` lines are comments)."""
    known = {}
    for line in KNOWN.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        assert REASON_SEP in line, f"no reason: {line!r}"
        row_key, reason = line.rsplit(REASON_SEP, 1)
        assert reason.strip(), f"empty reason: {line!r}"
        known[row_key] = reason.strip()
    return known


def _raw_mode() -> dict[str, Any]:
    """Keyword arguments for the bare-text reading Math-Verify's own tests assume (Sieve's
    default is the marker reading of chat text)."""
    return {"marker_required": False}


def test_table_shape() -> None:
    rows, header = load_rows(), load_header()
    assert len(rows) >= 341
    assert {r["expected"] for r in rows} == {"0", "1"}
    assert {r["scored"] for r in rows} == {"0", "1"}
    for r in rows:
        file, _, function = r["group"].partition("::")
        assert file.startswith("test_") and file.endswith(".py") and function.startswith("test_")
        assert len(r["commit"]) == 40 and r["commit"] in header, r  # the header names it
        assert r["helper"] in ("compare_strings", "parse+verify"), r
    assert {r["group"].split("::")[0] for r in rows} >= {
        "test_all.py",
        "test_numina_cases.py",
        "test_mixed_number_extraction.py",
    }
    assert any("\r\n" in r["candidate"] for r in rows)  # read as written
    expected: dict[str, str] = {}
    for r in rows:  # a key names one scored case (upstream repeats a few, some with other options)
        if r["scored"] == "1":
            assert expected.setdefault(key(r), r["expected"]) == r["expected"], key(r)
    known = load_known()
    scored = set(expected)
    assert set(known) <= scored, sorted(set(known) - scored)  # no stale or misspelt entry


def math_verify_alone(row: dict[str, str]) -> bool:
    """Whether math-verify with its defaults, as Sieve calls it, gives `expected`."""
    from math_verify import parse
    from math_verify import verify as mv_verify

    return int(mv_verify(parse(row["gold"]), parse(row["candidate"]))) == int(row["expected"])


def test_sieve_agrees_with_math_verify_table() -> None:
    rows = [r for r in load_rows() if r["scored"] == "1"]
    known = load_known()
    mode = _raw_mode()
    failures = []
    for row in rows:
        verdict = verify(row["candidate"], row["gold"], timeout=10.0, **mode)
        got = "1" if verdict.correct else "0"
        if verdict.reason == "verifier_error" or got != row["expected"]:
            failures.append((row, verdict))
    failed = {key(row) for row, _ in failures}
    for row, verdict in failures:
        tag = "known" if key(row) in known else "NEW"
        print(
            f"FAIL ({tag}) {row['group']} gold={row['gold'][-80:]!r}"
            f" candidate={row['candidate'][-80:]!r} expected={row['expected']}"
            f" -> {verdict.reason} ({verdict.detail})"
        )
    for row_key in sorted(set(known) - failed):
        print(f"NOW PASSES (trim from {KNOWN.name}): {row_key[:160]}")
    agreement = 1 - len(failures) / len(rows)
    print(
        f"math-verify tables agreement ({mode or 'default'}): {agreement:.3f}"
        f" ({len(rows) - len(failures)}/{len(rows)}); known failures {len(known)}"
    )
    new = sorted(failed - set(known))
    assert not new, f"{len(new)} rows fail that are not in {KNOWN.name}: {[k[:120] for k in new]}"
    alone = sum(math_verify_alone(row) for row in rows) / len(rows)
    print(f"math-verify alone (defaults): {alone:.3f}")
    assert agreement >= alone, f"{len(failures)} of {len(rows)} rows disagree"
