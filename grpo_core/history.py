"""Collectors that use a prompt's history: replay its curation samples, skip it when it stays flat.

- `replay_curation`: the curation revision is the training run's base and
  reference, so a stored screen/refine completion of a curriculum prompt is an exactly weighted
  off-policy sample whose behaviour log-prob is the reference log-prob the trainer computes for
  KL anyway. On a prompt's *first* visit (the first step since `start` whose batch draws it) its
  stored samples are its group (`Sample.replayed`, scored again by the trainer's reward
  function): at most the item's G of them, the latest (a refine after its screen), so the update
  trains the group size the curriculum gave the prompt. The trainer trains a replayed row on the
  decoupled clipped objective (`grpo_core.loss`): ratio r = π_θ/π_prox to the
  policy at the step's start, clipped as usual, times the behaviour weight w = min(π_prox/π_ref,
  tis_cap)
  (`grpo_core.update.StepInputs.is_weights`), which is exactly 1 while the policy is still the
  reference; its KL term is weighted by the same w. Later visits sample fresh. Replayed samples
  are not new rollouts (`Collected.rollouts` counts only fresh ones; `replayed_rollouts` reports
  the others). Needs a reference model (`reference` not "none") and `tis_cap` > 0; matching the
  sampling settings (temperature, top-p, token budget) is the job of whoever loads the stored
  samples (`pipeline.jobs.train.replay`).
- Selection bias, measured: a replayed group is, unless the caller says
  otherwise (`selecting`), the very samples the curation kept its prompt on; it was kept because
  it disagreed (its pass rate was inside the band), so it is not a fresh draw of the prompt and
  is informative more often than a fresh group of the same prompt. Each step reports
  `replayed_groups`, `replayed_selecting_groups` (of those, the selecting samples),
  `replayed_flat_groups` and `fresh_groups` / `fresh_flat_groups` (zero-variance by the task
  reward and `zero_var_tol`, like the skip); `pipeline.jobs.train.replay.replay_bias` sums them per
  training run. Nothing here selects on other samples.
- `with_behaviour_logprobs`: samples drawn from weights that are *not* the reference (a later
  night's curation, after training moved the policy) carry their behaviour log-probs instead,
  computed by the trainer's own forward at those weights before they change; the behaviour
  weights are then π_prox over them (Yao et al. 2025's truncated IS, with the sampling weights'
  log-probs taken by the trainer), exactly 1 until the policy moves.
- `ZeroVarSkip` / `skip_zero_variance`, after GRESO (Zheng et al. 2025, "Act
  Only When It Pays"): a prompt whose last k visits were all zero-variance (`streaks`, from the
  ledger's curation and training history and updated as this run visits it) is skipped with
  probability max_skip·(1 − (1 − rate)^k): it grows with k and stays below `max_skip`, so every
  skipped prompt keeps a 1 − max_skip chance to be re-explored. Evidence is weighed by its size:
  a flat group of `FULL_GROUP` (8) samples or more adds 1 to k, exactly as
  GRESO's G = 8 groups; a smaller one adds size / 8 (a 0/4 screen is half a visit: P(0/4 |
  p = 0.15) = 0.52, so one such screen must not skip a prompt with p_skip 0.45), so k is real.
  Streaks of whole visits stay Python ints. The step's sampling budget
  goes to the next prompts: the step costs fewer rollouts and the caller's rollout budget buys
  more steps. Skips are counted (`skipped_zero_var`) and reported one by one to `on_skip`
  (pipeline.jobs.train.recorder writes them to `train_skips`, rows of `train_group_stats`).
  Departure from GRESO: its exploration probability is tuned online against a target
  zero-variance share; here it is a fixed schedule.

Resume: which prompts are first visits is a pure function of the step (the batch source is);
the skip's draws derive from (seed, step, key), but its streaks live in memory: a resumed run
rebuilds them from the ledger (`pipeline.jobs.train.replay.zero_var_streaks`): it has the run's own
recorded steps.

Test: `.venv/bin/pytest tests/grpo_core/test_history.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grpo_core.advantages import is_uninformative
from grpo_core.collect import join_scores, split_scores
from grpo_core.config import GRPOConfig
from grpo_core.logp_policy import Policy, pad_id
from grpo_core.seeds import derive_seed
from grpo_core.types import Collected, Collector, Item, Rollouts, Sample, Scores, TrainerError

FULL_GROUP = 8  # a flat group this large (or larger) adds one whole visit to a streak


def visit_weight(size: int | None) -> int | float:
    """What a flat group of `size` samples adds to a streak: 1 from `FULL_GROUP` up (or when the
    size is unknown), else size / FULL_GROUP."""
    if size is None or size >= FULL_GROUP:
        return 1
    return max(size, 0) / FULL_GROUP


def is_flat(part: Scores, tol: float) -> bool:
    """Whether a group's judged rewards are zero-variance (`is_uninformative` at `tol`); a
    group with no judged reward is not."""
    known = [r for r in part.rewards if r is not None]
    return bool(known) and bool(is_uninformative(max(known), min(known), tol))


@dataclass
class ZeroVarSkip:
    """GRESO-style skip of prompts whose recent groups were all zero-variance."""

    # key -> flat visits in a row, newest last, each weighed by `visit_weight` (ints while every
    # group had ≥ FULL_GROUP samples)
    streaks: dict[str, float] = field(default_factory=dict)
    rate: float = 0.5  # how fast the skip probability grows with the streak k
    max_skip: float = 0.9  # the skip probability's ceiling: 1 − this is the re-exploration floor
    seed: int = 0
    # told each skip as (step, key, streak, p_skip): pipeline.jobs.train.recorder writes them to the
    # ledger
    on_skip: Callable[[int, str, float, float], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not (0.0 < self.rate <= 1.0 and 0.0 <= self.max_skip < 1.0):
            raise ValueError(
                f"need 0 < rate ≤ 1 and 0 ≤ max_skip < 1, got rate={self.rate}, "
                f"max_skip={self.max_skip} (max_skip < 1 keeps skipped prompts re-explored)"
            )

    def p_skip(self, k: float) -> float:
        """Skip probability after a (weighted) streak of k zero-variance visits (0 for k ≤ 0)."""
        return self.max_skip * (1.0 - (1.0 - self.rate) ** k) if k > 0 else 0.0

    def skips(self, key: str, step: int) -> bool:
        """Whether this step skips `key`: a draw from (seed, step, key), so resume agrees."""
        u = derive_seed(self.seed, "skip", step, key, bits=52) / 2.0**52  # uniform in [0, 1)
        streak = self.streaks.get(key, 0)
        p = self.p_skip(streak)
        if u >= p:
            return False
        if self.on_skip is not None:
            self.on_skip(step, key, streak, p)
        return True

    def observe(self, items: Sequence[Item], parts: Sequence[Scores], tol: float) -> None:
        """Extend or reset each visited prompt's streak by its group's rewards; the group's size
        is its number of samples (judged or not), as drawn."""
        flats = [is_flat(part, tol) for part in parts]
        sizes = [len(part.rewards) for part in parts]
        self.observe_flags([it.key for it in items], flats, sizes)

    def observe_flags(
        self,
        keys: Sequence[str],
        flats: Sequence[bool],
        sizes: Sequence[int | None] | None = None,
    ) -> None:
        """Visits in order: a zero-variance one extends the key's streak by `visit_weight` of its
        group's size (None, or no `sizes`: a whole visit, as before sizes were known), another
        resets it."""
        weights = [visit_weight(n) for n in sizes] if sizes is not None else [1] * len(keys)
        for key, flat, w in zip(keys, flats, weights, strict=True):
            self.streaks[key] = self.streaks.get(key, 0) + w if flat else 0


@dataclass
class _FirstVisits:
    """Keys the batch source drew at steps start..step − 1, recomputed from the source alone."""

    start: int
    until: int = -1
    seen: set[str] = field(default_factory=set)

    def before(self, t: Rollouts, step: int) -> set[str]:
        if step < self.until or self.until < 0:  # a new (or rewound) run: start over
            self.until, self.seen = self.start, set()
        for s in range(self.until, step):
            self.seen.update(it.key for it in t.batches(s))
        self.until = max(self.until, step)
        return self.seen


def replay_curation(
    stored: Mapping[str, Sequence[Sample]],
    start: int = 0,
    skip: ZeroVarSkip | None = None,
    selecting: Collection[str] | None = None,
) -> Collector:
    """The plain batch source, with each prompt's first visit since `start` replaying its stored
    samples (`stored[item.key]`, ≥ 2 of them) and, with `skip`, zero-variance prompts skipped.
    `selecting`: the keys whose stored samples are the ones the curation selected the prompt on
    (None: every key, as for a curriculum's own screen/refine runs); replayed groups of these
    keys are counted in `replayed_selecting_groups`."""
    visits = _FirstVisits(start)

    def collect(t: Rollouts, step: int) -> Collected:
        items = list(t.batches(step))
        if not items:
            raise TrainerError(f"the batch source returned no items for step {step}")
        before, now = visits.before(t, step), set()
        replay, fresh, skipped = [], [], 0
        for i, it in enumerate(items):
            first = it.key not in before and it.key not in now
            now.add(it.key)
            if first and len(stored.get(it.key, ())) >= 2:
                replay.append(i)
            elif skip is not None and skip.skips(it.key, step):
                skipped += 1
            else:
                fresh.append(i)
        unweighted = any(s.logprobs is None for i in replay for s in stored[items[i].key])
        if unweighted and t.cfg.reference == "none":
            raise TrainerError(
                "replaying curation samples needs the reference log-probs (their behaviour "
                "policy): set reference to frozen or lora_base, or turn replay off"
            )
        c = _assemble(t, step, items, replay, fresh, stored, skip, skipped)
        chosen = [items[i].key for i in replay]
        c.metrics["replayed_selecting_groups"] = float(
            len(chosen) if selecting is None else sum(k in selecting for k in chosen)
        )
        return c

    return collect


def replay_first_visits(
    t: Rollouts,
    step: int,
    items: Sequence[Item],
    stored: Mapping[str, Sequence[Sample]],
    visited: set[str],
) -> tuple[Collected, set[str]]:
    """`items` collected with each one not in `visited` that has ≥ 2 stored samples replaying
    them (weighted as `replay_curation` weighs them) and the rest sampled fresh; every key is
    added to `visited`. Returns (the batch in item order, the keys replayed). The selection
    before rollout (`pipeline.selection.posterior.posterior_select`) uses it so that a night's
    screen samples train on a prompt's first pick."""
    items = list(items)
    replay: list[int] = []
    first: set[str] = set()  # a key twice in one batch replays once; its repeat is sampled
    for i, it in enumerate(items):
        if it.key not in visited and it.key not in first and len(stored.get(it.key, ())) >= 2:
            replay.append(i)
            first.add(it.key)
    chosen = set(replay)
    fresh = [i for i in range(len(items)) if i not in chosen]
    unweighted = any(s.logprobs is None for i in replay for s in stored[items[i].key])
    if unweighted and t.cfg.reference == "none":
        raise TrainerError(
            "replaying curation samples needs the reference log-probs (their behaviour "
            "policy): set reference to frozen or lora_base, or turn replay off"
        )
    visited.update(it.key for it in items)
    c = _assemble(t, step, items, replay, fresh, stored, None, 0)
    return c, {items[i].key for i in replay}


def skip_zero_variance(skip: ZeroVarSkip) -> Collector:
    """The plain batch source with GRESO-style skips and nothing replayed."""
    return replay_curation({}, skip=skip)


def _assemble(
    t: Rollouts,
    step: int,
    items: list[Item],
    replay: list[int],
    fresh: list[int],
    stored: Mapping[str, Sequence[Sample]],
    skip: ZeroVarSkip | None,
    skipped: int,
) -> Collected:
    """Sample the fresh prompts, score the replayed groups, and put them back in item order."""
    groups: dict[int, list[Sample]] = {}
    parts: dict[int, Scores] = {}
    ts = tr = 0.0
    spent = 0
    if fresh:
        got, scores, ts, tr = t.sample_and_score([items[i] for i in fresh], t.step_seed(step))
        spent = sum(len(g) for g in got)
        for i, g, p in zip(fresh, got, split_scores(scores, got), strict=True):
            groups[i], parts[i] = g, p
    if replay:
        # at most the item's G of them, the latest (a refine after its screen): the update
        # trains the group size the curriculum gave the prompt, as a fresh group would
        old = [
            [replace(s, replayed=True) for s in stored[items[i].key][-items[i].group_size :]]
            for i in replay
        ]
        got, scores = t.score_groups([items[i] for i in replay], old)
        for i, g, p in zip(replay, got, split_scores(scores, got), strict=True):
            groups[i], parts[i] = g, p
    order = sorted(groups)
    tol = t.cfg.zero_var_tol
    metrics = {
        "skipped_zero_var": float(skipped),
        "replayed_rollouts": float(sum(len(groups[i]) for i in replay)),
        "replayed_groups": float(len(replay)),
        "replayed_flat_groups": float(sum(is_flat(parts[i], tol) for i in replay)),
        "fresh_groups": float(len(fresh)),
        "fresh_flat_groups": float(sum(is_flat(parts[i], tol) for i in fresh)),
    }
    if skip is not None:
        skip.observe([items[i] for i in order], [parts[i] for i in order], tol)
    if not order:  # every prompt skipped: train on nothing, spend nothing
        return Collected(items[:1], [[]], Scores([], []), 0, metrics=metrics)
    kept = [items[i] for i in order]
    joined = join_scores([parts[i] for i in order])
    return Collected(kept, [groups[i] for i in order], joined, spent, ts, tr, metrics)


def with_behaviour_logprobs(
    model: torch.nn.Module,
    tokenizer: Any,
    cfg: GRPOConfig,
    prompts: Mapping[str, str],
    stored: Mapping[str, Sequence[Sample]],
) -> dict[str, list[Sample]]:
    """`stored` with each sample's `logprobs` set to its per-token log-probs under `model` as it
    is now, read by the trainer's forward (temperature, autocast, prefix sharing of `cfg`).

    Call it while `model` holds the weights that sampled `stored` (a night's curation, before
    that night's training): replay then weighs each token by min(π_prox / those, tis_cap)
    (π_prox: the policy at the step's start) instead of by π_prox / π_ref, which is right only
    for samples the reference drew. `prompts[key]` is the rendered prompt the trainer will see
    for `key`. One group per forward, no grad."""
    device = next(model.parameters()).device
    policy = Policy(model, None, cfg, tokenizer, pad_id(tokenizer), device)
    out: dict[str, list[Sample]] = {}
    with torch.no_grad():
        for key, group in stored.items():
            samples = list(group)
            items = [Item(prompts[key], "", len(samples), key=key)] * len(samples)
            lp, _ = policy.logp(policy.tensors(items, samples, torch.zeros(len(samples))))
            rows = lp.float().cpu().tolist()
            out[key] = [
                replace(x, logprobs=tuple(row[: len(x.token_ids)]))
                for x, row in zip(samples, rows, strict=True)
            ]
    return out
