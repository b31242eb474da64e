"""What a verifier returns (`Verdict`) and how reward components become one reward (`RewardSpec`).

A verifier reports named components, each in [0, 1] (`correctness`, `format`, ...). The reward is
`clip(sum(weight_i * component_i))` with the weights and clip range of a `RewardSpec`; a component
the spec weights but the verdict lacks counts as 0. A verifier failure has `reward=None` and
`correct=None`: it is never silently a 0. `step_accuracy` (the share of a completion's equation
steps that hold, pipeline/scoring/steps.py) is reported when there is a checkable step but has no
weight unless a spec gives it one, so the default reward is correctness alone. A verdict also
carries those fragments (`steps`; None when not computed, e.g. for code or a failed verifier).

Test: `.venv/bin/pytest tests/scoring/test_reward.py -q`
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.scoring.steps import Step

REASONS = ("correct", "wrong", "no_answer", "verifier_error")
COMPONENT_NAMES: set[str] = {"correctness", "format", "step_accuracy"}


def register_component(name: str) -> None:
    """Allow `name` in `RewardSpec.weights` (for verifiers that report extra components)."""
    COMPONENT_NAMES.add(name)


def _default_weights() -> dict[str, float]:
    return {"correctness": 1.0, "format": 0.0}


@dataclass(frozen=True)
class RewardSpec:
    """Weights per reward component and the range the weighted sum is clipped to."""

    weights: dict[str, float] = field(default_factory=_default_weights)
    clip: tuple[float, float] = (-1.0, 1.0)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - COMPONENT_NAMES)
        if unknown:
            known = ", ".join(sorted(COMPONENT_NAMES))
            raise ValueError(f"unknown reward component(s) {unknown}; known: {known}")
        if not all(math.isfinite(w) for w in self.weights.values()):
            raise ValueError(f"reward weights must be finite, got {self.weights}")
        lo, hi = self.clip
        if not lo <= hi:
            raise ValueError(f"clip must be (low, high) with low <= high, got {self.clip}")

    def combine(self, components: dict[str, float]) -> float:
        """`clip(sum(w_i * c_i))` over the weighted components (missing ones count as 0)."""
        total = sum(w * components.get(name, 0.0) for name, w in self.weights.items())
        lo, hi = self.clip
        return min(hi, max(lo, total))


@dataclass(frozen=True)
class Verdict:
    """One judged completion. `reward` and `correct` are None only when the verifier failed."""

    reward: float | None
    correct: bool | None
    reason: str
    components: dict[str, float]
    detail: str = ""
    steps: tuple[Step, ...] | None = None  # checkable fragments, in text order (steps.py)


def judged(
    correct: bool,
    components: dict[str, float],
    spec: RewardSpec,
    detail: str,
    steps: tuple[Step, ...] | None = None,
) -> Verdict:
    """A verdict for a completion that had an answer to judge."""
    reason = "correct" if correct else "wrong"
    return Verdict(spec.combine(components), correct, reason, components, detail, steps)


def no_answer(
    components: dict[str, float],
    spec: RewardSpec,
    detail: str = "",
    steps: tuple[Step, ...] | None = None,
) -> Verdict:
    """A verdict for a completion with nothing to judge (counts as wrong)."""
    return Verdict(spec.combine(components), False, "no_answer", components, detail, steps)


def verifier_error(detail: str) -> Verdict:
    """A verdict for a verifier that failed: no reward, no correctness."""
    return Verdict(None, None, "verifier_error", {}, detail)
