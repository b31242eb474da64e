"""Forecasting a difficulty model on groups a run already recorded: replay the run's observations
in order and, before each update's groups, ask the model for each group's pass rate and the
probability that it is informative (0 < k < n), knowing only the groups of earlier updates. A
model is scored on stored groups before it is trusted with new rollouts (Brier score, log loss,
calibration per quarter of the run); `benchmarks/forecast.py` does it on the committed runs.

- Clock: a group observed at update u is forecast from the groups of updates < u. Groups of the
  same update are forecast together, as the selection sees them (`posterior_select` computes
  every candidate's posterior once per step, before any group of the step is sampled).
- Forecast: every model answers a Beta(α, β) predictive per group; the pass rate is its mean and
  P(informative) = 1 − E[p^n] − E[(1 − p)^n] exactly under the Beta-binomial
  (`stats.informative_probability`, as the trainer's `predicted_informative` metric reads it;
  runs recorded before it read it at the posterior mean).
- Models: `ProductPosterior` (posterior.py's `prompt_posterior` on the replay's frame),
  `MoppsPosterior` (`grpo_core.select.BetaPosterior`: MoPPS, Qu et al. 2025, arXiv 2507.04632,
  Beta(1, 1) and decay toward it at each new group of the prompt) and `LearningModel`.

`LearningModel` (pipeline/selection/learning.py) is the product's learning model: the static
model with five departures, each a field of `LearningConfig` (that module's docstring); with all
of them off it is `ProductPosterior` to rounding (the tests hold it there).

Test: `.venv/bin/pytest tests/selection/test_forecast.py -q`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import polars as pl

from grpo_core.select import BetaPosterior
from pipeline.selection.learning import (
    EPS,
    STRENGTHS,
    LearningConfig,
    LearningModel,
    fit_shift,
    matched_strength,
)
from pipeline.selection.posterior import Observations, PosteriorConfig, prompt_posterior
from pipeline.selection.stats import informative_probability

__all__ = [  # the learning model's parts are the product's (learning.py); here for the replay
    "STRENGTHS",
    "Forecaster",
    "LearningConfig",
    "LearningModel",
    "MoppsPosterior",
    "ProductPosterior",
    "Stream",
    "fit_shift",
    "informative_probability",
    "matched_strength",
    "quarters",
    "reliability",
    "replay",
    "scores",
]


@dataclass(frozen=True)
class Stream:
    """A run's groups in the order observed: key, cell, k correct of n, update (nondecreasing)."""

    key: np.ndarray  # (N,) object
    cell: np.ndarray  # (N,) object
    k: np.ndarray  # (N,) float
    n: np.ndarray  # (N,) float
    update: np.ndarray  # (N,) int

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> Stream:
        """From `[key, cell, k, n, update]` rows (a run's `state.observations`); n = 0 dropped."""
        kept = [r for r in rows if float(r[3]) > 0]
        s = cls(
            np.array([str(r[0]) for r in kept], dtype=object),
            np.array([str(r[1]) for r in kept], dtype=object),
            np.array([float(r[2]) for r in kept]),
            np.array([float(r[3]) for r in kept]),
            np.array([int(r[4]) for r in kept], dtype=np.int64),
        )
        if np.any(np.diff(s.update) < 0):
            raise ValueError("observations must come in update order (a run's own order)")
        return s

    def __len__(self) -> int:
        return len(self.k)

    @property
    def informative(self) -> np.ndarray:
        return (self.k > 0) & (self.k < self.n)


