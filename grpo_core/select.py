"""Collectors that choose a step's prompts *before* sampling them: no rollout is spent to decide.

Both fill every step with the same number of prompts (`target`), so every step trains the same
number of rollouts (`target` × G): the matched-update protocol of benchmarks/headline.py, where
an arm that decides better gets more informative groups per update, not more or fewer updates.

- `greso_refill` — GRESO (Zheng et al. 2025, arXiv 2506.02177, "Act Only When It Pays"): a prompt
  whose recent groups were all zero-variance is skipped with a probability growing with its
  streak (`grpo_core.history.ZeroVarSkip`), and the batch is refilled from further candidates
  until it holds `target` prompts, as the published method does (it keeps its batch size).
  `history.skip_zero_variance` is the variant that does not refill (the step shrinks).
- `thompson_select` — MoPPS (Qu et al. 2025, arXiv 2507.04632; its `PosteriorSampler`, in
  verl's recipe/mopps): each prompt's pass rate is a Beta posterior, updated after every group
  it trained with a decay toward the prior (α ← λα + (1 − λ)α₀ + k, β likewise with n − k, on
  observation only, as MoPPS does); each step draws `candidates` prompts, Thompson-samples their
  pass rates and keeps the `target` whose draws are closest to `target_p` (0.5: the largest
  p(1 − p)). Departure: the posterior is in memory, per run; Sieve's ledger posterior is another
  selection (pipeline).

`source(step, round)` supplies candidates in order (a pure function: resume draws the same).

Test: `.venv/bin/pytest tests/grpo_core/test_select.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from grpo_core.collect import is_informative, split_scores
from grpo_core.history import ZeroVarSkip
from grpo_core.seeds import derive_seed
from grpo_core.types import Collected, Collector, Item, Rollouts, TrainerError

Source = Callable[[int, int], Sequence[Item]]


def _sample_all(t: Rollouts, step: int, items: list[Item], metrics: dict[str, float]) -> Collected:
    """Sample every chosen item with its own G; all of it trains (flat groups included)."""
    groups, scores, ts, tr = t.sample_and_score(items, t.step_seed(step))
    spent = sum(len(g) for g in groups)
    return Collected(items, groups, scores, spent, ts, tr, metrics)


def greso_refill(
    source: Source,
    skip: ZeroVarSkip,
    target: int,
    max_rounds: int = 64,
) -> Collector:
    """GRESO with refill: walk the candidates of (step, 0), (step, 1), ... skipping each prompt
    by its zero-variance streak, until `target` prompts are kept (never one twice in a step);
    sample those. Every candidate skipped costs nothing. After `max_rounds` rounds of candidates
    the batch is filled with skipped prompts, in order (the exploration floor in the limit)."""

    def collect(t: Rollouts, step: int) -> Collected:
        kept: list[Item] = []
        passed: list[Item] = []
        seen: set[str] = set()
        skipped = 0
        for round_ in range(max_rounds):
            for it in source(step, round_):
                if it.key in seen:
                    continue
                seen.add(it.key)
                if skip.skips(it.key, step):
                    skipped += 1
                    passed.append(it)
                else:
                    kept.append(it)
                if len(kept) == target:
                    break
            if len(kept) == target:
                break
        kept += passed[: target - len(kept)]
        if not kept:
            raise TrainerError(f"the candidate source returned no items for step {step}")
        c = _sample_all(t, step, kept, {"skipped_zero_var": float(skipped)})
        skip.observe(kept, split_scores(c.scores, c.groups), t.cfg.zero_var_tol)
        return c

    return collect


@dataclass
class BetaPosterior:
    """Per-key Beta(α, β) pass-rate posteriors with MoPPS's decay toward the prior."""

    prior_a: float = 1.0
    prior_b: float = 1.0
    decay: float = 0.5  # λ: the weight old evidence keeps at each new observation of the key
    a: dict[str, float] = field(default_factory=dict)
    b: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.prior_a > 0 and self.prior_b > 0 and 0.0 <= self.decay <= 1.0):
            raise ValueError(
                f"need prior_a, prior_b > 0 and 0 ≤ decay ≤ 1, got {self.prior_a}, "
                f"{self.prior_b}, {self.decay}"
            )

    def params(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        a = np.array([self.a.get(k, self.prior_a) for k in keys], dtype=np.float64)
        b = np.array([self.b.get(k, self.prior_b) for k in keys], dtype=np.float64)
        return a, b

    def observe(self, key: str, successes: float, n: float) -> None:
        lam = self.decay
        a0, b0 = self.a.get(key, self.prior_a), self.b.get(key, self.prior_b)
        self.a[key] = lam * a0 + (1 - lam) * self.prior_a + successes
        self.b[key] = lam * b0 + (1 - lam) * self.prior_b + (n - successes)

    def state(self) -> dict[str, list[float]]:
        return {k: [self.a[k], self.b[k]] for k in self.a}

    def load(self, state: dict[str, list[float]]) -> None:
        self.a = {k: float(v[0]) for k, v in state.items()}
        self.b = {k: float(v[1]) for k, v in state.items()}


def thompson_select(
    source: Source,
    posterior: BetaPosterior,
    target: int,
    seed: int,
    target_p: float = 0.5,
) -> Collector:
    """MoPPS-style selection: the candidates of (step, 0), their Thompson draws from `posterior`
    (a generator seeded by (seed, step): resume draws the same), the `target` closest to
    `target_p` sampled; each group then updates its prompt's posterior by its correct count."""
    if not 0.0 < target_p < 1.0:
        raise ValueError(f"target_p must be in (0, 1), got {target_p}")

    def collect(t: Rollouts, step: int) -> Collected:
        cands = list({it.key: it for it in source(step, 0)}.values())
        if len(cands) < target:
            raise TrainerError(f"{len(cands)} candidates for a batch of {target} at step {step}")
        a, b = posterior.params([it.key for it in cands])
        rng = np.random.default_rng(derive_seed(seed, "thompson", step))
        draws = rng.beta(a, b)
        order = np.argsort((draws - target_p) ** 2, kind="stable")[:target]
        kept = [cands[int(i)] for i in order]
        c = _sample_all(t, step, kept, {"candidates": float(len(cands))})
        for it, part in zip(kept, split_scores(c.scores, c.groups), strict=True):
            known = [x for x in part.correct if x is not None]
            if known:
                posterior.observe(it.key, float(sum(known)), float(len(known)))
        return c

    return collect


def ranked_select(
    source: Source, score: Callable[[Item], float], target: int, seed: int
) -> Collector:
    """Selection by a score known before the step: the candidates of (step, 0), the `target`
    of the largest `score(item)` sampled, ties broken by a generator seeded by (seed, step)
    (resume draws the same). Nothing is learned from the groups: the score is fixed, e.g. each
    prompt's cell's measured P(informative) (an oracle of cell-level knowledge)."""

    def collect(t: Rollouts, step: int) -> Collected:
        cands = list({it.key: it for it in source(step, 0)}.values())
        if len(cands) < target:
            raise TrainerError(f"{len(cands)} candidates for a batch of {target} at step {step}")
        rng = np.random.default_rng(derive_seed(seed, "ranked", step))
        scores = np.array([score(it) for it in cands], dtype=np.float64)
        order = np.lexsort((rng.random(len(cands)), -scores))[:target]  # by score, then chance
        kept = [cands[int(i)] for i in order]
        return _sample_all(t, step, kept, {"candidates": float(len(cands))})

    return collect


def informative_groups(c: Collected, tol: float) -> int:
    """How many of a collected batch's groups have a reward spread (train something)."""
    return sum(is_informative(p, tol) for p in split_scores(c.scores, c.groups))


__all__ = [
    "BetaPosterior",
    "greso_refill",
    "informative_groups",
    "ranked_select",
    "thompson_select",
]
