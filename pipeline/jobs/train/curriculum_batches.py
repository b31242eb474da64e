"""A curriculum as the trainer's batch source and reward.

`CurriculumBatches(step) -> items`: stages in order, each getting a share of the steps
proportional to what one pass over it costs in rollouts; each step draws items weighted by their
curriculum weight, without replacement, seeded by (seed, step), until the step's rollout budget
is filled (a stage with fewer rollouts than the step repeats its order: every step trains the batch
the recipe asked for). `verifier_reward` scores with the problems' own verifiers (chat models are
judged only on a marked answer, as in curation) and fills `Scores.steps` with each completion's step
verdicts (pipeline/scoring/steps.py; the item's prompt is the question the checker reads, so a
linear `...=..., x` prompt lets steps in x be checked by substitution).

Test: `pytest tests/test_train.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from grpo_core.seeds import derive_seed
from grpo_core.trainer import Item, Sample, Scores
from pipeline.core.errors import SieveError
from pipeline.scoring import StepContext, Verdict, verify_batch
from pipeline.store import Ledger, load_query


def curriculum_frame(ledger: Ledger, curriculum_id: str) -> pl.DataFrame:
    """The curriculum's items joined with their problems, in stage and position order."""
    frame = ledger.sql(load_query("train_items"), {"curriculum_id": curriculum_id})
    if frame.is_empty():
        raise SieveError(f"curriculum {curriculum_id} has no items to train on")
    return frame


class CurriculumBatches:
    """`step -> items`: stages in order, weighted draws seeded by (seed, step)."""

    def __init__(
        self,
        frame: pl.DataFrame,
        prompts: Sequence[str],
        rollouts_per_step: int,
        total_steps: int,
        seed: int,
    ):
        self.seed, self.budget = seed, rollouts_per_step
        self.stages: list[tuple[int, list[Item], np.ndarray]] = []
        costs = []
        for stage in sorted(frame["stage"].unique().to_list()):
            rows = frame.with_row_index("_i").filter(pl.col("stage") == stage)
            items = [
                Item(prompts[i], a, int(g), key=p, weight=float(w), verifier=v, params=q)
                for i, a, g, p, w, v, q in zip(
                    rows["_i"], rows["answer"], rows["group_size"], rows["problem_id"],
                    rows["weight"], rows["verifier"], _params(rows), strict=True,
                )
            ]  # fmt: skip
            weights = np.clip(rows["weight"].to_numpy().astype(float), 1e-9, None)
            self.stages.append((int(stage), items, weights))
            costs.append(float(rows["group_size"].sum()))
        self.ends = _stage_ends(costs, total_steps)

    def stage_of(self, step: int) -> int:
        for (stage, _, _), end in zip(self.stages, self.ends, strict=True):
            if step < end:
                return stage
        return self.stages[-1][0]

    def candidates(self, step: int, n: int) -> list[Item]:
        """Up to `n` items of the step's stage, weighted draws without replacement seeded by
        (seed, step): what a selection before rollout chooses the step's batch from."""
        index = next((i for i, end in enumerate(self.ends) if step < end), len(self.ends) - 1)
        _, items, weights = self.stages[index]
        return _draw(items, weights, derive_seed(self.seed, "candidates", step), n)

    def candidates_all(self, step: int, n: int) -> list[Item]:
        """Up to `n` items of the whole curriculum (every stage), weighted draws without
        replacement seeded by (seed, step): what the difficulty model picks from, the stages'
        order being its own decision (`selection = "posterior"`)."""
        items = [it for _, stage_items, _ in self.stages for it in stage_items]
        weights = np.concatenate([w for _, _, w in self.stages])
        return _draw(items, weights, derive_seed(self.seed, "candidates", step), n)

    def batch_prompts(self) -> int:
        """Groups a batch of the whole curriculum holds: the step's rollouts over the most
        common group size (at least one). A curriculum with fewer prompts than that gives its
        best-ranked prompts a second group in the step: the batch is never cut to the
        curriculum's size (a smaller update than the recipe asked for)."""
        sizes = [it.group_size for _, items, _ in self.stages for it in items]
        common = max(set(sizes), key=lambda g: (sizes.count(g), -g))
        return max(1, self.budget // common)

    def __call__(self, step: int) -> list[Item]:
        index = next((i for i, end in enumerate(self.ends) if step < end), len(self.ends) - 1)
        _, items, weights = self.stages[index]
        rng = np.random.default_rng(derive_seed(self.seed, "batch", step))
        keys = rng.random(len(items)) ** (1.0 / weights)  # Efraimidis–Spirakis weighted order
        order = np.argsort(-keys, kind="stable")
        picked, total = [], 0
        while total < self.budget:  # a stage smaller than the step: its order again, from the top
            for i in order:
                picked.append(items[int(i)])
                total += items[int(i)].group_size
                if total >= self.budget:
                    break
        return picked


def _draw(items: list[Item], weights: np.ndarray, seed: int, n: int) -> list[Item]:
    """Up to `n` of `items`, weighted, without replacement (Efraimidis–Spirakis order)."""
    rng = np.random.default_rng(seed)
    keys = rng.random(len(items)) ** (1.0 / weights)
    return [items[int(i)] for i in np.argsort(-keys, kind="stable")[:n]]


def _params(rows: pl.DataFrame) -> list[str | None]:
    """Each row's problem params JSON (what the "rg" verifier rebuilds its entry from)."""
    if "params" not in rows.columns:
        return [None] * rows.height
    return rows["params"].to_list()


def _stage_ends(costs: list[float], total_steps: int) -> list[int]:
    """Cumulative last step (exclusive) of each stage; shares ∝ cost, at least one step each."""
    total = sum(costs)
    shares = [max(1, round(total_steps * c / total)) for c in costs]
    ends = np.cumsum(shares).tolist()
    ends[-1] = max(ends[-1], total_steps)
    return [int(e) for e in ends]


def verifier_reward(
    items: Sequence[Item], samples: Sequence[Sample], *, marker_required: bool = True
) -> Scores:
    """Score with Sieve's verifiers (the problem's own verifier, e.g. math). By default (chat
    models) only a marked, committed answer counts, as in curation; `marker_required=False` is
    the raw format's bare-answer reading, which the tiny policy declares. `steps[i]` is
    sample i's (char_start, char_end, correct) fragments, None where not computed."""
    verdicts = verify_batch(
        [s.text for s in samples],
        [it.answer for it in items],
        [it.verifier for it in items],
        marker_required=marker_required,
        contexts=[StepContext(question=it.prompt, params_json=it.params) for it in items],
        truncated=[s.truncated for s in samples],
    )
    steps = [_fragments(v) for v in verdicts]
    return Scores([v.reward for v in verdicts], [v.correct for v in verdicts], steps)


def raw_verifier_reward(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    """`verifier_reward` for the raw prompt format (the tiny policy's bare answers)."""
    return verifier_reward(items, samples, marker_required=False)


def _fragments(verdict: Verdict) -> tuple[tuple[int, int, bool], ...] | None:
    if verdict.steps is None:
        return None
    return tuple((s.start, s.end, s.correct) for s in verdict.steps)
