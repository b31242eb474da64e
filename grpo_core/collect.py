"""Online batch-collection strategies that decide *while sampling* which prompts to train on.

These are the methods Sieve's offline curation is compared with (benchmarks/curriculum.py); each
is a `Collector` for `grpo_core.trainer.Trainer(collector=...)` and counts every rollout it
spends, including those it throws away.

- `dynamic_sampling` — DAPO (Yu et al. 2025, "dynamic sampling"): sample groups, drop those whose
  rewards are all equal, and keep drawing fresh prompts until the batch holds `target` informative
  groups or `max_rounds` draws were made.
- `pilot_commit` — pilot-then-commit: sample a small pilot group per prompt (G = 16), keep the
  prompts whose pilot pass rate is within [low, high] (0.125 ≤ p ≤ 0.75), then sample the rest of
  the committed group (48 in total, pilot samples included) for the kept ones only; refill with
  fresh prompts until `target` prompts are committed or `max_rounds` draws were made.

`source(step, round)` supplies candidate items; it must be a pure function of its arguments so
that a resumed run draws the same prompts.

Test: `.venv/bin/pytest tests/grpo_core/test_collect.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grpo_core.trainer import Collected, Collector, Item, Sample, Scores, Trainer

Source = Callable[[int, int], Sequence[Item]]


def _split(scores: Scores, groups: list[list[Sample]]) -> list[Scores]:
    out, i = [], 0
    for g in groups:
        out.append(Scores(scores.rewards[i : i + len(g)], scores.correct[i : i + len(g)]))
        i += len(g)
    return out


def _join(parts: Sequence[Scores]) -> Scores:
    return Scores([r for p in parts for r in p.rewards], [c for p in parts for c in p.correct])


def _informative(part: Scores, tol: float) -> bool:
    known = [r for r in part.rewards if r is not None]
    return len(known) >= 2 and max(known) - min(known) > tol


def dynamic_sampling(source: Source, target: int, max_rounds: int = 8) -> Collector:
    """DAPO dynamic sampling: refill until `target` informative groups (or `max_rounds`)."""

    def collect(t: Trainer, step: int) -> Collected:
        items: list[Item] = []
        groups: list[list[Sample]] = []
        parts: list[Scores] = []
        spent, ts, tr = 0, 0.0, 0.0
        for round_ in range(max_rounds):
            fresh = list(source(step, round_))
            g, sc, a, b = t.sample_and_score(fresh, t.step_seed(step, round_))
            spent, ts, tr = spent + sum(len(x) for x in g), ts + a, tr + b
            for item, grp, part in zip(fresh, g, _split(sc, g), strict=True):
                if _informative(part, t.cfg.zero_var_tol) and len(items) < target:
                    items.append(item)
                    groups.append(grp)
                    parts.append(part)
            if len(items) >= target:
                break
        if not items:  # nothing informative at all: train on nothing, but count the cost
            return Collected([fresh[0]], [[]], Scores([], []), spent, ts, tr)
        return Collected(items, groups, _join(parts), spent, ts, tr)

    return collect


def pilot_commit(
    source: Source,
    target: int,
    pilot_g: int = 16,
    total_g: int = 48,
    low: float = 0.125,
    high: float = 0.75,
    max_rounds: int = 8,
) -> Collector:
    """Pilot with `pilot_g`, keep low ≤ p ≤ high, commit to `total_g` samples per kept prompt."""
    if not 2 <= pilot_g < total_g:
        raise ValueError(f"need 2 ≤ pilot_g < total_g, got {pilot_g}, {total_g}")

    def collect(t: Trainer, step: int) -> Collected:
        items: list[Item] = []
        groups: list[list[Sample]] = []
        parts: list[Scores] = []
        spent, ts, tr = 0, 0.0, 0.0
        for round_ in range(max_rounds):
            fresh = list(source(step, round_))
            seed = t.step_seed(step, round_)
            g, sc, a, b = t.sample_and_score(fresh, seed, [pilot_g] * len(fresh))
            spent, ts, tr = spent + sum(len(x) for x in g), ts + a, tr + b
            kept: list[tuple[Item, list[Sample], Scores]] = []
            for item, grp, part in zip(fresh, g, _split(sc, g), strict=True):
                known = [c for c in part.correct if c is not None]
                p = sum(known) / len(known) if known else -1.0
                if low <= p <= high and len(items) + len(kept) < target:
                    kept.append((item, grp, part))
            if kept:
                more, sc2, a, b = t.sample_and_score(
                    [k[0] for k in kept],
                    t.step_seed(step, round_) + 3_571,  # a stream of its own
                    [total_g - pilot_g] * len(kept),
                )
                spent, ts, tr = spent + sum(len(x) for x in more), ts + a, tr + b
                for (item, grp, part), extra, part2 in zip(
                    kept, more, _split(sc2, more), strict=True
                ):
                    items.append(item)
                    groups.append(grp + extra)
                    parts.append(_join([part, part2]))
            if len(items) >= target:
                break
        if not items:
            return Collected([fresh[0]], [[]], Scores([], []), spent, ts, tr)
        return Collected(items, groups, _join(parts), spent, ts, tr)

    return collect
