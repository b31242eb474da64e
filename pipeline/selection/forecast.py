"""Forecasting a difficulty model on groups a run already recorded: replay the run's observations
in order and, before each update's groups, ask the model for each group's pass rate and the
probability that it is informative (0 < k < n), knowing only the groups of earlier updates. A
model is scored on stored groups before it is trusted with new rollouts (Brier score, log loss,
calibration per quarter of the run); `benchmarks/forecast.py` does it on the committed runs.

- Clock: a group observed at update u is forecast from the groups of updates < u. Groups of the
  same update are forecast together, as the selection sees them (`posterior_select` computes
  every candidate's posterior once per step, before any group of the step is sampled).
- Forecast: every model answers a Beta(α, β) predictive per group; the pass rate is its mean and
  P(informative) = 1 − E[p^n] − E[(1 − p)^n] exactly under the Beta-binomial (the moments of
  `posterior.flat_probability`), not at the mean as the trainer's `predicted_informative`
  metric reads it.
- Models: `ProductPosterior` (posterior.py's `prompt_posterior` on the replay's frame),
  `MoppsPosterior` (`grpo_core.select.BetaPosterior`: MoPPS, Qu et al. 2025, arXiv 2507.04632,
  Beta(1, 1) and decay toward it at each new group of the prompt) and `LearningModel`.

`LearningModel` is the product's model with five departures, each a field of `LearningConfig`;
with all of them off it is `ProductPosterior` to rounding (the tests hold it there):
- `forget`: a prompt's evidence also fades per later group of it (MoPPS's clock), beside or
  instead of per update (`decay`);
- `strength=None`: the prior strength s matched online, separately for unseen and for seen
  prompts, so that the earlier groups' predicted informative share equals the realised one
  (pass rates within a cell are U-shaped: s = 4 puts too much mass near the cell's yield);
- `drift`: a seen prompt's predictive mean moves in logit space by a_c + b_c · g / GAP_UNIT
  (g: updates since its last group; a_c: what being trained on moves it, b_c: the pace after),
  fitted on the run's earlier revisits against what the model without the shift forecast for
  them (penalised logistic regression with offset, each cell shrunk toward the pooled fit,
  older rows down-weighted by `memory` per update). The mean then moves by the fit instead of
  decaying toward the prior: `decay` only widens the predictive (lowers its strength);
- `cell_shift`: an unseen prompt's prior moves the same way by a_c fitted on the cell's earlier
  first groups (an untrained prompt moves with training too; a decayed yield lags it);
- `prior`: k of n samples per cell known at update 0 (a measurement of the start weights).

Test: `.venv/bin/pytest tests/selection/test_forecast.py -q`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import polars as pl

from grpo_core.select import BetaPosterior
from grpo_core.validate import Fraction, NonNegative, Positive, check_fields
from pipeline.selection.posterior import Observations, PosteriorConfig, prompt_posterior

GAP_UNIT = 10.0  # the drift's pace b_c is per this many updates (a and b on one scale)
EPS = 1e-6  # probabilities are clipped to [EPS, 1 − EPS] before a logit or a log
STRENGTHS = np.exp(np.linspace(np.log(0.05), np.log(100.0), 41))  # the grid s is matched on


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


def informative_probability(alpha: np.ndarray, beta: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P(0 < k < n) for k ~ BetaBinomial(n, α, β), elementwise (n whole, ≥ 1): 1 − E[p^n] −
    E[(1 − p)^n], each moment Π_{i<n} (α + i) / (α + β + i) as in `flat_probability`."""
    g = np.asarray(n).astype(np.int64)
    out = np.zeros(len(g))
    for size in np.unique(g):
        at = g == size
        a, b = alpha[at], beta[at]
        right, wrong = np.ones(len(a)), np.ones(len(a))
        for i in range(int(size)):
            right *= (a + i) / (a + b + i)
            wrong *= (b + i) / (a + b + i)
        out[at] = 1.0 - right - wrong
    return out


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


# ---------------------------------------------------------------- the learning model


