"""One informative rule: the trainer, the screen, the curriculum and the ledger's views and query
classify the same groups alike, also where the reward is not the verdict (format weight, partial
credit, jitter), and correctness only labels the uninformative ones.

Test: `.venv/bin/pytest tests/grpo_core/test_zero_variance.py -q`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import polars as pl
import pytest
import torch

from grpo_core.advantages import ZERO_VAR_TOL, is_uninformative
from grpo_core.config import GRPOConfig
from grpo_core.rewards import Component
from grpo_core.step_advantages import step_advantages
from grpo_core.types import Sample
from pipeline.selection import CurateConfig, build_curriculum, group_stats, screen_survivors
from pipeline.store import Ledger

# problem -> [(reward, correct)]; None: the verifier failed on that sample
GROUPS: dict[str, list[tuple[float | None, bool | None]]] = {
    "constant": [(0.7, False), (0.7 + 1e-9, False), (0.7 - 1e-9, False), (0.7, False)],  # jitter
    "all_right": [(1.0, True)] * 4,
    "all_wrong": [(0.0, False)] * 4,
    "mixed": [(1.0, True), (0.0, False), (0.0, False), (1.0, True)],
    # issue 29's example, informative under the absolute 1e-6 tolerance; a spread of 1e-5 is
    # rounding-level and std normalisation blew it up to ±1.4 (issue 46 point 6): flat now
    "barely": [(0.5, False), (0.50001, False), (0.5, False), (0.5, False)],
    "barely_enough": [(0.5, False), (0.501, False), (0.5, False), (0.5, False)],  # 1e-3: signal
    "large_scale": [(500.0, False), (500.02, False), (500.0, False), (500.0, False)],  # relative
    "format_spread": [(1.0, True), (0.9, True), (1.0, True), (1.0, True)],  # all right, format
    "partial_credit": [(0.0, False), (0.25, False), (0.75, False), (0.0, False)],  # tests passed
    "flat_verdicts_differ": [(0.5, True), (0.5, False), (0.5, True), (0.5, False)],
    "at_tol": [(0.0, False), (ZERO_VAR_TOL, False), (0.0, False), (0.0, False)],  # ≤ tol: flat
    "error_mixed": [(1.0, True), (None, None), (0.0, False), (1.0, True)],
    "error_flat": [(1.0, True), (None, None), (1.0, True), (1.0, True)],
}
EXPECTED_INFORMATIVE = {
    "mixed", "barely_enough", "format_spread", "partial_credit", "error_mixed",
}  # fmt: skip
LABELS = {  # the uninformative groups, labelled by their verdicts
    "constant": "all_wrong",
    "all_right": "all_correct",
    "all_wrong": "all_wrong",
    "flat_verdicts_differ": "zero_variance",
    "at_tol": "all_wrong",
    "barely": "all_wrong",
    "large_scale": "all_wrong",
    "error_flat": "all_correct",
}


def rollouts() -> pl.DataFrame:
    rows = [
        {"run_id": "s", "problem_id": pid, "sample_idx": i, "reward": r, "correct": c}
        for pid, group in GROUPS.items()
        for i, (r, c) in enumerate(group)
    ]
    schema = {"run_id": pl.Utf8, "problem_id": pl.Utf8, "sample_idx": pl.Int32}
    return pl.DataFrame(rows, schema={**schema, "reward": pl.Float64, "correct": pl.Boolean})


def trainer_informative() -> dict[str, bool]:
    """Per group, whether the trainer's step gives it advantages (its own scoring path)."""
    cfg = GRPOConfig()
    components = [  # as Trainer.__init__ builds them
        Component("reward", 1.0, 0),
        Component("repetition", cfg.repetition_coef, cfg.repetition_start_step),
    ]
    names = list(GROUPS)
    rewards = [r for pid in names for r, _ in GROUPS[pid]]
    group = torch.tensor([g for g, pid in enumerate(names) for _ in GROUPS[pid]])  # (N,)
    known = torch.tensor([r is not None for r in rewards])  # (N,)
    raw = torch.tensor([math.nan if r is None else float(r) for r in rewards])  # as _update
    flat = [Sample((5, 6, 7, i % 3), "", False) for i in range(len(rewards))]
    _, informative = step_advantages(cfg, components, 0, flat, group, known, raw)
    return {pid: bool(informative[group == g].any()) for g, pid in enumerate(names)}


def ledger_with(frame: pl.DataFrame, ledger: Ledger) -> Ledger:
    run = {
        "run_id": ["s"], "purpose": ["screen"], "model": ["m"], "model_revision": ["rev"],
        "backend": ["hf"], "group_size": [4], "temperature": [1.0],
        "started_at": [datetime(2026, 1, 1, tzinfo=UTC)], "status": ["finished"],
    }  # fmt: skip
    ledger.write_batch({"sampling_runs": pl.DataFrame(run), "rollouts": frame})
    return ledger