class Forecaster(Protocol):
    """A difficulty model under replay: a Beta predictive per group, then the groups' outcomes."""

    def predict(
        self, key: np.ndarray, cell: np.ndarray, n: np.ndarray, now: int
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def observe(
        self, key: np.ndarray, cell: np.ndarray, k: np.ndarray, n: np.ndarray, now: int
    ) -> None: ...


def replay(stream: Stream, model: Forecaster) -> tuple[np.ndarray, np.ndarray]:
    """(α, β) of every group of `stream`, each from the groups of earlier updates only."""
    alpha, beta = np.empty(len(stream)), np.empty(len(stream))
    if not len(stream):
        return alpha, beta
    starts = np.flatnonzero(np.r_[True, np.diff(stream.update) != 0])
    for lo, hi in zip(starts, np.r_[starts[1:], len(stream)], strict=True):
        at, now = slice(int(lo), int(hi)), int(stream.update[lo])
        key, cell, n = stream.key[at], stream.cell[at], stream.n[at]
        alpha[at], beta[at] = model.predict(key, cell, n, now)
        model.observe(key, cell, stream.k[at], n, now)
    return alpha, beta


# ---------------------------------------------------------------- the product's and MoPPS's


class ProductPosterior:
    """posterior.py's model as the trainer computes it: `prompt_posterior` on the run's frame."""

    def __init__(self, cfg: PosteriorConfig | None = None) -> None:
        self.cfg, self.obs = cfg or PosteriorConfig(), Observations()

    def predict(
        self, key: np.ndarray, cell: np.ndarray, n: np.ndarray, now: int
    ) -> tuple[np.ndarray, np.ndarray]:
        prompts = pl.DataFrame({"problem_id": list(key), "cell": list(cell)}, orient="col")
        post = prompt_posterior(self.obs.frame(), prompts, self.cfg, now)
        return post["alpha"].to_numpy(), post["beta"].to_numpy()

    def observe(
        self, key: np.ndarray, cell: np.ndarray, k: np.ndarray, n: np.ndarray, now: int
    ) -> None:
        for row in zip(key, cell, k, n, strict=True):
            self.obs.add(*row, now)


class MoppsPosterior:
    """The MoPPS-style arm's model (`BetaPosterior`, its defaults unless given)."""

    def __init__(self, posterior: BetaPosterior | None = None) -> None:
        self.post = posterior if posterior is not None else BetaPosterior()

    def predict(
        self, key: np.ndarray, cell: np.ndarray, n: np.ndarray, now: int
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.post.params(list(key))

    def observe(
        self, key: np.ndarray, cell: np.ndarray, k: np.ndarray, n: np.ndarray, now: int
    ) -> None:
        for q, c, m in zip(key, k, n, strict=True):
            self.post.observe(str(q), float(c), float(m))


# ---------------------------------------------------------------- scores


def quarters(update: np.ndarray) -> np.ndarray:
    """The quarter (0–3) of the replayed span, first to last update, each group falls in."""
    lo, hi = int(update.min()), int(update.max())
    return np.minimum(4 * (update - lo) // (hi - lo + 1), 3).astype(np.int64)


def scores(
    p_inf: np.ndarray, p_hat: np.ndarray, k: np.ndarray, n: np.ndarray, part: np.ndarray
) -> dict[str, Any]:
    """Brier and log loss of P(informative) against 0 < k < n, Brier and mean absolute error of
    the pass rate against k / n, and per part (e.g. quarter) the predicted and realised share of
    informative groups, the gap between them (the calibration error) and the realised share's
    binomial standard error."""
    y = ((k > 0) & (k < n)).astype(np.float64)
    q = np.clip(p_inf, EPS, 1.0 - EPS)
    out: dict[str, Any] = {
        "groups": len(y),
        "brier": float(np.mean((p_inf - y) ** 2)),
        "log_loss": float(-np.mean(y * np.log(q) + (1.0 - y) * np.log(1.0 - q))),
        "rate_brier": float(np.mean((p_hat - k / n) ** 2)),
        "rate_mae": float(np.mean(np.abs(p_hat - k / n))),
        "parts": [],
    }
    for p in np.unique(part):
        at = part == p
        pred, real = float(p_inf[at].mean()), float(y[at].mean())
        se = float(np.sqrt(real * (1.0 - real) / at.sum()))
        out["parts"].append({"part": int(p), "groups": int(at.sum()), "predicted": pred,
                             "realised": real, "error": abs(pred - real), "se": se})  # fmt: skip
    return out


def reliability(p_inf: np.ndarray, y: np.ndarray, bins: int = 10) -> list[dict[str, Any]]:
    """Per bin of predicted P(informative) (equal width): groups, mean predicted, share realised."""
    b = np.minimum((p_inf * bins).astype(np.int64), bins - 1)
    return [
        {"lo": i / bins, "hi": (i + 1) / bins, "groups": int((b == i).sum()),
         "predicted": float(p_inf[b == i].mean()), "realised": float(y[b == i].mean())}
        for i in range(bins) if (b == i).any()
    ]  # fmt: skip
