"""The difficulty model (pipeline/selection/posterior.py): against a slow reference, against its
SQL twin over the ledger, a never-cell's revival under decay, and the collector that selects
before rollout (nothing sampled to decide)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest

from grpo_core.types import Item, Sample, Scores
from pipeline.problems import generate
from pipeline.selection.posterior import (
    Observations,
    PosteriorConfig,
    cell_posterior,
    posterior_select,
    prompt_posterior,
    select_batch,
)
from pipeline.store import Ledger

CFG = PosteriorConfig(decay=0.8, cap=6.0, strength=3.0, cell_strength=5.0, floor=0.03)


def beta_sf(x: float, a: float, b: float) -> float:
    """P(p ≥ x) under Beta(a, b), by a million seeded draws (no scipy in the test venv)."""
    return float((np.random.default_rng(0).beta(a, b, 1_000_000) >= x).mean())


def slow(obs: list[tuple[str, str, float, float, int]], prompts: dict[str, str], cfg, now):
    """The model written out with loops, from its docstring."""
    w = [(p, c, cfg.decay ** (now - u) * min(1.0, cfg.cap / n), k, n) for p, c, k, n, u in obs]
    m = (sum(x * k for _, _, x, k, _ in w) + 1) / (sum(x * n for _, _, x, _, n in w) + 2)
    cells: dict[str, float] = {}
    for cell in {c for _, c, *_ in w}:
        wk = sum(x * k for _, c, x, k, _ in w if c == cell)
        wn = sum(x * n for _, c, x, _, n in w if c == cell)
        y = (wk + cfg.cell_strength * m) / (wn + cfg.cell_strength)
        cells[cell] = min(max(y, cfg.floor), 1 - cfg.floor)
    out = {}
    for pid, cell in prompts.items():
        y = cells.get(cell, min(max(m, cfg.floor), 1 - cfg.floor))
        pk = sum(x * k for p, _, x, k, _ in w if p == pid)
        pn = sum(x * n for p, _, x, _, n in w if p == pid)
        out[pid] = (y, cfg.strength * y + pk, cfg.strength * (1 - y) + pn - pk)
    return out


def random_obs(rng: np.random.Generator, pids: list[str], cell: dict[str, str], rows: int):
    out = []
    for _ in range(rows):
        p = pids[int(rng.integers(len(pids)))]
        n = float(rng.choice([4, 8, 16]))
        out.append((p, cell[p], float(rng.integers(0, n + 1)), n, int(rng.integers(0, 20))))
    return out


def test_the_posterior_matches_a_slow_reference() -> None:
    rng = np.random.default_rng(1)
    cell = {f"p{i}": f"c{i % 4}" for i in range(30)}
    obs = random_obs(rng, list(cell)[:20], cell, 60)  # p20..p29 unseen; cell c? all seen
    cell["new"] = "unseen cell"
    prompts = pl.DataFrame({"problem_id": list(cell), "cell": list(cell.values())})
    got = prompt_posterior(Observations(obs).frame(), prompts, CFG, now=25)
    ref = slow(obs, cell, CFG, 25)
    for r in got.iter_rows(named=True):
        y, a, b = ref[r["problem_id"]]
        assert r["cell_yield"] == pytest.approx(y, abs=1e-12)
        assert r["alpha"] == pytest.approx(a, abs=1e-12)
        assert r["beta"] == pytest.approx(b, abs=1e-12)
        assert r["mean"] == pytest.approx(a / (a + b), abs=1e-12)


def test_the_sql_over_the_ledger_agrees_with_the_python_to_1e_12() -> None:
    problems = generate("arith", [1, 2], 40, seed=5).filter(pl.col("split") == "train")
    rng = np.random.default_rng(2)
    cell = {
        p: f"arith {lv}" for p, lv in zip(problems["problem_id"], problems["level"], strict=True)
    }
    seen = list(cell)[: len(cell) // 2]
    with Ledger.memory() as ledger:
        ledger.write("problems", problems)
        ledger.run("INSERT INTO train_runs (train_id, started_at, status) "
                   "VALUES ('t', now(), 'finished')")  # fmt: skip
        obs = []
        for step in range(12):
            for p in rng.choice(seen, 4, replace=False):
                n = int(rng.choice([4, 8]))
                k = int(rng.integers(0, n + 1))
                obs.append((str(p), cell[str(p)], float(k), float(n), step))
                for i in range(n):
                    ledger.run(
                        "INSERT INTO train_rollouts (train_id, step, problem_id, sample_idx, "
                        "policy, reward, correct) VALUES ('t', $s, $p, $i, 'r', $w, $w > 0.5)",
                        {"s": step, "p": str(p), "i": i, "w": float(i < k)},
                    )
        ledger.run("INSERT INTO train_skips VALUES ('t', 12, $p, 3, 0.5)", {"p": seen[0]})
        params = {"train": "t", "now": 14, "decay": CFG.decay, "cap": CFG.cap,
                  "strength": CFG.strength, "cell_strength": CFG.cell_strength,
                  "floor": CFG.floor}  # fmt: skip
        sql = ledger.query("prompt_posterior", **params)
    prompts = pl.DataFrame({"problem_id": list(cell), "cell": list(cell.values())})
    py = prompt_posterior(Observations(obs).frame(), prompts, CFG, now=14).sort("problem_id")
    assert sql["problem_id"].to_list() == py["problem_id"].to_list()
    for col in ("cell_yield", "alpha", "beta", "mean"):
        assert np.max(np.abs(sql[col].to_numpy() - py[col].to_numpy())) < 1e-12, col


def test_a_cell_that_failed_early_revives_once_the_policy_learns_elsewhere() -> None:
    """Two 0/8 groups at the start: MoPPS's decay-on-observation keeps the prompt at
    P(p ≥ 0.3) = 0.002 for ever (at decay 1; 0.01 at its 0.5); here the zeros decay with every
    update and the cell's yield follows the pooled yield up, so 30 updates later the prompt is
    worth drawing again."""
    early = [("x", "never", 0.0, 8.0, 0), ("x", "never", 0.0, 8.0, 1)]
    later = [(f"o{u}", "other", 4.0, 8.0, u) for u in range(2, 30)]  # half right elsewhere
    prompts = pl.DataFrame({"problem_id": ["x"], "cell": ["never"]})
    cfg = PosteriorConfig()
    at_start = prompt_posterior(Observations(early).frame(), prompts, cfg, now=2).row(0, named=True)
    late = prompt_posterior(Observations(early + later).frame(), prompts, cfg, now=32)
    r = late.row(0, named=True)
    p_start = beta_sf(0.3, at_start["alpha"], at_start["beta"])
    p_late = beta_sf(0.3, r["alpha"], r["beta"])
    # a Beta(1, 1) prompt posterior that decays only when observed (MoPPS; here at decay 1)
    # is Beta(1, 17) after two 0/8 groups, and stays there while the prompt is not drawn
    assert beta_sf(0.3, 1.0, 17.0) == pytest.approx(0.7**17, abs=3e-4)  # 0.002
    assert p_start < 0.01 and p_late > 0.2


def test_a_cap_bounds_what_one_group_weighs() -> None:
    prompts = pl.DataFrame({"problem_id": ["x"], "cell": ["c"]})
    cfg = PosteriorConfig(cap=8.0)
    big = prompt_posterior(Observations([("x", "c", 0.0, 64.0, 0)]).frame(), prompts, cfg, 0)
    small = prompt_posterior(Observations([("x", "c", 0.0, 8.0, 0)]).frame(), prompts, cfg, 0)
    assert big["alpha"][0] + big["beta"][0] == pytest.approx(small["alpha"][0] + small["beta"][0])


def test_cells_with_no_evidence_start_at_the_pooled_yield() -> None:
    obs = Observations([("a", "c1", 6.0, 8.0, 0), ("b", "c1", 2.0, 8.0, 0)]).frame()
    pooled, cells = cell_posterior(obs, PosteriorConfig(), 0)
    assert pooled == pytest.approx(9 / 18)
    assert cells["cell_yield"][0] == pytest.approx((8 + 8 * pooled) / (16 + 8))
    fresh = prompt_posterior(obs, pl.DataFrame({"problem_id": ["z"], "cell": ["c9"]}),
                             PosteriorConfig(), 0)  # fmt: skip
    assert fresh["cell_yield"][0] == pytest.approx(pooled)


def test_select_batch_prefers_learnable_prompts() -> None:
    alpha = np.array([200.0, 1.0, 50.0, 40.0])
    beta = np.array([1.0, 200.0, 50.0, 60.0])
    picked = select_batch(alpha, beta, 2, np.random.default_rng(0))
    assert sorted(picked.tolist()) == [2, 3]
    with pytest.raises(ValueError, match="4 candidates for a batch of 5"):
        select_batch(alpha, beta, 5, np.random.default_rng(0))


class Fake:
    def __init__(self, right: dict[str, int]) -> None:
        from grpo_core.config import GRPOConfig

        self.right, self.cfg, self.calls = right, GRPOConfig(), []

    def step_seed(self, step: int, round_: int = 0) -> int:
        return step

    def sample_and_score(self, items: Sequence[Item], seed: int, sizes=None):
        self.calls.append([it.key for it in items])
        groups = [[Sample((1,), f"{it.key}{i}", False) for i in range(it.group_size)]
                  for it in items]  # fmt: skip
        ok = [i < self.right[it.key] for it in items for i in range(it.group_size)]
        return groups, Scores([float(x) for x in ok], list(ok)), 0.0, 0.0

    def score_groups(self, items: Sequence[Item], groups: list[list[Sample]]):
        ok = [s.text.endswith("-s0") for g in groups for s in g]  # stored: one right of four
        return groups, Scores([float(x) for x in ok], ok)


def test_the_collector_samples_only_what_it_trains_and_learns_from_it() -> None:
    keys = [f"k{i}" for i in range(16)]
    cell_of = {k: ("easy" if i < 8 else "mid") for i, k in enumerate(keys)}
    right = {k: (4 if cell_of[k] == "easy" else 2) for k in keys}
    obs = Observations()
    fake = Fake(right)
    items = [Item(k, k, 4, key=k) for k in keys]
    collect = posterior_select(lambda s, r: items, cell_of, obs, 4, seed=0)
    mids = []
    for step in range(6):
        c = collect(fake, step)
        assert c.rollouts == 16 and len(c.items) == 4  # 4 groups of 4: nothing to decide
        mids.append(sum(cell_of[it.key] == "mid" for it in c.items))
    assert sum(len(x) for x in fake.calls) == 24 and len(obs.rows) == 24
    assert sum(mids[3:]) > sum(mids[:1]) * 3 - 1 and mids[-1] >= 3  # learns: the mid cell
    assert math.isfinite(c.metrics["predicted_informative"])


@pytest.mark.parametrize(("distinct", "batch"), [(1, 4), (3, 4), (3, 8), (5, 7), (2, 9)])
def test_a_curriculum_smaller_than_the_batch_still_trains_a_full_batch(
    distinct: int, batch: int
) -> None:
    """Fewer distinct prompts than a batch (a night that kept few): every step still trains
    `batch` groups, the best-ranked prompts taking a second; every group is evidence once."""
    keys = [f"k{i}" for i in range(distinct)]
    cell_of = {k: "c" for k in keys}
    obs = Observations()
    fake = Fake({k: 2 for k in keys})
    items = [Item(k, k, 4, key=k) for k in keys]
    collect = posterior_select(lambda s, r: items, cell_of, obs, batch, seed=0)
    for step in range(3):
        c = collect(fake, step)
        counts = [sum(it.key == k for it in c.items) for k in keys]
        assert len(c.items) == batch and c.rollouts == 4 * batch
        assert max(counts) - min(counts) <= 1
    assert len(obs.rows) == 3 * batch


@pytest.mark.parametrize("distinct", [1, 2, 3])
def test_a_repeated_prompt_replays_its_stored_samples_once(distinct: int) -> None:
    """A prompt picked twice in one step on its first visit trains its stored (curation)
    samples once; its second group is sampled fresh and observed, the replayed one is not (the
    ledger already holds it as curation evidence)."""
    from grpo_core.config import GRPOConfig

    keys = [f"k{i}" for i in range(distinct)]
    cell_of = {k: "c" for k in keys}
    stored = {k: [Sample((1,), f"{k}-s{i}", False, logprobs=(0.0,)) for i in range(4)]
              for k in keys}  # fmt: skip
    obs = Observations()
    fake = Fake({k: 1 for k in keys})
    fake.cfg = GRPOConfig(reference="frozen")
    collect = posterior_select(lambda s, r: [Item(k, k, 4, key=k) for k in keys], cell_of, obs,
                               4, seed=0, stored=stored, visited=set())  # fmt: skip
    c = collect(fake, 0)
    assert len(c.items) == 4
    sampled = [k for call in fake.calls for k in call]
    assert len(sampled) == 4 - distinct  # each prompt's first copy replayed, the rest fresh
    assert len(obs.rows) == 4 - distinct


def test_flat_probability_is_the_beta_binomial_closed_form() -> None:
    from pipeline.selection.posterior import flat_probability

    flat = flat_probability(np.array([1.0, 2.0]), np.array([1.0, 3.0]), 6)
    # Beta(1, 1): P(all right of G) = 1 / (G + 1), so flat = 2 / (G + 1)
    assert flat[0] == pytest.approx([2 / (g + 1) for g in range(1, 7)], abs=1e-12)
    # Beta(2, 3): E[p^G] = B(2 + G, 3) / B(2, 3), by seeded draws
    p = np.random.default_rng(0).beta(2.0, 3.0, 2_000_000)
    mc = [float((p**g).mean() + ((1 - p) ** g).mean()) for g in range(1, 7)]
    assert flat[1] == pytest.approx(mc, abs=2e-3)


def test_group_size_is_the_smallest_informative_enough_or_a_screen() -> None:
    from pipeline.selection.posterior import group_size_for

    alpha, beta = np.array([500.0, 1.0, 500.0, 5.0]), np.array([500.0, 1.0, 500.0, 95.0])
    g = group_size_for(alpha, beta, np.array([2, 4, 8, 4]), 16, 0.9)
    # p ≈ 0.5 known well: 1 − 2·0.5^G ≥ 0.9 from G = 5 (0.9375; G = 4 gives 0.875);
    # Beta(1, 1): flat 2 / (G + 1) > 0.1 up to G = 18, so not sure enough (screen: 0);
    # the same p with the item's G 8 takes 8; p ≈ 0.05: 1 − E[(1 − p)^G] − … needs G > 16
    assert g.tolist() == [5, 0, 8, 0]


class Graded:
    """A fake trainer whose prompt `key` answers right on samples i with i % den < num (rate
    num/den), honouring `sizes`; it records every call's (keys, sizes)."""

    def __init__(self, rate: dict[str, tuple[int, int]]) -> None:
        from grpo_core.config import GRPOConfig

        self.rate, self.cfg, self.calls = rate, GRPOConfig(), []
        self.drawn: dict[str, int] = {}

    def step_seed(self, step: int, round_: int = 0) -> int:
        return step * 10 + round_

    def sample_and_score(self, items: Sequence[Item], seed: int, sizes=None):
        sizes = list(sizes) if sizes is not None else [it.group_size for it in items]
        self.calls.append([(it.key, g) for it, g in zip(items, sizes, strict=True)])
        groups, ok = [], []
        for it, g in zip(items, sizes, strict=True):
            start = self.drawn.get(it.key, 0)
            num, den = self.rate[it.key]
            groups.append([Sample((1,), f"{it.key}{start + i}", False) for i in range(g)])
            ok += [(start + i) % den < num for i in range(g)]
            self.drawn[it.key] = start + g
        return groups, Scores([float(x) for x in ok], list(ok)), 0.0, 0.0