def test_the_trainer_the_selection_and_the_ledger_agree(ledger: Ledger) -> None:
    trainer = trainer_informative()
    assert {p for p, inf in trainer.items() if inf} == EXPECTED_INFORMATIVE

    stats = group_stats(rollouts().drop("run_id"))
    screened = screen_survivors(stats, CurateConfig(uncertain_hard_share=0.0))
    refine = dict(screened.refine.select("problem_id", "reason").iter_rows())
    assert refine == dict.fromkeys(EXPECTED_INFORMATIVE, "mixed")
    labels = dict(screened.rejections.iter_rows())
    labels |= dict.fromkeys(screened.all_correct["problem_id"], "all_correct")
    assert labels == LABELS

    wide = CurateConfig(band_low=0.0, band_high=1.0)  # every informative group is in the band
    items, rejected = build_curriculum(stats, screened.all_correct.head(0), wide)
    assert set(items["problem_id"]) == EXPECTED_INFORMATIVE
    assert dict(rejected.iter_rows()) == LABELS

    led = ledger_with(rollouts(), ledger)
    for sql in (
        "SELECT problem_id, zero_variance FROM group_stats",
        "SELECT problem_id, zero_variance FROM prompt_stats",
    ):
        flat = dict(led.sql(sql).iter_rows())
        assert {p: not z for p, z in flat.items()} == trainer, sql
    history = led.query("history_prior", exclude=[]).select("problem_id", "zero_variance")
    assert {p: not z for p, z in history.iter_rows()} == trainer
    polars_flat = dict(stats.select("problem_id", "zero_variance").iter_rows())
    assert {p: not z for p, z in polars_flat.items()} == trainer


def test_the_trainer_judges_a_group_on_its_task_reward() -> None:
    """Issue 46 point 6: a repetition penalty or KL-in-reward spreads the combined reward of a
    group whose task rewards all agree; the group stays uninformative (advantage exactly 0), as
    the ledger, which sees the verifier's reward, calls it. A group whose task rewards differ is
    informative either way."""
    group = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])  # (N,)
    raw = torch.tensor([1.0] * 4 + [1.0, 0.0, 1.0, 0.0], dtype=torch.float64)  # (N,)
    known = torch.ones(8, dtype=torch.bool)  # (N,)
    ids = [(5, 5, 5, 5, 5), (5, 6, 7, 8, 9), (5, 6, 5, 6, 5), (7, 8, 9, 7, 8)] * 2
    flat = [Sample(t, "", False) for t in ids]
    repeat = GRPOConfig(repetition_coef=0.5)
    components = [Component("reward", 1.0, 0), Component("repetition", 0.5, 0)]
    kl = torch.tensor([0.1, -0.2, 0.3, 0.0] * 2, dtype=torch.float64)  # β·Σ k1 per sample
    cases = [
        (repeat, components, None),
        (GRPOConfig(kl_in_reward=True), components[:1], kl),
        (GRPOConfig(kl_in_reward=True, estimator="rloo"), components[:1], kl),
    ]
    for cfg, comps, penalty in cases:
        adv, informative = step_advantages(
            cfg, comps, 0, flat, group, known, raw, kl_penalty=penalty
        )
        assert informative.tolist() == [False] * 4 + [True] * 4, cfg
        assert adv[:4].tolist() == [0.0] * 4 and bool(adv[4:].abs().min() > 0), cfg


def test_pooled_runs_are_judged_on_all_their_rewards() -> None:
    """Two screen runs, each constant but at different rewards: the pooled group is informative."""
    frame = pl.concat(
        [
            rollouts().filter(pl.col("problem_id") == "all_right"),
            rollouts()
            .filter(pl.col("problem_id") == "all_wrong")
            .with_columns(pl.lit("all_right").alias("problem_id"), pl.lit("t").alias("run_id")),
        ]
    )
    per_run = group_stats(frame)
    assert per_run["zero_variance"].to_list() == [True, True]
    out = screen_survivors(per_run, CurateConfig())
    assert out.refine.select("problem_id", "reason").rows() == [("all_right", "mixed")]


def test_sql_macros_hold_the_same_tolerance_and_rule(ledger: Ledger) -> None:
    assert ledger.run("SELECT sieve_zero_var_tol()")[0][0] == ZERO_VAR_TOL
    pairs = [(0.7, 0.7), (ZERO_VAR_TOL, 0.0), (2 * ZERO_VAR_TOL, 0.0), (1.0, 0.0), (0.50001, 0.5),
             (500.02, 500.0), (500.1, 500.0), (-500.0, -500.02), (-500.0, -500.1),
             (3.0 + 2e-4, 3.0), (3.0 + 4e-4, 3.0), (None, None)]  # fmt: skip
    for hi, lo in pairs:
        got = ledger.run("SELECT sieve_uninformative($hi, $lo)", {"hi": hi, "lo": lo})[0][0]
        assert got == (None if hi is None else is_uninformative(hi, lo)), (hi, lo)


def test_constant_group_is_uninformative_although_its_std_is_not_zero() -> None:
    rewards = [r for r, _ in GROUPS["constant"] if r is not None]
    mean = sum(rewards) / len(rewards)
    assert any(abs(r - mean) > 0 for r in rewards)  # advantage == 0 would call it informative
    assert is_uninformative(max(rewards), min(rewards))
    assert not is_uninformative(1.0, 0.0)
    assert is_uninformative(ZERO_VAR_TOL, 0.0)  # a spread of exactly tol is included


def test_the_tolerance_is_relative_to_the_reward_scale() -> None:
    """Issue 46 point 6: max − min ≤ tol · max(1, |max|, |min|); spreads of 1e-3 and more are
    informative at any scale below 10 (the trainer clips rewards to ±5)."""
    assert is_uninformative(0.50001, 0.5) and is_uninformative(1000.05, 1000.0)
    assert not is_uninformative(0.501, 0.5) and not is_uninformative(1000.2, 1000.0)
    assert not is_uninformative(-4.999, -5.0) and not is_uninformative(9.99, 9.989)
    assert is_uninformative(-1000.0, -1000.05)


@pytest.mark.parametrize("tol", [0.0, 1e-12, 1e-3])
def test_tolerance_argument(tol: float) -> None:
    assert is_uninformative(0.5, 0.5, tol)
    assert is_uninformative(tol, 0.0, tol)
    assert not is_uninformative(2 * tol + 1e-9, 0.0, tol)
