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
- `replay_curation` and `skip_zero_variance` live in `grpo_core.history`: curation samples
  replayed on a prompt's first visit, and a GRESO-style skip of prompts that stayed flat.
- `plain` is what the trainer does without a collector: the batch source's items, each sampled
  with its own G.

A collector sees the trainer only through `grpo_core.types.Rollouts` (batch source, sampling,
scoring, step seeds, config).

`source(step, round)` supplies candidate items; it must be a pure function of its arguments so
that a resumed run draws the same prompts.

Test: `.venv/bin/pytest tests/grpo_core/test_collect.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from grpo_core.advantages import is_uninformative
from grpo_core.seeds import derive_seed
from grpo_core.types import Collected, Collector, Item, Rollouts, Sample, Scores, TrainerError

Source = Callable[[int, int], Sequence[Item]]


def plain(t: Rollouts, step: int) -> Collected:
    """The plain strategy: the batch source's items, each sampled with its own G."""
    items = list(t.batches(step))
    if not items:
        raise TrainerError(f"the batch source returned no items for step {step}")
    groups, scores, ts, tr = t.sample_and_score(items, t.step_seed(step))
    return Collected(items, groups, scores, sum(len(g) for g in groups), ts, tr)


def split_scores(scores: Scores, groups: list[list[Sample]]) -> list[Scores]:
    """The step's flat `scores` cut into one `Scores` per group, in the groups' order."""
    out, i = [], 0
    for g in groups:
        out.append(Scores(scores.rewards[i : i + len(g)], scores.correct[i : i + len(g)]))
        i += len(g)
    return out


def join_scores(parts: Sequence[Scores]) -> Scores:
    """Several groups' `Scores` as one, in order (the inverse of `split_scores`)."""
    return Scores([r for p in parts for r in p.rewards], [c for p in parts for c in p.correct])


def is_informative(part: Scores, tol: float) -> bool:
    """Whether a group's known rewards (≥ 2 of them) disagree (`advantages.is_uninformative`)."""
    known = [r for r in part.rewards if r is not None]
    return len(known) >= 2 and not is_uninformative(max(known), min(known), tol)


@dataclass
class Gather:
    """What one step has sampled so far (all of it counted) and what it keeps to train on."""

    trainer: Rollouts
    items: list[Item] = field(default_factory=list)
    groups: list[list[Sample]] = field(default_factory=list)
    parts: list[Scores] = field(default_factory=list)
    spent: int = 0
    time_sample: float = 0.0
    time_score: float = 0.0
    last: list[Item] = field(default_factory=list)

    def sample(
        self, items: list[Item], seed: int, sizes: Sequence[int] | None = None
    ) -> list[tuple[Item, list[Sample], Scores]]:
        """Sample and score `items`; every rollout counts toward the step's cost."""
        groups, scores, ts, tr = self.trainer.sample_and_score(items, seed, sizes)
        self.spent += sum(len(g) for g in groups)
        self.time_sample, self.time_score = self.time_sample + ts, self.time_score + tr
        self.last = items
        return list(zip(items, groups, split_scores(scores, groups), strict=True))

    def keep(self, item: Item, group: list[Sample], part: Scores) -> None:
        self.items.append(item)
        self.groups.append(group)
        self.parts.append(part)

    def collected(self) -> Collected:
        if not self.items:  # nothing worth training on: train on nothing, but count the cost
            return Collected(self.last[:1], [[]], Scores([], []), self.spent, self.time_sample,
                             self.time_score)  # fmt: skip
        return Collected(self.items, self.groups, join_scores(self.parts), self.spent,
                         self.time_sample, self.time_score)  # fmt: skip


def dynamic_sampling(
    source: Source, target: int, max_rounds: int = 8, full: bool = False
) -> Collector:
    """DAPO dynamic sampling: refill until `target` informative groups (or `max_rounds`).

    `full`: a step trains exactly `target` groups or nothing (its rollouts still count, as
    `unfilled` in its metrics): every update trains the same number of rollouts, the matched
    protocol of benchmarks/headline.py. Without it a step short of `target` trains what it has."""

    def collect(t: Rollouts, step: int) -> Collected:
        got = Gather(t)
        for round_ in range(max_rounds):
            for item, grp, part in got.sample(
                list(source(step, round_)), t.step_seed(step, round_)
            ):
                if is_informative(part, t.cfg.zero_var_tol) and len(got.items) < target:
                    got.keep(item, grp, part)
            if len(got.items) >= target:
                break
        if full and len(got.items) < target:
            got.items, got.groups, got.parts = [], [], []
            c = got.collected()
            c.metrics["unfilled"] = 1.0
            return c
        return got.collected()

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

    def pass_rate(part: Scores) -> float:
        known = [c for c in part.correct if c is not None]
        return sum(known) / len(known) if known else -1.0

    def collect(t: Rollouts, step: int) -> Collected:
        got = Gather(t)
        for round_ in range(max_rounds):
            fresh = list(source(step, round_))
            seed = t.step_seed(step, round_)
            pilots = got.sample(fresh, seed, [pilot_g] * len(fresh))
            room = target - len(got.items)
            kept = [x for x in pilots if low <= pass_rate(x[2]) <= high][:room]
            if kept:
                extra_seed = derive_seed(seed, "extra")  # a stream of its own
                more = got.sample([k[0] for k in kept], extra_seed, [total_g - pilot_g] * len(kept))
                for (item, grp, part), (_, extra, part2) in zip(kept, more, strict=True):
                    got.keep(item, grp + extra, join_scores([part, part2]))
            if len(got.items) >= target:
                break
        return got.collected()

    return collect