def test_two_stages_train_the_screen_samples_and_refill_flat_screens() -> None:
    from pipeline.selection.posterior import ScreenConfig, posterior_screen

    keys = [f"k{i}" for i in range(12)]
    rate = {k: ((0, 1) if i < 4 else (1, 1) if i < 8 else (1, 2)) for i, k in enumerate(keys)}
    cell_of = {k: "c" for k in keys}  # one cell, nothing known: Beta(2, 2) for every prompt,
    # informative at G = 8 with probability 0.89 < 0.9 (at 9 it would be 0.91), so all screen
    obs = Observations()
    fake = Graded(rate)
    items = [Item(k, k, 8, key=k) for k in keys]
    collect = posterior_screen(lambda s, r: items, cell_of, obs, 3, seed=0,
                               screen=ScreenConfig(screen_g=4, g_max=8, rounds=6))  # fmt: skip
    c = collect(fake, 0)
    kept = [it.key for it in c.items]
    assert len(kept) == 3 and all(rate[k] == (1, 2) for k in kept)  # only the mixed prompts
    for it, grp in zip(c.items, c.groups, strict=True):  # screen samples 0-3 stay, then 4-7
        assert [s.text for s in grp] == [f"{it.key}{i}" for i in range(8)]
    flat = c.metrics["decided_only"]
    screens = 4 * c.metrics["screened"]  # every first call was a screen of 4 (none straight)
    assert c.metrics["straight"] == 0 and c.metrics["screened"] > 3  # flat ones replaced
    assert c.rollouts == 3 * 8 + flat  # every rollout trained except the flat screens
    assert flat == screens - 3 * 4 and c.metrics["continued"] == 3
    assert c.rollouts == sum(g for call in fake.calls for _, g in call)
    # every sampled group is evidence: one observation per prompt sampled
    assert len(obs.rows) == c.metrics["screened"] + c.metrics["straight"]


