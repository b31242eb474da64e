"""`process_signal`: a prompt whose outcomes all agree but whose step verdicts vary is kept
(reason `process_informative`) only when the switch is on; off, curation is outcome-only.

Test: `.venv/bin/pytest tests/selection/test_process_signal.py -q`
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import pytest

from flows.curate import curate
from pipeline.core.errors import SieveError
from pipeline.jobs.curate.curation import Policy
from pipeline.sampling.base import Completion, SamplingParams
from pipeline.sampling.simulated import SimulatedSampler
from pipeline.selection import CurateConfig, build_curriculum, group_stats, screen_survivors
from pipeline.selection.stats import process_stats
from pipeline.store import Ledger
from tests.simulated import RATES, reachable_problems, simulated_policy


def frame(groups: dict[str, list[tuple[bool, list[bool] | None]]]) -> pl.DataFrame:
    """Rollouts (problem_id, reward, correct, step_correct) from {pid: [(correct, steps)]}."""
    rows = [
        {"problem_id": pid, "reward": float(ok), "correct": ok, "step_correct": steps}
        for pid, group in groups.items()
        for ok, steps in group
    ]
    schema = {"problem_id": pl.String, "reward": pl.Float64, "correct": pl.Boolean}
    return pl.DataFrame(rows, schema={**schema, "step_correct": pl.List(pl.Boolean)})


GROUPS = {
    "a_positions": [(False, [True, False]), (False, [False, True])],  # same share, positions vary
    "b_shares": [(False, [True, False]), (False, [False, False]), (False, [False, False])],
    "c_same": [(False, [True, False])] * 3,
    "d_none": [(True, None), (True, None)],
    "e_one": [(True, [True]), (True, None)],  # a single rollout with steps: nothing to compare
}


def test_process_stats_by_hand() -> None:
    got = process_stats(frame(GROUPS))
    assert got.select("problem_id", "n_step_rollouts", "step_index_varies").rows() == [
        ("a_positions", 2, True),
        ("b_shares", 3, True),
        ("c_same", 3, False),
        ("e_one", 1, False),
    ]
    assert got["step_accuracy"].to_list() == pytest.approx([0.5, 1 / 6, 0.5, 1.0])
    assert got["process_informative"].to_list() == [True, True, False, False]
    stats = group_stats(frame(GROUPS))
    assert dict(stats.select("problem_id", "process_informative").rows()) == {
        "a_positions": True,
        "b_shares": True,
        "c_same": False,
        "d_none": False,  # no fragments at all
        "e_one": False,
    }
    assert "process_informative" not in group_stats(frame(GROUPS).drop("step_correct")).columns


def test_screen_and_curriculum_keep_them_only_when_on() -> None:
    stats = group_stats(frame(GROUPS))
    off = CurateConfig(uncertain_hard_share=0.0)
    on = off.model_copy(update={"process_signal": True})
    screened_off = screen_survivors(stats, off)
    assert screened_off.refine.height == 0
    assert dict(screened_off.rejections.rows()) == {
        "a_positions": "all_wrong",
        "b_shares": "all_wrong",
        "c_same": "all_wrong",
    }
    screened_on = screen_survivors(stats, on)
    assert dict(screened_on.refine.select("problem_id", "reason").rows()) == {
        "a_positions": "process_informative",
        "b_shares": "process_informative",
    }
    assert dict(screened_on.rejections.rows()) == {"c_same": "all_wrong"}
    assert sorted(screened_on.all_correct["problem_id"]) == ["d_none", "e_one"]
    pooled = stats.filter(pl.col("problem_id").is_in(["a_positions", "b_shares", "c_same"]))
    items, rejected = build_curriculum(pooled, screened_on.all_correct.head(0), on)
    assert items.select("problem_id", "stage", "group_size", "weight", "reason").rows() == [
        ("a_positions", 1, on.stage1_g, 1.0, "process_informative"),
        ("b_shares", 1, on.stage1_g, 1.0, "process_informative"),
    ]
    assert dict(rejected.rows()) == {"c_same": "all_wrong"}
    items_off, rejected_off = build_curriculum(pooled, screened_on.all_correct.head(0), off)
    assert items_off.height == 0 and set(rejected_off["reason"]) == {"all_wrong"}


def test_on_without_step_columns_says_so() -> None:
    stats = group_stats(frame(GROUPS).drop("step_correct"))
    with pytest.raises(SieveError, match="process_informative"):
        screen_survivors(stats, CurateConfig(process_signal=True))
    assert screen_survivors(stats, CurateConfig()).rejections.height > 0  # off: not needed


class StepSampler(SimulatedSampler):
    """The simulated policy, with two kinds of wrong answer: the gold answer plus a digit
    (prefix fragments right until the extra one) or a digit plus the gold answer (all wrong),
    alternating by sample index — so an unsolved group still has varying fragments."""

    def sample(
        self, prompts: Sequence[str], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        out = []
        for prompt, group in zip(prompts, super().sample(prompts, n, params), strict=True):
            gold = self.answers[prompt]
            lead = "2" if gold.startswith("1") else "1"
            texts = [
                c.text if c.text == gold else (gold + "7" if i % 2 == 0 else lead + gold)
                for i, c in enumerate(group)
            ]
            out.append([Completion(t, tuple(range(len(t))), "stop") for t in texts])
        return out


def curated(cfg: CurateConfig) -> tuple[pl.DataFrame, pl.DataFrame, Ledger]:
    base = simulated_policy(reachable_problems(cfg), RATES)
    sampler = base.sampler
    assert isinstance(sampler, SimulatedSampler)
    policy = Policy(StepSampler(sampler.answers, sampler.pass_rate), "rev-steps", base.render)
    ledger = Ledger.memory()
    result = curate(ledger, policy, cfg)
    return result.items, result.rejections, ledger


def test_curation_on_a_real_ledger() -> None:
    off = CurateConfig(
        n_candidates=60, mix={"arith": "1,6"}, seed=3, chunk_size=30, uncertain_hard_share=0.0
    )
    on = off.model_copy(update={"process_signal": True})
    items_off, rejected_off, led_off = curated(off)
    items_on, rejected_on, led_on = curated(on)
    level = dict(led_on.sql("SELECT problem_id, level FROM problems").rows())
    # off: the never-solved level 6 is rejected all_wrong, nothing is process_informative
    assert "process_informative" not in set(items_off["reason"])
    never = {pid for pid, r in rejected_off.rows() if r == "all_wrong"}
    assert never and {level[p] for p in never} == {6}
    # on: those same prompts are kept, stage 1, under their own reason
    kept = items_on.filter(pl.col("reason") == "process_informative")
    assert set(kept["problem_id"]) == never
    assert set(kept["stage"]) == {1} and set(kept["group_size"]) == {on.stage1_g}
    assert "all_wrong" not in set(rejected_on["reason"])
    # the always-solved level 1 has identical fragments: still all_correct / replay, never kept
    solved = {p for p in level if level[p] == 1}
    assert not solved & set(kept["problem_id"])
    stored = led_on.sql(
        "SELECT i.reason, count(*) AS n FROM curriculum_items AS i GROUP BY 1 ORDER BY 1"
    )
    assert ("process_informative", len(never)) in stored.rows()
    # the refine run sampled them, and the ledger holds their step verdicts
    steps = led_on.sql(
        "SELECT count(*) FROM rollout_steps AS s JOIN sampling_runs AS r USING (run_id) "
        "WHERE r.purpose = 'refine' AND list_contains($ids, s.problem_id)",
        {"ids": sorted(never)},
    )
    assert steps.item() > 0
    for led in (led_off, led_on):
        led.close()


def test_the_switch_off_keeps_the_curation_keys_of_before() -> None:
    # Run ids (and so chunk seeds) derive from this key: configs without the switch keep the
    # keys they had before `process_signal` existed (values from the commit before it).
    from pipeline.jobs.curate.curation import curation_key
    from pipeline.selection import TINY_CURATE, CurateConfig

    assert curation_key(CurateConfig(), "rev-a") == "638be73c7bbc"
    assert curation_key(CurateConfig(**TINY_CURATE), "rev-a") == "08600da5b49a"
    assert curation_key(CurateConfig(process_signal=True), "rev-a") != "638be73c7bbc"
