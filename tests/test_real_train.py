"""benchmarks/real_train.py's hand check: labels written by reading one run's judged-correct
completions count for that run only (a re-run stores other completions, which nobody read)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import real_train as rt


def _arm(*texts: str) -> dict:
    return {"after": {"correct": [{"question": f"{i}+1", "completion": t} for i, t in
                                  enumerate(texts)]}}  # fmt: skip


def test_labels_count_only_for_the_completions_they_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rt, "RESULTS", tmp_path)
    read = _arm("The final answer is 1.", "The final answer is 2. Or 3.")
    labels = {
        "how": "by hand",
        "run": "test",
        "sieve-vllm": {
            "labels": ["correct", "contradicted"],
            "fingerprint": rt.completions_fingerprint(read["after"]["correct"]),
        },
    }
    (tmp_path / "real_train_hand_check.json").write_text(json.dumps(labels))
    got = rt.hand_check({"sieve-vllm": read})["sieve-vllm"]
    assert (got["labelled"], got["truly_correct"], got["contradicted"]) == (2, 1, 1)
    assert got["labels_of_this_run"] is True
    rerun = _arm("The final answer is 1.", "The final answer is 2.")  # another run's texts
    got = rt.hand_check({"sieve-vllm": rerun, "trl": read})
    assert got["sieve-vllm"]["labelled"] == 0 and got["sieve-vllm"]["labels_of_this_run"] is False
    assert got["sieve-vllm"]["judged_correct_read"] == 2
    assert got["trl"]["labelled"] == 0  # no labels for that arm at all


def test_an_arm_that_evaluates_elsewhere_needs_that_python_before_it_trains(tmp_path: Path) -> None:
    missing = tmp_path / ".venv-vllm" / "bin" / "python"
    for arm in ("trl", "sieve-hf"):
        with pytest.raises(SystemExit) as err:
            rt.check_eval_python(arm, missing)
        assert str(missing) in str(err.value) and "\n" not in str(err.value)
    rt.check_eval_python("sieve-vllm", missing)  # evaluates on its own engine
    python = tmp_path / "python"
    python.write_text("")
    rt.check_eval_python("trl", python)
