"""Real SmolLM2-135M-Instruct chat completions, labelled by hand (smollm2_completions.jsonl; see
smollm2_completions.md), plus hand-written adversarial cases (chat_adversarial_cases.jsonl): with
`marker_required=True` no echo, list-number or unevaluated-expression completion is judged correct,
and precision against the labels is 1.0. Precision / recall and the false positives are printed.

Test: `.venv/bin/pytest tests/scoring/test_smollm2_completions.py -q -s`
Regenerate the raw completions: `tests/scoring/make_smollm2_completions.py` (labels are by hand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.scoring import verify_batch

HERE = Path(__file__).parent
CHEAT_KINDS = {"echo", "list-number", "boxed-expression"}


def load(name: str) -> list[dict[str, Any]]:
    lines = (HERE / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def judge(rows: list[dict[str, Any]]) -> list[bool]:
    verdicts = verify_batch(
        [r["completion"] for r in rows], [r["gold"] for r in rows], marker_required=True
    )
    assert all(v.reason != "verifier_error" for v in verdicts)
    return [v.correct is True for v in verdicts]


def confusion(rows: list[dict[str, Any]], got: list[bool]) -> dict[str, int]:
    out = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for row, correct in zip(rows, got, strict=True):
        key = ("t" if correct == bool(row["label"]) else "f") + ("p" if correct else "n")
        out[key] += 1
    return out


def test_smollm2_set_shape() -> None:
    rows = load("smollm2_completions.jsonl")
    assert len(rows) >= 150
    assert {"echo", "list-number"} <= {r["kind"] for r in rows}
    assert all(r["label"] in (0, 1) and r["note"] for r in rows)


def test_smollm2_marker_mode_precision() -> None:
    rows = load("smollm2_completions.jsonl")
    got = judge(rows)
    counts = confusion(rows, got)
    false_pos = [r for r, c in zip(rows, got, strict=True) if c and not r["label"]]
    missed = [r for r, c in zip(rows, got, strict=True) if not c and r["label"]]
    for row in false_pos:
        print(f"FALSE POSITIVE {row['kind']} gold={row['gold']!r} {row['completion'][:100]!r}")
    precision = counts["tp"] / max(1, counts["tp"] + counts["fp"])
    recall = counts["tp"] / max(1, counts["tp"] + counts["fn"])
    print(f"SmolLM2 marker mode: {counts}, precision {precision:.3f}, recall {recall:.3f}")
    assert not [r for r in false_pos if r["kind"] in CHEAT_KINDS]
    assert counts["fp"] == 0 and counts["tp"] >= 1  # precision 1.0
    # every miss is a right answer given without any answer marker (the mode's intended cost)
    assert {r["kind"] for r in missed} <= {"correct-unmarked"}


def test_adversarial_cases_marker_mode() -> None:
    rows = load("chat_adversarial_cases.jsonl")
    assert all(r["note"].startswith("hand-written") for r in rows)
    assert {r["kind"] for r in rows} >= CHEAT_KINDS
    got = judge(rows)
    pairs = zip(rows, got, strict=True)
    wrong = [(r["kind"], r["completion"]) for r, c in pairs if c != bool(r["label"])]
    print(f"adversarial marker mode: {confusion(rows, got)}")
    assert wrong == []
