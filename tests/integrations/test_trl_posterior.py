"""Sieve's posterior selection inside TRL: PosteriorSampler keeps RepeatSampler's geometry and
refuses to pick from evidence that has not arrived; a real GRPOTrainer run (3 steps, the tiny
policy, CPU) writes every group it samples to the ledger, picks each round from the groups
before it, and a second run from the trained weights reads the first run's groups."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from grpo_core.types import TrainerError
from pipeline.integrations.ledger_run import LedgerRun
from pipeline.policy.model import folder_revision
from pipeline.problems import generate
from pipeline.scoring import Check, register_verifier
from pipeline.selection.stats import learnability
from pipeline.store import Ledger

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from pipeline.integrations.trl_posterior import PosteriorSampler, SieveGRPOTrainer  # noqa: E402


@register_verifier("test_trl_even_answers")
def _even(completion: str, answer: str, timeout: float) -> Check:
    """Never right on an odd gold answer (a flat group); on an even one, right when the
    completion has an even length (groups mostly mixed, so the policy gets a gradient)."""
    right = int(answer) % 2 == 0 and len(completion) % 2 == 0
    return Check(True, right, {"correctness": float(right)})


@pytest.fixture
def problems(ledger: Ledger) -> pl.DataFrame:
    frame = generate("arith", [2, 3], 12, seed=0, heldout_pct=0)
    ledger.write("problems", frame)
    return frame


def test_the_sampler_repeats_rounds_like_trls_and_waits_for_its_evidence(
    ledger: Ledger, problems: pl.DataFrame
) -> None:
    run = LedgerRun(ledger, problems["problem_id"].to_list(), "rev-base", "run-a")
    sampler = PosteriorSampler(run, rows=12, num_generations=3, batch_size=2, repeat_count=2)
    order = list(sampler)
    assert len(order) == len(sampler) == 6 * 2 * 3 * 2  # rounds x prompts x G x repeats
    first = order[:12]
    assert first[:6] == first[6:] and first[:3] == [first[0]] * 3  # G in a row, round repeated
    assert order == list(PosteriorSampler(run, 12, 3, 2, repeat_count=2))  # same seed, same picks
    strict = PosteriorSampler(run, 12, 3, 2, repeat_count=1, strict=True)
    stream = iter(strict)
    assert len([next(stream) for _ in range(12)]) == 12  # rounds 0 and 1 need no groups
    with pytest.raises(TrainerError, match="dataloader_num_workers=0"):
        next(stream)  # round 2 reads round 0's groups, never judged here


def grpo_args(out: Path, steps: int) -> object:
    return trl.GRPOConfig(
        output_dir=str(out), use_cpu=True, report_to=[], max_steps=steps,
        per_device_train_batch_size=8, num_generations=4, max_completion_length=8,
        logging_steps=1, save_strategy="no", gradient_checkpointing=False, seed=0,
    )  # fmt: skip


def test_a_grpo_run_records_its_groups_and_picks_from_them(
    tmp_path: Path, tiny_model_dir: Path, ledger: Ledger, problems: pl.DataFrame
) -> None:
    """~5 s on 2 cores: 3 steps of 2 prompts x 4 completions, then one step of a second run."""
    from transformers import AutoTokenizer

    from pipeline.integrations.trl import reward_function

    data = datasets.Dataset.from_dict(
        {"prompt": [f"{q}=" for q in problems["question"]], "answer": problems["answer"],
         "problem_id": problems["problem_id"]}
    )  # fmt: skip
    reward = reward_function("test_trl_even_answers")
    trainer = SieveGRPOTrainer(ledger, model=str(tiny_model_dir), train_dataset=data,
                               args=grpo_args(tmp_path / "a", 3), reward=reward)  # fmt: skip
    run = trainer.sieve
    assert run.base_revision == folder_revision(tiny_model_dir)
    trainer.train()
    trainer.save_model()

    groups = ledger.sql(
        "SELECT step, problem_id, k, n, policy FROM train_group_stats WHERE train_id = $t "
        "ORDER BY step",
        {"t": run.train_id},
    )
    assert groups.height == 6 and groups["n"].to_list() == [4] * 6  # every group, whole
    assert groups["step"].to_list() == [0, 0, 1, 1, 2, 2]
    assert ledger.run("SELECT status FROM train_runs WHERE train_id = $t", {"t": run.train_id}) \
        == [("finished",)]  # fmt: skip
    # each round was picked from the groups of the rounds two before it (accelerate's loader
    # fetches one batch ahead): re-picking from the ledger gives what TRL trained
    keys = problems["problem_id"].to_list()
    for step in range(3):
        trained = sorted(groups.filter(pl.col("step") == step)["problem_id"].to_list())
        assert sorted(keys[i] for i in run.pick(step, 2, upto=step - 2)) == trained
    # and those groups moved the posterior: an all-wrong group leaves less to learn
    seen = groups.filter(pl.col("k") == 0)["problem_id"][0]
    alpha, beta = run.model(run.evidence(2), [seen], [run.cell_of[seen]], 3)
    alpha0, beta0 = run.model(run.evidence(-1), [seen], [run.cell_of[seen]], 3)
    assert learnability(alpha, beta)[0] < learnability(alpha0, beta0)[0]

    # a second run from the trained weights reads the first run's groups from the ledger
    final = ledger.run("SELECT step, model_revision FROM checkpoints WHERE train_id = $t",
                       {"t": run.train_id})  # fmt: skip
    assert final == [(3, folder_revision(tmp_path / "a"))]  # the weights save_model wrote
    tok = AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)
    second = SieveGRPOTrainer(ledger, model=trainer.model, processing_class=tok,
                              args=grpo_args(tmp_path / "b", 1), train_dataset=data,
                              reward=reward)  # fmt: skip
    assert second.sieve.base_revision == final[0][1] and second.sieve.clock == 3
    assert sorted(r[0] for r in second.sieve.prior) == sorted(groups["problem_id"].to_list())
    second.train()
    (rows,) = ledger.run("SELECT count(*) FROM train_rollouts WHERE train_id = $t",
                         {"t": second.sieve.train_id})[0]  # fmt: skip
    assert rows == 8 and second.sieve.train_id != run.train_id
