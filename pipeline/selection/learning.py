"""The learning difficulty model: the static posterior (posterior.py) with evidence that moves as
training moves the policy. The selection before rollout uses it when `SelectionConfig.model` is
"learning"; `pipeline.selection.forecast` scores it on recorded runs (benchmarks/forecast.py).

`LearningModel` is posterior.py's model with five departures, each a field of `LearningConfig`;
with all of them off it is the static model to rounding (tests/selection/test_forecast.py holds
it there):
- `forget`: a prompt's evidence also fades per later group of it (MoPPS's clock, Qu et al. 2025,
  arXiv 2507.04632), beside or instead of per update (`decay`);
- `strength=None`: the prior strength s matched online, separately for unseen and for seen
  prompts, so that the earlier groups' predicted informative share equals the realised one
  (pass rates within a cell are U-shaped: s = 4 puts too much mass near the cell's yield);
- `drift`: a seen prompt's predictive mean moves in logit space by a_c + b_c · g / GAP_UNIT
  (g: updates since its last group; a_c: what being trained on moves it, b_c: the pace after),
  fitted on the run's earlier revisits against what the model without the shift forecast for
  them (penalised logistic regression with offset, each cell shrunk toward the pooled fit,
  older rows down-weighted by `memory` per update). The mean then moves by the fit instead of
  decaying toward the prior: `decay` only widens the predictive (lowers its strength). DPS (Mao
  et al. 2026, arXiv 2603.10887) models a prompt's solving progress as a hidden Markov chain;
  this is its one-parameter-per-cell cousin, fitted by regression instead of filtering;
- `cell_shift`: an unseen prompt's prior moves the same way by a_c fitted on the cell's earlier
  first groups (an untrained prompt moves with training too; a decayed yield lags it);
- a start prior: k of n samples per cell known before the run (a measurement of the start
  weights), added to the cells' evidence (`add_cells`).

`LEARNING` holds the settings benchmarks/forecast.py found best on the committed runs (strength
1, decay 0.9 per update and forgetting 0.7 per group, cell strength 2 with cell decay 0.97,
drift and cell shift on). `RunLearner` keeps a `LearningModel` in step with a run's
`Observations` rows, so the rows stay the one state a run saves and resumes from.

Test: `.venv/bin/pytest tests/selection/test_forecast.py tests/selection/test_posterior_learning.py
-q`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_core.validate import Fraction, NonNegative, Positive, check_fields
from pipeline.selection.stats import informative_probability

GAP_UNIT = 10.0  # the drift's pace b_c is per this many updates (a and b on one scale)
EPS = 1e-6  # probabilities are clipped to [EPS, 1 − EPS] before a logit or a log
STRENGTHS = np.exp(np.linspace(np.log(0.05), np.log(100.0), 41))  # the grid s is matched on


@dataclass(frozen=True)
class LearningConfig:
    """`LearningModel`'s settings. The defaults are the static model's (`PosteriorConfig`'s
    values, no forgetting per group, no drift, no shifts); `LEARNING` is the learning model."""

    decay: Fraction = 0.9  # weight a group keeps per update of age (the static model's γ)
    cell_decay: Fraction = 0.9  # the same for the cells' yields
    cap: Positive = 8.0  # the most samples one group counts for
    strength: Positive | None = 4.0  # s of a prompt's prior; None: matched online
    cell_strength: Positive = 8.0  # pseudo-samples of the pooled yield in a cell's yield
    floor: Fraction = 0.02  # a cell's yield stays in [floor, 1 − floor]
    forget: Fraction = 1.0  # weight a prompt's evidence keeps per later group of it (MoPPS's λ)
    drift: bool = False  # a seen prompt's mean moves by its cell's a_c + b_c · g / GAP_UNIT (DPS)
    cell_shift: bool = False  # an unseen prompt's prior moves by its cell's fitted a_c
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


# the learning model as the selection runs it: the settings benchmarks/forecast.py chose for
# every committed run (results/forecast.json, Brier of P(informative): 0.201 against the static
# model's 0.317 on real warm, 0.112 against 0.148 on tiny cold; 0.183 and 0.105 with the start
# prior)
LEARNING = LearningConfig(
    strength=1.0,
    decay=0.9,
    forget=0.7,
    cell_strength=2.0,
    cell_decay=0.97,
    drift=True,
    cell_shift=True,
)


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, EPS, 1.0 - EPS)
    return np.log(q) - np.log1p(-q)


def sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) without overflow at any z (1 / (1 + e^−z) overflows for z below about −709)."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


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
    # a fitted shift that ran off (±inf, NaN from an empty fit) moves nothing it should not:
    # the mean stays inside [EPS, 1 − EPS], so α and β stay > 0 for any strength > 0
    shift = np.nan_to_num(col(part["shift"]), nan=0.0, posinf=0.0, neginf=0.0)
    moved = np.where(shift != 0, sigmoid(logit(static) + shift), static)
    moved = np.clip(moved, EPS, 1.0 - EPS)
    total = s + col(part["en_w"])
    return moved * total, (1.0 - moved) * total


class LearningModel:
    """The static model with the departures of `LearningConfig` (the module's docstring), fed
    in update order: `predict` a group's Beta predictive from the groups of earlier updates,
    then `observe` its outcome. `prior`: k of n samples per cell known at update 0."""

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
        self._add(prior or {})

    def _add(self, counts: Mapping[str, tuple[float, float]]) -> None:
        for c, (k, n) in counts.items():
            i = self._cell(c)
            self.ck[i] += k
            self.cn[i] += n

    def add_cells(self, counts: Mapping[str, tuple[float, float]], now: int) -> None:
        """k of n samples per cell measured at update `now` (e.g. the start weights' screen):
        cell evidence from then on, decaying by `cell_decay` like a group observed then."""
        self._advance(now)
        self._add(counts)

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


class RunLearner:
    """A `LearningModel` kept in step with a run's observation rows (key, cell, k, n, update),
    the rows being the state a run saves: each call observes the rows added since the last one,
    in update order, up to the update asked about (rows of a later update wait for it); a row
    older than the model's clock (rows loaded out of order) starts the model again from every
    row. `prior` (cell → (k, n)) joins the cells' evidence at update `prior_update`, before the
    groups of that update."""

    def __init__(
        self,
        cfg: LearningConfig,
        prior: Mapping[str, tuple[float, float]] | None = None,
        prior_update: int = 0,
    ) -> None:
        self.cfg, self.prior, self.prior_update = cfg, dict(prior or {}), prior_update
        self._reset()

    def _reset(self) -> None:
        self.model = LearningModel(self.cfg)
        self.used = 0  # rows of the run's list taken in (observed or pending)
        self.pending: list[tuple[str, str, float, float, int]] = []
        self.prior_added = not self.prior

    def _take(self, rows: Sequence[Sequence[Any]]) -> None:
        new = [_row(r) for r in rows[self.used :]]
        if any(r[4] < self.model.now for r in new) or len(rows) < self.used:
            self._reset()
            new = [_row(r) for r in rows]
        self.used = len(rows)
        self.pending = sorted([*self.pending, *(r for r in new if r[3] > 0)], key=lambda r: r[4])

    def _prior_at(self, update: int) -> None:
        if not self.prior_added and update >= self.prior_update:
            self.model.add_cells(self.prior, self.prior_update)
            self.prior_added = True

    def params(
        self, rows: Sequence[Sequence[Any]], key: Sequence[str], cell: Sequence[str], now: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Beta(α, β) of each prompt (`key`, `cell`) at update `now`, from `rows` before it."""
        self._take(rows)
        ready = [r for r in self.pending if r[4] <= now]
        self.pending = self.pending[len(ready) :]
        for update, group in itertools.groupby(ready, key=lambda r: r[4]):
            part = list(group)
            self._prior_at(update)
            key_, cell_, k, n, _ = zip(*part, strict=True)
            self.model.observe(np.array(key_, dtype=object), np.array(cell_, dtype=object),
                               np.array(k), np.array(n), update)  # fmt: skip
        self._prior_at(now)
        g = np.ones(len(key))  # the model's predictive does not depend on the group's size
        return self.model.predict(np.array(key, dtype=object), np.array(cell, dtype=object), g, now)


def _row(r: Sequence[Any]) -> tuple[str, str, float, float, int]:
    return str(r[0]), str(r[1]), float(r[2]), float(r[3]), int(r[4])