@dataclass(frozen=True)
class LearningConfig:
    """`LearningModel`'s settings. The defaults are the product's model: `PosteriorConfig`'s
    values, no forgetting per group, no drift, no shifts."""

    decay: Fraction = 0.9  # weight a group keeps per update of age (the product's γ)
    cell_decay: Fraction = 0.9  # the same for the cells' yields
    cap: Positive = 8.0  # the most samples one group counts for
    strength: Positive | None = 4.0  # s of a prompt's prior; None: matched online
    cell_strength: Positive = 8.0  # pseudo-samples of the pooled yield in a cell's yield
    floor: Fraction = 0.02  # a cell's yield stays in [floor, 1 − floor]
    forget: Fraction = 1.0  # weight a prompt's evidence keeps per later group of it (MoPPS's λ)
    drift: bool = False  # move a seen prompt's mean by its cell's fitted a_c + b_c · g / GAP_UNIT
    cell_shift: bool = False  # move an unseen prompt's prior by its cell's fitted a_c
    strength_groups: NonNegative = 2.0  # weight, in groups, of s = 4 in the matched strength
    ridge: Positive = 20.0  # pseudo-information pulling a cell's shift to the pooled one (it to 0)
    memory: Fraction = 0.9  # weight a row keeps per update of age in the fits (training's pace)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.decay == 0 or self.cell_decay == 0 or self.floor >= 0.5:
            raise ValueError(
                f"need decay, cell_decay > 0 and floor < 0.5; got {self.decay}, "
                f"{self.cell_decay}, {self.floor}"
            )


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, EPS, 1.0 - EPS)
    return np.log(q) - np.log1p(-q)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def fit_shift(
    offset: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    group: np.ndarray,
    centre: np.ndarray,
    ridge: float,
) -> np.ndarray:
    """Per group g, θ_g maximising Σ_{rows of g} w [k log σ(o + x θ_g) + (n − k) log(1 − σ(o +
    x θ_g))] − ridge/2 |θ_g − centre_g|² by Newton's method (each objective is concave).
    Shapes: offset, k, n, w, group (R,), group in [0, G); x (R, F); centre and θ (G, F)."""
    theta = centre.astype(np.float64).copy()
    groups, feats = theta.shape
    for _ in range(50):
        p = sigmoid(offset + np.sum(x * theta[group], axis=1))
        grad = -ridge * (theta - centre)  # (G, F)
        hess = np.tile(ridge * np.eye(feats), (groups, 1, 1))  # (G, F, F)
        for i in range(feats):
            grad[:, i] += np.bincount(group, w * (k - n * p) * x[:, i], groups)
            for j in range(feats):
                hess[:, i, j] += np.bincount(group, w * n * p * (1 - p) * x[:, i] * x[:, j], groups)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        theta += step
        if not step.size or np.max(np.abs(step)) < 1e-9:
            break
    return theta


def matched_strength(
    informative: Callable[[np.ndarray], np.ndarray],
    y: np.ndarray,
    w: np.ndarray,
    prior: float,
    s0: float = 4.0,
) -> float:
    """The prior strength s at which a model predicts as many informative groups as were seen,
    Σ w P(informative | s) = Σ w y, shrunk toward s0 in log space by `prior` groups against the
    data's weight Σ w. `informative(s)`: P(informative) per group (R,) at each strength of the
    grid STRENGTHS (S,), as (R, S). P rises with s (a stronger prior keeps the mean away from 0
    and 1), so the root is read off the grid by interpolation in log s, clipped to its ends."""
    weight = float(w.sum())
    if weight <= 0:
        return s0
    got = w @ informative(STRENGTHS)  # (S,), rising
    log_s = float(np.interp(float(w @ y), got, np.log(STRENGTHS)))
    return float(np.exp((weight * log_s + prior * np.log(s0)) / (weight + prior)))


PARTS = ("m", "ek", "en", "en_w", "shift", "offset", "seen", "gap", "cell")


