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


def test_real_model_labels_precision_and_recall() -> None:
    """The 136 hand-labelled SmolLM2 completions of `benchmarks/real_model.py` (labels in
    benchmarks/real_model_labels.jsonl, texts in results/real_model_pool.parquet), judged in the
    default chat mode. sieve-math/3 scored them at precision 0.947 (5 false positives), recall
    0.989; the committed-answer reading removes four false positives (`7x = 7` and `x - 2 = 2`
    for x) and costs one recall case, a completion that states 53 as "the solution" after its
    marked 1. The one false positive left is a unit error ("1 day" for hours)."""
    import polars as pl

    root = HERE.parents[1] / "benchmarks"
    labels = pl.DataFrame(load_jsonl(root / "real_model_labels.jsonl"))
    pool = pl.read_parquet(root / "results" / "real_model_pool.parquet")
    rows = labels.join(pool, on=["problem_id", "sample_idx"]).to_dicts()
    assert len(rows) == labels.height >= 130
    got = judge([{"completion": r["completion"], "gold": r["answer"]} for r in rows])
    counts = confusion([{"label": int(r["label"])} for r in rows], got)
    precision = counts["tp"] / (counts["tp"] + counts["fp"])
    recall = counts["tp"] / (counts["tp"] + counts["fn"])
    print(f"real-model labels: {counts}, precision {precision:.3f}, recall {recall:.3f}")
    false_pos = [r["note"] for r, c in zip(rows, got, strict=True) if c and not r["label"]]
    assert counts["fp"] <= 1 and all("1 day" in n for n in false_pos), false_pos
    assert counts["fn"] <= 2, counts


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
