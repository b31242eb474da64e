"""The backtest's select-before-rollout arm (`pipeline.jobs.analysis.backtest_arms.posterior_arm`,
issue 46 point 7): the trainer's own collector (`posterior_select`) replayed over stored samples. A
hand-computed pool whose picks follow from the model's formulas; every rollout it reads trains; it
sees a prompt's samples only once it picks them; deterministic under a seed; the depth cap; refusals
and parameters as one line.

Test: `.venv/bin/pytest tests/test_backtest_posterior.py -q`.
"""

from __future__ import annotations

import random
import re

import polars as pl
import pytest

from pipeline.core.errors import SieveError
from pipeline.jobs.analysis import backtest as bt
from pipeline.jobs.analysis import backtest_arms as arms
from pipeline.jobs.analysis import backtest_pool as bp
from pipeline.selection import CurateConfig
from pipeline.selection.posterior import PosteriorConfig


def frame(answers: dict[str, tuple[str, str]]) -> pl.DataFrame:
    """A scored pool: prompt -> (cell, samples in draw order as 0/1)."""
    rows = [(p, cell, i, int(x)) for p, (cell, text) in answers.items() for i, x in enumerate(text)]
    pool = pl.DataFrame(rows, schema=["problem_id", "cell", "sample_idx", "r"], orient="row")
    return pool.select(
        "problem_id",
        "cell",
        "sample_idx",
        pl.col("r").cast(pl.Float64).alias("reward"),
        (pl.col("r") == 1).alias("correct"),
    )


# cell A always right, cell B right every other sample: every B pair (1, 0) is informative
HAND = frame(
    {f"a{i}": ("A", "11111111") for i in range(3)} | {f"b{i}": ("B", "10101010") for i in range(3)}
)
# the posterior is (almost exactly) the cell's yield: an unseen prompt's prior has strength
# 1000, a cell's yield is its own rate (the pooled yield weighs 0.01 samples), no decay, no floor
SHARP = PosteriorConfig(decay=1.0, strength=1000.0, cell_strength=0.01, floor=0.0)


def test_the_hand_case_picks_cell_b_once_a_is_seen_and_trains_every_rollout() -> None:
    # By hand: before any group both cells sit at the pooled yield 0.5, a tie. A's first group
    # (1, 1) moves A's yield to (2 + 0.01 m) / 2.01 > 0.999, so every A prompt's p(1 - p) draws
    # ~0.001 against B's ~0.25 (B stays at 1/2: every B pair is one of two): after one A group
    # the policy takes B until B's 3 prompts x 4 groups are spent, then A's. 24 groups in all,
    # 48 rollouts, the 12 B groups informative.
    seen_a_first = 0
    for seed in range(12):
        arm = arms.posterior_arm(HAND, g=2, batch=1, seed=seed, steps=100, cfg=SHARP)
        order = [p[0] for p, _ in arm.report["trained_groups"]]
        last_b = max(i for i, c in enumerate(order) if c == "b")
        assert order[:last_b].count("a") <= 1, (seed, order)
        assert (arm.rollouts, arm.informative_groups, arm.report["steps"]) == (48, 12, 24)
        assert arm.per_informative == 4.0 and arm.report["informative_share"] == 0.5
        seen_a_first += order[0] == "a"
    assert 0 < seen_a_first < 12  # the first pick is a tie the seed breaks either way


def test_a_budget_smaller_than_the_pool_keeps_to_cell_b() -> None:
    # 8 steps: at most one A group, so at least 7 of the 8 groups trained are informative
    for seed in range(6):
        arm = arms.posterior_arm(HAND, g=2, batch=1, seed=seed, steps=8, cfg=SHARP)
        a_groups = sum(p.startswith("a") for p, _ in arm.report["trained_groups"])
        assert a_groups <= 1 and arm.informative_groups == 8 - a_groups
        assert arm.rollouts == 16


def random_pool(seed: int = 0, prompts: int = 40) -> pl.DataFrame:
    rng = random.Random(seed)
    rates = {c: rng.random() for c in "WXYZ"}
    return frame(
        {
            f"p{i:02d}": (c, "".join(str(int(rng.random() < rates[c])) for _ in range(8)))
            for i in range(prompts)
            for c in ["WXYZ"[i % 4]]
        }
    )


def test_no_rollout_decides_only_and_no_group_is_read_twice() -> None:
    pool = random_pool()
    arm = arms.posterior_arm(pool, g=2, batch=4, seed=3, steps=6)
    read = [tuple(x) for x in arm.report["trained_groups"]]
    assert len(read) == len(set(read)) == 24 == arm.report["groups_trained"]
    assert arm.rollouts == 2 * len(read) and arm.report["rollouts_deciding"] == 0
    # each trained group is the prompt's next stored pair, in order of its visits
    visits: dict[str, int] = {}
    for pid, visit in read:
        assert visit == visits.get(pid, 0)
        visits[pid] = visit + 1
    expected = 0
    for pid, visit in read:
        rewards = pool.filter(
            (pl.col("problem_id") == pid)
            & pl.col("sample_idx").is_between(2 * visit, 2 * visit + 1)
        )["reward"]
        expected += rewards.n_unique() > 1
    assert arm.informative_groups == expected