def test_a_prompt_the_posterior_is_sure_of_goes_straight_to_its_group() -> None:
    from pipeline.selection.posterior import ScreenConfig, posterior_screen

    keys = ["a", "b"]
    obs = Observations([(k, "c", 40.0, 80.0, 0) for k in keys] * 3)  # p ≈ 0.5, well known
    fake = Graded({k: (1, 2) for k in keys})
    items = [Item(k, k, 4, key=k) for k in keys]
    cfg = PosteriorConfig(decay=1.0, cap=100.0)
    collect = posterior_screen(lambda s, r: items, {k: "c" for k in keys}, obs, 2, seed=0,
                               cfg=cfg, screen=ScreenConfig())  # fmt: skip
    c = collect(fake, 1)
    assert c.metrics["straight"] == 2 and c.metrics["screened"] == 0
    assert fake.calls == [[("a", 5), ("b", 5)]]  # G = 5: 1 − 2·0.5^5 ≈ 0.94 ≥ 0.9, one call
    assert c.rollouts == 10 and c.metrics["decided_only"] == 0


def test_a_short_batch_is_filled_straight_after_the_screening_round() -> None:
    """One screening round; flat screens decide and the rest of the batch is drawn straight at
    the items' G (a pool with few learnable prompts still trains a full batch); rounds = 0
    screens nothing."""
    from pipeline.selection.posterior import ScreenConfig, posterior_screen

    keys = [f"k{i}" for i in range(12)]
    rate = {k: (0, 1) for k in keys}  # nothing is ever right: every screen is flat
    items = [Item(k, k, 8, key=k) for k in keys]
    for rounds, screened in ((1, 3), (0, 0)):
        fake = Graded(rate)
        collect = posterior_screen(lambda s, r: items, {k: "c" for k in keys}, Observations(), 3,
                                   seed=0, screen=ScreenConfig(g_max=8, rounds=rounds))  # fmt: skip
        c = collect(fake, 0)
        assert len(c.items) == 3 and all(len(g) == 8 for g in c.groups)  # a full batch
        assert c.metrics["screened"] == screened and c.metrics["filled"] == 3
        assert c.metrics["decided_only"] == 4 * screened  # only the flat screens
        assert c.rollouts == 3 * 8 + 4 * screened
        screened_keys = {k for call in fake.calls[:1] for k, g in call if g == 4}
        assert not screened_keys & {it.key for it in c.items}  # fill takes other candidates


@pytest.mark.parametrize("later", [1, 2, 10])
def test_a_group_of_a_later_update_is_not_evidence_yet(later: int) -> None:
    """A sibling run's group sampled further along its lineage (update > now) waits: the
    posterior at `now` is the one without it, and counts it once now reaches its update."""
    base = [("a", "c1", 6.0, 8.0, 0), ("b", "c1", 2.0, 8.0, 0)]
    ahead = [*base, ("a", "c1", 0.0, 8.0, later)]
    cfg = PosteriorConfig()
    cand = pl.DataFrame({"problem_id": ["a", "b"], "cell": ["c1", "c1"]})
    now = 0
    got = prompt_posterior(Observations(ahead).frame(), cand, cfg, now)
    want = prompt_posterior(Observations(base).frame(), cand, cfg, now)
    assert got.equals(want)
    at = prompt_posterior(Observations(ahead).frame(), cand, cfg, later)
    assert not at.equals(prompt_posterior(Observations(base).frame(), cand, cfg, later))
