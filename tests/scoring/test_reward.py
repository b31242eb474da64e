"""Verdicts, reward components, RewardSpec weights and clipping, the verifier registry, and
verifier failures (reward None, reason "verifier_error").

Test: `.venv/bin/pytest tests/scoring/test_reward.py -q`
"""

from __future__ import annotations

import pytest

from pipeline.scoring import (
    VERIFIER_VERSION,
    VERIFIERS,
    RewardSpec,
    register_verifier,
    verify,
    verify_batch,
)
from pipeline.scoring.verifiers import Check


def test_version_names_math_verify() -> None:
    assert VERIFIER_VERSION.startswith("sieve-math/") and "+math-verify/" in VERIFIER_VERSION


@pytest.mark.parametrize(
    ("completion", "reason", "correctness", "fmt"),
    [
        ("\\boxed{5}", "correct", 1.0, 1.0),
        ("5", "correct", 1.0, 1.0),
        ("so it is 5", "correct", 1.0, 0.0),
        ("#### 6", "wrong", 0.0, 1.0),
        ("-3", "wrong", 0.0, 1.0),
        ("", "no_answer", 0.0, 0.0),
        ("  ", "no_answer", 0.0, 0.0),
    ],
)
def test_components(completion: str, reason: str, correctness: float, fmt: float) -> None:
    verdict = verify(completion, "5", marker_required=False)
    assert verdict.reason == reason
    assert verdict.components == {"correctness": correctness, "format": fmt}
    assert verdict.correct is (reason == "correct")
    assert verdict.reward == correctness  # default weights: correctness only


def test_weights_and_clip() -> None:
    spec = RewardSpec(weights={"correctness": 1.0, "format": 0.5})
    assert verify("\\boxed{5}", "5", spec=spec).reward == 1.0  # 1.5 clipped to 1
    assert verify("\\boxed{4}", "5", spec=spec).reward == 0.5
    assert verify("so it is 4", "5", spec=spec).reward == 0.0
    wide = RewardSpec(weights={"correctness": 2.0, "format": -0.5}, clip=(-2.0, 2.0))
    assert verify("\\boxed{5}", "5", spec=wide).reward == 1.5
    assert verify("\\boxed{4}", "5", spec=wide).reward == -0.5
    neg = RewardSpec(weights={"correctness": 2.0, "format": -3.0}, clip=(-1.0, 1.0))
    assert verify("#### 4", "5", spec=neg).reward == -1.0


def test_reward_spec_validation() -> None:
    with pytest.raises(ValueError, match="unknown reward component"):
        RewardSpec(weights={"correctnes": 1.0})
    with pytest.raises(ValueError):
        RewardSpec(clip=(1.0, -1.0))
    assert RewardSpec().weights == {"correctness": 1.0, "format": 0.0}


def test_unknown_verifier_lists_names() -> None:
    with pytest.raises(ValueError, match="exact") as info:
        verify("5", "5", "nope")
    assert "math" in str(info.value)
    with pytest.raises(ValueError):
        verify_batch(["5"], ["5"], ["nope"])


def test_failing_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(completion: str, answer: str, timeout: float) -> Check:
        raise RuntimeError("kaput")

    monkeypatch.setitem(VERIFIERS, "math", boom)
    verdict = verify("5", "5")
    assert verdict.reward is None and verdict.correct is None
    assert verdict.reason == "verifier_error" and "kaput" in verdict.detail
    assert verdict.components == {}


def test_exact_verifier() -> None:
    assert verify(" B \n", "B", "exact", marker_required=False).correct is True
    assert verify("\\boxed{B}", "B", "exact").correct is True
    assert verify("b", "B", "exact").correct is False
    assert verify("0.5", "1/2", "exact").correct is False


def test_register_extra_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pipeline.scoring.verifiers.VERIFIERS", dict(VERIFIERS))

    @register_verifier("always")
    def always(completion: str, answer: str, timeout: float) -> Check:
        return Check(True, True, {"correctness": 1.0, "format": 0.0}, "always")

    assert verify("anything", "x", "always").reason == "correct"


def test_batch() -> None:
    verdicts = verify_batch(["5", "\\boxed{6}", ""], ["5", "5", "5"], marker_required=False)
    assert [v.reason for v in verdicts] == ["correct", "wrong", "no_answer"]
    mixed = verify_batch(["B", "5"], ["B", "5.0"], ["exact", "math"], marker_required=False)
    assert [v.correct for v in mixed] == [True, True]
    with pytest.raises(ValueError, match="length"):
        verify_batch(["5"], ["5", "6"])


@pytest.mark.parametrize("verifier", ["math", "exact"])
@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("nan", "nan"),
        ("NaN", "NaN"),
        ("\\boxed{nan}", "nan"),
        ("inf", "inf"),
        ("\\boxed{-Infinity}", "-Infinity"),
        ("$inf$", "inf"),
        ("\\boxed{inf}", "5"),
        ("5", "nan"),
    ],
)
def test_non_finite_never_correct(verifier: str, completion: str, gold: str) -> None:
    """A float NaN or infinity, as gold or as answer, is wrong (it used to match itself)."""
    for marker in (False, True):
        verdict = verify(completion, gold, verifier, marker_required=marker)
        assert verdict.correct is not True, (completion, gold, marker)
    verdict = verify(completion, gold, verifier, marker_required=False)
    assert verdict.reason == "wrong" and verdict.detail == "non-finite number"


def test_infinity_symbol_still_judged() -> None:
    """LaTeX `\\infty` is a symbol, not a float spelling: it is still compared as before."""
    assert verify("\\boxed{\\infty}", "\\infty").correct is True
    assert verify("\\boxed{\\infty}", "5").correct is False