def flip(pool: pl.DataFrame, groups: set[tuple[str, int]], g: int) -> pl.DataFrame:
    """`pool` with every answer of the given (prompt, visit) groups turned around."""
    hit = pl.struct("problem_id", (pl.col("sample_idx") // g).alias("v")).is_in(
        [{"problem_id": p, "v": v} for p, v in groups]
    )
    return pool.with_columns(
        pl.when(hit).then(1.0 - pl.col("reward")).otherwise(pl.col("reward")).alias("reward"),
        pl.when(hit).then(~pl.col("correct")).otherwise(pl.col("correct")).alias("correct"),
    )


def test_samples_are_revealed_only_once_picked() -> None:
    pool = random_pool(1)
    g, batch = 2, 4
    arm = arms.posterior_arm(pool, g=g, batch=batch, seed=5, steps=5)
    read = [tuple(x) for x in arm.report["trained_groups"]]
    every = {(p, v) for p in pool["problem_id"].unique() for v in range(8 // g)}
    # the groups it never read can say anything: nothing it did changes
    other = arms.posterior_arm(flip(pool, every - set(read), g), g=g, batch=batch, seed=5, steps=5)
    assert other.report["trained_groups"] == arm.report["trained_groups"]
    assert (other.rollouts, other.informative_groups) == (arm.rollouts, arm.informative_groups)
    # a group read at step k changes nothing before step k + 1
    k = 2
    changed = arms.posterior_arm(
        flip(pool, {read[k * batch]}, g), g=g, batch=batch, seed=5, steps=5
    )
    prefix = (k + 1) * batch
    assert changed.report["trained_groups"][:prefix] == arm.report["trained_groups"][:prefix]


def test_deterministic_under_a_seed() -> None:
    pool = random_pool(2)
    runs = [arms.posterior_arm(pool, g=2, batch=4, seed=s, steps=4) for s in (7, 7, 8, 9, 10)]
    assert runs[0].report == runs[1].report
    assert len({str(r.report["trained_groups"]) for r in runs}) >= 3


def test_a_prompt_is_picked_no_more_often_than_the_shallowest_prompt_allows() -> None:
    # "deep" holds 8 samples, every other prompt 2: with g = 2 each prompt has one group, so
    # holding more samples (on a ledger: being kept by the screen) earns no extra pick
    pool = frame({"deep": ("C", "10101010")} | {f"q{i}": ("C", "10") for i in range(5)})
    arm = arms.posterior_arm(pool, g=2, batch=2, seed=0, steps=10)
    reads = [p for p, _ in arm.report["trained_groups"]]
    assert reads.count("deep") <= 1 and arm.report["visits_per_prompt"] == 1
    assert arm.report["steps"] == 3  # 6 groups in all, 2 a step


def test_refusals_name_what_is_missing() -> None:
    with pytest.raises(bp.NotEnoughSamples, match=r"needs 16 samples of 6 prompts"):
        arms.posterior_arm(HAND, g=16, batch=1, seed=0)
    with pytest.raises(bp.NotEnoughSamples, match="a batch of 7 prompts; the pool holds 6"):
        arms.posterior_arm(HAND, g=2, batch=7, seed=0)


def test_the_table_has_a_posterior_row() -> None:
    spec = bt.Spec.parse("posterior:g=2,batch=1,steps=8,decay=1,strength=1000,cell_strength=0.01")
    label, arm = bt.run_policy(HAND, spec, CurateConfig())
    assert label == "posterior g=2 batch=1 steps=8" and arm.rollouts == 16
    table = bt.backtest(HAND, [spec], CurateConfig(uncertain_hard_share=0.0))
    (row,) = table.to_dicts()
    assert row["rollouts"] == 16 and row["informative_groups"] >= 7
    assert "posterior" in bt.POLICIES  # `sieve backtest` runs it by default


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("posterior:size=1", "policy posterior has no parameter 'size'; valid: g, batch, steps"),
        ("posterior:g=x", "policy posterior: g='x' is not a number"),
        ("posterior:steps=-1", "policy posterior: g and batch must be positive, steps >= 0"),
        ("posterior:batch=0", "policy posterior: g and batch must be positive, steps >= 0"),
        ("posterior:decay=2", "policy posterior: need 0 < decay ≤ 1"),
        ("posterior:candidates=0", "policy posterior: candidates must be an integer"),
    ],
)
def test_bad_posterior_parameters_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(SieveError, match=re.escape(message)):
        bt.run_policy(HAND, bt.Spec.parse(spec), CurateConfig())


def test_a_gap_in_sample_idx_reads_the_next_stored_samples() -> None:
    # q's samples are numbered 0, 1, 5, 9: its second group is samples 5 and 9
    gap = frame({"q": ("C", "1001"), "r": ("C", "1010")}).with_columns(
        pl.when(pl.col("problem_id") == "q")
        .then(pl.col("sample_idx").replace({2: 5, 3: 9}))
        .otherwise(pl.col("sample_idx"))
        .alias("sample_idx")
    )
    arm = arms.posterior_arm(gap, g=2, batch=2, seed=0, steps=2)
    assert arm.rollouts == 8 and sorted(map(tuple, arm.report["trained_groups"])) == [
        ("q", 0),
        ("q", 1),
        ("r", 0),
        ("r", 1),
    ]
    assert arm.informative_groups == 4  # q: (1, 0) then (0, 1); r: (1, 0) twice
