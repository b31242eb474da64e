"""docs/verifier.md's agreement block (`docs/render/docs_verifier.py`, rendered by
`render_docs.py` from `verifier_agreement.json`): it reaches the verifier version in the code and
was measured on the committed `math_verify_cases.csv`, or it refuses to render (one line), so a
version bump without `benchmarks/verifier_agreement.py` fails `make docs-check`.

Test: `.venv/bin/pytest tests/test_docs_verifier.py -q`
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "docs" / "render"))
import docs_verifier  # noqa: E402 - benchmarks/ is a folder of scripts

from pipeline.scoring import VERIFIER_VERSION  # noqa: E402


def committed() -> dict:
    return json.loads((RESULTS / "verifier_agreement.json").read_text())


def test_the_committed_results_reach_the_current_version() -> None:
    data = committed()
    current = VERIFIER_VERSION.split("+")[0]
    assert docs_verifier.current_version() == current
    assert data["measured"][-1]["verifier"] == current
    body = docs_verifier.agreement(data)
    assert f"| `{current}` |" in body
    versions = [int(v) for v in re.findall(r"\| `sieve-math/(\d+)` \|", body)]
    assert versions == list(range(3, int(current.split("/")[1]) + 1))  # every version, in order
    assert "NOT LISTED" not in body  # each scored disagreement has its reason


def test_the_measured_rows_match_the_test_of_the_table() -> None:
    """The current version's scored disagreements are the known failures, no more, no less."""
    sys.path.insert(0, str(ROOT / "tests" / "scoring"))
    from test_math_verify_table import key, load_known

    current = committed()["measured"][-1]
    scored = {key(row) for row in current["disagree"] if row["scored"]}
    assert scored == set(load_known())
    assert current["errors"] == 0 and current["unstable"] == []  # the same under every hash seed


def test_results_that_stop_short_of_the_version_are_refused() -> None:
    data = committed()
    data["measured"] = data["measured"][:-1]
    with pytest.raises(docs_verifier.AgreementError, match=r"stops at sieve-math/\d+; the verif"):
        docs_verifier.agreement(data)


def test_results_of_another_table_are_refused() -> None:
    data = committed()
    data["table"]["sha256"] = "0" * 64
    with pytest.raises(docs_verifier.AgreementError, match=r"another math_verify_cases\.csv"):
        docs_verifier.agreement(data)
