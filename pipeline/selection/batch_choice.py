"""How a step's batch is chosen from its scored candidates: each candidate's score
(`selection_score`: a Thompson draw's learnability or mean plus spread, discounted for visits),
the batch of the best scores (`select_batch`), and a closed loop on the realised informative
share: the part of each batch spent on exploration moves with how many of the run's groups
have turned out informative.

GRESO (Zheng et al. 2025, arXiv 2506.02177) steers the probability of skipping prompts that were
all-right or all-wrong before by a fixed step per training step toward a target share of such
groups in the batch. Sieve steers the other side of the same trade: the exploration share ε of a
batch, the prompts picked not by the score but among those it ranks below the score's part of
the batch, the least visited first (coverage: prompts the model knows little of, which a
score-ranked batch keeps passing over). After each step whose realised informative share s_t
is known,

    ε_{t+1} = clip(ε_t + η · (s_t − τ), 0, ε_max),  ε_0 = 0,

so a run that finds more informative groups than its target τ spends the surplus on coverage,
and one that finds fewer goes back to ranking the whole batch by score. ε is a function of the
shares alone (`exploration`), so a resumed run that is handed its shares continues on the same
ε. With τ unset the loop is off and the batch is the score's top (`SelectionConfig`).

Test: `.venv/bin/pytest tests/selection/test_batch_choice.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from grpo_core.collect import is_informative
from grpo_core.types import Scores
from grpo_core.validate import Fraction, NonNegative, Positive, check_fields
from pipeline.selection.learning import LEARNING, LearningConfig
from pipeline.selection.stats import learnability, learnability_sd


@dataclass(frozen=True)
class SelectionConfig:
    """Which difficulty model scores a step's candidates and how a candidate's posterior becomes
    the score its batch is picked by. The defaults are the static model and Thompson draws."""

    # static: PosteriorConfig's model (its SQL twin: the ledger views); learning: `learning`'s
    # (drift fitted on the run's revisits, after DPS, Mao et al. 2026, arXiv 2603.10887)
    model: Literal["static", "learning"] = "static"
    learning: LearningConfig = LEARNING  # the learning model's settings (forecast.json's best)
    # thompson: a Beta draw's p(1 − p) (MoPPS, Qu et al. 2025, arXiv 2507.04632); ucb: E[p(1 −
    # p)] + κ · sd(p(1 − p)) (after InSight, Zhou et al. 2026, arXiv 2603.01907: a score from
    # the mean belief plus what more evidence is worth, not from one noisy draw)
    score: Literal["thompson", "ucb"] = "thompson"
    kappa: NonNegative = 1.0  # κ of "ucb": weight of the spread; 0 ranks by the mean alone
    # ρ: a prompt the model has v groups of scores × (1 + v)^−ρ, so an unseen prompt beats a
    # revisit of equal learnability (a count-based novelty discount: Thompson draws alone keep
    # revisiting the prompts they know to be learnable); 0: revisits cost nothing
    coverage: NonNegative = 0.0
    # τ: the realised informative share the run steers toward by spending a share ε of each
    # batch on the least-visited prompts ranked below it (a closed loop after GRESO, Zheng et
    # al. 2025, arXiv 2506.02177; `exploration` below); None: the loop is off
    target_share: Fraction | None = None
    share_gain: Positive = 0.25  # η: ε moves by η x (realised share − τ) after every step
    explore_most: Fraction = 0.5  # ε's ceiling: at least half of a batch stays ranked by score

    def __post_init__(self) -> None:
        check_fields(self)
        if self.target_share is not None and not 0 < self.target_share < 1:
            raise ValueError(f"target_share must be in (0, 1), got {self.target_share}")


SELECTION = SelectionConfig()  # the defaults: the static model, Thompson draws, no loop


def exploration(shares: Sequence[float], target: float, gain: float, most: float) -> float:
    """ε after the realised informative shares `shares` (oldest first): ε_0 = 0, then each
    step ε ← clip(ε + gain · (share − target), 0, most)."""
    eps = 0.0
    for share in shares:
        eps = min(most, max(0.0, eps + gain * (float(share) - target)))
    return eps


def realised_share(parts: Sequence[Scores], tol: float) -> float:
    """The share of a step's groups that are informative (`grpo_core.collect.is_informative`:
    known rewards that disagree by more than `tol`); 0 for no groups."""
    if not parts:
        return 0.0
    return float(np.mean([is_informative(p, tol) for p in parts]))


def explore_batch(
    order: np.ndarray,
    batch: int,
    eps: float,
    rng: np.random.Generator,
    visits: np.ndarray | None,
) -> np.ndarray:
    """The batch from the candidates ranked by score (`order`, best first): the top
    batch − m by score and m = round(ε · batch) among the rest, fewest visits first and at
    random among equals (`visits` None: all unseen). ε = 0 (or no candidate beyond the batch)
    is the top `batch` and draws nothing from `rng`."""
    m = round(eps * batch) if len(order) > batch else 0
    if m <= 0:
        return order[:batch]
    rest = order[batch - m :]
    seen = np.zeros(len(rest)) if visits is None else np.asarray(visits, dtype=np.float64)[rest]
    picked = rest[np.lexsort((rng.random(len(rest)), seen))][:m]
    return np.concatenate([order[: batch - m], picked])


def selection_score(
    alpha: np.ndarray,
    beta: np.ndarray,
    rng: np.random.Generator,
    select: SelectionConfig = SELECTION,
    visits: np.ndarray | None = None,
) -> np.ndarray:
    """Each candidate's score under `select`: a Thompson draw's p(1 − p), or E[p(1 − p)] + κ ·
    sd(p(1 − p)) ("ucb", no draw); times (1 + visits)^−ρ where ρ = `select.coverage` > 0."""
    if select.score == "thompson":
        p = rng.beta(alpha, beta)
        score = p * (1.0 - p)
    else:
        score = learnability(alpha, beta) + select.kappa * learnability_sd(alpha, beta)
    if select.coverage > 0 and visits is not None:
        score = score * (1.0 + visits) ** -select.coverage
    return np.asarray(score)


def select_batch(
    alpha: np.ndarray,
    beta: np.ndarray,
    batch: int,
    rng: np.random.Generator,
    select: SelectionConfig = SELECTION,
    visits: np.ndarray | None = None,
    explore: float = 0.0,
) -> np.ndarray:
    """Indices of the `batch` candidates of the largest `selection_score` (by default, whose
    Thompson draws have the largest p(1 − p)); ties keep the candidates' order. `explore` ε > 0:
    round(ε · batch) of them are the least-visited of those ranked below the rest instead
    (`control.explore_batch`)."""
    if len(alpha) < batch:
        raise ValueError(f"{len(alpha)} candidates for a batch of {batch}")
    score = selection_score(alpha, beta, rng, select, visits)
    return explore_batch(np.argsort(-score, kind="stable"), batch, explore, rng, visits)
