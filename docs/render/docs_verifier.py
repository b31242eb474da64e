"""The generated blocks of docs/verifier.md: the sizes of the verifier's regression tables, and
the agreement block, rendered from `benchmarks/results/verifier_agreement.json`
(`benchmarks/verifier_agreement.py`).

The agreement block refuses results that were measured on another `math_verify_cases.csv` than
the committed one, or that stop short of the verifier version in `pipeline/scoring/verifiers.py`:
a version bump without a new measurement fails `make docs-check`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from render_base import RenderError, Results, num

ROOT = Path(__file__).resolve().parents[2]
SCORING = ROOT / "tests" / "scoring"
PR_FILE = "test_mixed_number_extraction.py"  # an unmerged pull request's file (see the .md)
_VERSION = re.compile(r'VERIFIER_VERSION = f"sieve-math/(\d+)\+')
# What a non-default option of a scored-0 row asks of the comparison (math_verify_cases.md).
_OPTION_KINDS = {
    "precision": "a numeric approximation of an exact gold, at the precision given",
    "allow_set_relation_comp": "an interval compared with an inequality",
    "strict": "symbols compared non-strictly",
    "match_types": "plain-number extraction off",
}
_LABELS = {
    "math-verify alone": "math-verify {v} alone (its defaults)",
    "math-verify, the tests' options": "math-verify {v}, each test's own options",
}


class AgreementError(Exception):
    """The results cannot be published as they are; the message is one line."""


def current_version() -> str:
    m = _VERSION.search((ROOT / "pipeline" / "scoring" / "verifiers.py").read_text())
    if m is None:
        raise AgreementError("pipeline/scoring/verifiers.py: no sieve-math version")
    return f"sieve-math/{m.group(1)}"


def _share(agree: int, total: int) -> str:
    return f"{agree:,}/{total:,} ({agree / total:.3f})" if total else "–"


def _known_reasons() -> dict[str, str]:
    reasons = {}
    for line in (SCORING / "math_verify_known_failures.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, reason = line.rsplit("  # ", 1)
            reasons[key] = reason.strip()
    return reasons


def _key(row: dict[str, Any]) -> str:
    fields = (row["group"], row["gold"], row["candidate"])
    return "|".join(
        f.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") for f in fields
    )


def agreement(data: dict[str, Any]) -> str:
    """The agreement table (one row per verifier) and the current version's disagreements."""
    with (SCORING / "math_verify_cases.csv").open(encoding="utf-8", newline="") as f:
        digest = hashlib.sha256(f.read().encode("utf-8")).hexdigest()
    table = data["table"]
    if table["sha256"] != digest:
        raise AgreementError(
            "verifier_agreement.json was measured on another math_verify_cases.csv "
            "(run benchmarks/verifier_agreement.py)"
        )
    measured = data["measured"]
    newest = measured[-1]["verifier"]
    if newest != current_version():
        raise AgreementError(
            f"verifier_agreement.json stops at {newest}; the verifier is {current_version()} "
            "(run benchmarks/verifier_agreement.py)"
        )
    pr = measured[0]["files"].get(PR_FILE, {"rows": 0})["rows"]
    lines = [
        f"Measured by `benchmarks/verifier_agreement.py` on `math_verify_cases.csv` as committed "
        f"({table['rows']:,} rows, {table['scored']:,} scored), math-verify "
        f"{data['math_verify']}, latex2sympy2_extended {data['latex2sympy2_extended']}. A row "
        "agrees when the verdict is its `expected`; each `sieve-math/N` is the newest commit "
        "touching `pipeline/scoring/` that carries it, in the bare-text reading "
        "(`marker_required=False`), run under `PYTHONHASHSEED` 0 (a version whose count another "
        f"seed changes shows the range). The last column is the {pr} rows of `{PR_FILE}`.",
        "",
        f"| verifier | commit | scored rows | all rows | `{PR_FILE}` |",
        "|---|---|---|---|---|",
    ]
    for m in measured:
        name = m["verifier"]
        label = _LABELS.get(name, "`{n}`").format(v=data["math_verify"], n=name)
        commit = f"`{m['commit'][:7]}`" if m["commit"] else ""
        if m["commit"] and "working tree" in m["commit"]:
            commit += " + working tree"
        part = m["files"].get(PR_FILE, {"rows": 0, "agree": 0})
        scored = _share(m["scored_agree"], m["scored"])
        seeds = m.get("scored_agree_by_seed", [])
        if seeds and min(seeds) != max(seeds):
            scored += f", {min(seeds)}–{max(seeds)} over {len(seeds)} hash seeds"
        lines.append(
            f"| {label} | {commit} | {scored} "
            f"| {_share(m['agree'], m['rows'])} | {_share(part['agree'], part['rows'])} |"
        )
    current = measured[-1]
    reasons = _known_reasons()
    kinds: Counter[str] = Counter()
    for row in current["disagree"]:
        if row["scored"]:
            kinds[f"{row['group']}: {reasons.get(_key(row), 'NOT LISTED')}"] += 1
        else:
            asks = [_OPTION_KINDS[o.split("=")[0]] for o in row["options"].split("; ")]
            kinds[f"{row['group']} ({row['options']}): {asks[-1]}; expected {row['expected']} "
                  "only under this non-default option, scored 0"] += 1  # fmt: skip
    lines += ["", f"The rows `{current['verifier']}` disagrees on, by reason:", ""]
    lines += [f"- {n} × {kind}" for kind, n in sorted(kinds.items())]
    return "\n".join(lines)


def verifier_tables(r: Results) -> str:
    """The sizes of the verifier's regression tables, counted in the committed test files."""
    import csv
    import io

    scoring = ROOT / "tests" / "scoring"
    with (scoring / "verifier_cases.csv").open(encoding="utf-8", newline="") as f:
        cases = sum(1 for _ in csv.DictReader(f))
    _, body = (scoring / "math_verify_cases.csv").read_text(encoding="utf-8").split("\n", 1)
    rows = list(csv.DictReader(io.StringIO(body)))
    scored = sum(r["scored"] == "1" for r in rows)
    known = [
        line
        for line in (scoring / "math_verify_known_failures.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return (
        f"As committed: `verifier_cases.csv` has {num(cases)} rows; `math_verify_cases.csv` "
        f"{num(len(rows))} rows, {num(scored)} of them scored, {len(known)} listed in "
        "`math_verify_known_failures.txt`. `test_math_verify_table.py` fails on any other row "
        f"that fails, so while it passes the verifier agrees on at least "
        f"{num(scored - len(known))} of the {num(scored)} scored rows "
        f"({num(1 - len(known) / scored, 3)})."
    )


def verifier_agreement(r: Results) -> str:
    """Every verifier version's agreement with Math-Verify's tables (docs_verifier.py)."""
    try:
        return agreement(r("verifier_agreement"))
    except AgreementError as e:
        raise RenderError(str(e)) from e


BLOCKS: dict[str, Callable[[Results], str]] = {
    "verifier-tables": verifier_tables,
    "verifier-agreement": verifier_agreement,
}