def beta_predictive(
    s: float | np.ndarray, part: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """`LearningModel`'s Beta(α, β) from a group's parts (PARTS): the cell's yield m (its shift
    in), the prompt's evidence ek of en held for the mean, en_w of it for the strength, and the
    logit shift of a seen prompt: mean σ(logit((s m + ek) / (s + en)) + shift), strength
    s + en_w. A strength s gives (R,) each; a grid of them (S,) gives (R, S)."""
    s = np.asarray(s, dtype=np.float64)
    col = (lambda v: v[:, None]) if s.ndim == 1 else (lambda v: v)
    static = (s * col(part["m"]) + col(part["ek"])) / (s + col(part["en"]))
    shift = col(part["shift"])
    moved = np.where(shift != 0, sigmoid(logit(static) + shift), static)
    total = s + col(part["en_w"])
    return moved * total, (1.0 - moved) * total


class LearningModel:
    """The product's model with the departures of `LearningConfig` (the module's docstring).
    `prior`: k of n samples per cell known at update 0 (a screen of the start weights)."""

    def __init__(
        self,
        cfg: LearningConfig | None = None,
        prior: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.cfg = cfg = cfg or LearningConfig()
        self.prompt: dict[str, list[float]] = {}  # key -> [wk, wn, update of its last group]
        self.cells: dict[str, int] = {}
        self.ck, self.cn = np.zeros(0), np.zeros(0)  # per cell, decayed to `now`
        self.now, self.fitted = 0, -1
        self.rows: dict[str, list[float]] = {f: [] for f in (*PARTS, "k", "n", "update")}
        self.fit: dict[str, tuple[np.ndarray, dict[int, np.ndarray]]] = {}
        self.strengths = (cfg.strength or 4.0, cfg.strength or 4.0)  # (unseen, seen)
        self._last: dict[str, np.ndarray] = {}
        for c, (k, n) in (prior or {}).items():
            i = self._cell(c)
            self.ck[i] += k
            self.cn[i] += n

    def _cell(self, c: str) -> int:
        if c not in self.cells:
            self.cells[c] = len(self.cells)
            self.ck, self.cn = np.append(self.ck, 0.0), np.append(self.cn, 0.0)
        return self.cells[c]

    def _advance(self, now: int) -> None:
        """Move the clock to `now`; learn from the rows of earlier updates once per update."""
        if now < self.now:
            raise ValueError(f"update {now} after update {self.now}: replay in order")
        f = self.cfg.cell_decay ** (now - self.now)
        self.ck, self.cn, self.now = self.ck * f, self.cn * f, now
        if self.fitted == now:
            return
        self.fitted = now
        r = {f: np.asarray(v, dtype=np.float64) for f, v in self.rows.items()}
        w = self.cfg.memory ** (now - r["update"])
        seen = r["seen"] > 0
        if self.cfg.drift or self.cfg.cell_shift:
            self.fit = {"first": self._fit_shift(r, w, ~seen, 1),
                        "revisit": self._fit_shift(r, w, seen, 2)}  # fmt: skip
        if self.cfg.strength is None:
            self.strengths = (self._match(r, w, ~seen), self._match(r, w, seen))

    def _match(self, r: dict[str, np.ndarray], w: np.ndarray, at: np.ndarray) -> float:
        part, n = {f: r[f][at] for f in PARTS}, r["n"][at]

        def informative(grid: np.ndarray) -> np.ndarray:  # (R, S)
            a, b = beta_predictive(grid, part)
            p = informative_probability(a.ravel(), b.ravel(), np.repeat(n, len(grid)))
            return p.reshape(a.shape)

        y = ((r["k"][at] > 0) & (r["k"][at] < n)).astype(np.float64)
        return matched_strength(informative, y, w[at], self.cfg.strength_groups)

    def _fit_shift(
        self, r: dict[str, np.ndarray], w: np.ndarray, at: np.ndarray, feats: int
    ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """(pooled θ, θ per cell) of the shift a + b · gap / GAP_UNIT (`feats` = 1: a only) on
        the rows `at`, against the forecast without it (the offset)."""
        x = np.stack([np.ones(len(w)), r["gap"] / GAP_UNIT], axis=1)[at, :feats]
        o, k, n, wt = r["offset"][at], r["k"][at], r["n"][at], w[at]
        cell = r["cell"][at].astype(np.int64)
        one = np.zeros(len(o), dtype=np.int64)
        pooled = fit_shift(o, k, n, x, wt, one, np.zeros((1, feats)), self.cfg.ridge)[0]
        cells = int(cell.max()) + 1 if len(cell) else 0
        theta = fit_shift(o, k, n, x, wt, cell, np.tile(pooled, (cells, 1)), self.cfg.ridge)
        return pooled, {int(c): theta[c] for c in np.unique(cell)}

    def _shift(self, cid: np.ndarray, gap: np.ndarray, kind: str) -> np.ndarray:
        if kind not in self.fit:
            return np.zeros(len(cid))
        pooled, per = self.fit[kind]
        theta = np.array([per.get(int(c), pooled) for c in cid]).reshape(len(cid), -1)
        x = np.stack([np.ones(len(gap)), gap / GAP_UNIT], axis=1)[:, : theta.shape[1]]
        return np.sum(theta * x, axis=1)

    def cell_yield(self, cell: np.ndarray) -> np.ndarray:
        """Each cell's yield at the current update (an unseen cell: the pooled yield)."""
        cfg = self.cfg
        pooled = (self.ck.sum() + 1.0) / (self.cn.sum() + 2.0)
        own = (self.ck + cfg.cell_strength * pooled) / (self.cn + cfg.cell_strength)
        idx = np.array([self.cells.get(c, -1) for c in cell], dtype=np.int64)
        y = np.where(idx >= 0, own[np.maximum(idx, 0)] if len(own) else pooled, pooled)
        return np.clip(y, cfg.floor, 1.0 - cfg.floor)

    def parts(self, key: np.ndarray, cell: np.ndarray, now: int) -> dict[str, np.ndarray]:
        """Each group's parts for `beta_predictive` at update `now`."""
        self._advance(now)
        cfg = self.cfg
        ev = np.array([self.prompt.get(str(q), [0.0, 0.0, -1.0]) for q in key]).reshape(-1, 3)
        seen = ev[:, 2] >= 0
        gap = np.where(seen, now - ev[:, 2], 0.0)
        kept = cfg.decay**gap
        held = np.ones(len(key)) if cfg.drift else kept  # with drift, age only widens
        cid = np.array([self.cells.get(c, -1) for c in cell], dtype=np.int64)
        m = self.cell_yield(cell)
        if cfg.cell_shift:
            m = sigmoid(logit(m) + self._shift(cid, np.zeros(len(key)), "first"))
        part = {"m": m, "ek": held * ev[:, 0], "en": held * ev[:, 1], "en_w": kept * ev[:, 1],
                "shift": np.zeros(len(key)), "seen": seen.astype(np.float64), "gap": gap,
                "cell": cid.astype(np.float64)}  # fmt: skip
        s = np.where(seen, self.strengths[1], self.strengths[0])
        part["offset"] = logit((s * m + part["ek"]) / (s + part["en"]))
        if cfg.drift:
            part["shift"] = np.where(seen, self._shift(cid, gap, "revisit"), 0.0)
        return part

    def predict(
        self, key: np.ndarray, cell: np.ndarray, n: np.ndarray, now: int
    ) -> tuple[np.ndarray, np.ndarray]:
        part = self.parts(key, cell, now)
        self._last = {"key": key, **part}
        seen = part["seen"] > 0
        a0, b0 = beta_predictive(self.strengths[0], part)
        a1, b1 = beta_predictive(self.strengths[1], part)
        return np.where(seen, a1, a0), np.where(seen, b1, b0)

    def observe(
        self, key: np.ndarray, cell: np.ndarray, k: np.ndarray, n: np.ndarray, now: int
    ) -> None:
        if not (self._last and np.array_equal(self._last["key"], key)):
            self.predict(key, cell, n, now)  # groups observed unforecast: their rows need one
        last, cfg = self._last, self.cfg
        last["cell"] = np.array([self._cell(str(c)) for c in cell], dtype=np.float64)
        for f in PARTS:
            self.rows[f].extend(last[f].tolist())
        self.rows["k"].extend(k.tolist())
        self.rows["n"].extend(n.tolist())
        self.rows["update"].extend([float(now)] * len(k))
        w = np.minimum(1.0, cfg.cap / n)
        for i, (q, ci) in enumerate(zip(key, last["cell"].astype(np.int64), strict=True)):
            self.ck[ci] += w[i] * k[i]
            self.cn[ci] += w[i] * n[i]
            wk, wn, t = self.prompt.get(str(q), [0.0, 0.0, -1.0])
            keep = (1.0 if cfg.drift else cfg.decay ** (now - t)) * cfg.forget if t >= 0 else 0.0
            self.prompt[str(q)] = [keep * wk + w[i] * k[i], keep * wn + w[i] * n[i], float(now)]
        self._last = {}


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
