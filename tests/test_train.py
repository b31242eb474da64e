"""`pipeline.train`: a curriculum from the ledger trained with grpo_core, recorded in the ledger."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl
import pytest

from grpo_core.trainer import Item, Sample, Scores
from pipeline.errors import SieveError
from pipeline.store import Ledger
from pipeline.train import (
    CurriculumBatches,
    TrainSettings,
    latest_model,
    load_settings,
    train,
)

METRICS = {
    "reward_mean", "reward_std", "pass_rate", "zero_var_share", "adv_std", "kl", "beta",
    "clip_low_frac", "clip_high_frac", "entropy", "completion_len", "truncated_share",
    "grad_norm", "skipped_steps", "loss", "time_sample", "time_score", "time_update", "stage",
}  # fmt: skip
SMALL = TrainSettings(
    grpo={"total_steps": 4, "checkpoint_every": 2, "max_new_tokens": 4, "lr": 1e-3},
    rollouts_per_step=16,
    eval_per_level=1,
    eval_samples=2,
    eval_families=["arith"],
)


def even_length(items: Sequence[Item], samples: Sequence[Sample]) -> Scores:
    """A reward a random-init model can learn: completions of even length."""
    ok = [len(s.text) % 2 == 0 for s in samples]
    return Scores([float(x) for x in ok], list(ok))


@pytest.fixture
def setup(
    tmp_path: Path, tiny_model_dir: Path, write_curriculum: Callable[[Ledger], object]
) -> tuple[Path, Path]:
    home = tmp_path / "home"
    model = home / "models" / "tiny"
    shutil.copytree(tiny_model_dir, model)
    with Ledger.open(home) as ledger:
        write_curriculum(ledger)
    return home, model


def test_train_records_metrics_checkpoints_and_evals(setup: tuple[Path, Path]) -> None:
    home, model = setup
    with Ledger.open(home) as ledger:
        result = train(ledger, "cur-test", model, SMALL, home, reward=even_length)
        assert result.steps == 4 and result.rollouts >= 4 * 16
        status = ledger.run(
            "SELECT status FROM train_runs WHERE train_id = $t", {"t": result.train_id}
        )
        assert status == [("finished",)]
        metrics = ledger.sql("SELECT step, name FROM train_metrics")
        for step in range(4):
            names = set(metrics.filter(pl.col("step") == step)["name"])
            assert names >= METRICS, METRICS - names
        assert {"eval_greedy", "eval_sampled"} <= set(metrics["name"])
        ckpts = ledger.sql("SELECT step, path, model_revision FROM checkpoints ORDER BY step")
        assert ckpts["step"].to_list() == [2, 4]
        final = Path(ckpts["path"][-1])
        assert final == result.final_checkpoint.resolve()
        assert ckpts["model_revision"][-1] == result.final_revision != result.base_revision
        assert latest_model(ledger, home) == final  # the next curation samples from it
        evals = ledger.sql("SELECT DISTINCT model_revision FROM sampling_runs WHERE purpose='eval'")
        assert set(evals["model_revision"]) == {result.base_revision, result.final_revision}
    assert list((home / "tensorboard" / result.train_id).glob("events.out.tfevents.*"))
    assert result.before.height == result.after.height >= 5  # arith levels with held-out items
    assert set(result.after["family"]) == {"arith"}


def test_stop_then_resume_matches_the_straight_run(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    home, model = setup
    other = tmp_path / "other"
    shutil.copytree(home, other)
    tiny = other / "models" / "tiny"
    with Ledger.open(home) as ledger:
        straight = train(ledger, "cur-test", model, SMALL, home, reward=even_length)
    with Ledger.open(other) as ledger:
        first = train(ledger, "cur-test", tiny, SMALL, other, max_steps=2, reward=even_length)
        assert first.steps == 2
        with pytest.raises(SieveError, match="pass --resume"):
            train(ledger, "cur-test", tiny, SMALL, other, reward=even_length)
        second = train(ledger, "cur-test", tiny, SMALL, other, resume=True, reward=even_length)
        assert second.resumed_from == 2 and second.steps == 4
        status = ledger.run("SELECT status FROM train_runs")
        assert status == [("finished",)]
    losses = [h["loss"] for h in straight.history]
    assert losses == [h["loss"] for h in first.history + second.history]
    assert straight.final_revision == second.final_revision


def test_batches_follow_stages_fill_the_budget_and_are_reproducible() -> None:
    frame = pl.DataFrame(
        {
            "problem_id": [f"p{i}" for i in range(10)],
            "stage": [1] * 6 + [2] * 4,
            "group_size": [4] * 6 + [16] * 4,
            "weight": [1.0] * 10,
            "answer": ["1"] * 10,
            "verifier": ["math"] * 10,
        }
    )
    prompts = [f"q{i}=" for i in range(10)]
    batches = CurriculumBatches(frame, prompts, rollouts_per_step=16, total_steps=10, seed=0)
    # stage costs 24 and 64 rollouts per pass → steps split 3 / 7
    assert [batches.stage_of(s) for s in range(10)] == [1] * 3 + [2] * 7
    for step in range(10):
        items = batches(step)
        assert sum(it.group_size for it in items) >= 16
        assert len({it.key for it in items}) == len(items)
        assert items == batches(step)
    assert {it.key for it in batches(0)} <= {f"p{i}" for i in range(6)}
    assert {it.key for it in batches(9)} <= {f"p{i}" for i in range(6, 10)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[grpo]\nlrr = 1e-3\n", "unknown key 'lrr'"),
        ("[grpo]\nlr = 'fast'\n", "grpo.lr must be float"),
        ("[grpo]\ngroup_size = 1\n", "G ≥ 2"),
        ("[grpo]\nclip_eps_low = 0.3\nclip_eps_high = 0.1\n", "clip_eps_high"),
        ("rollouts_per_step = 1\n", "rollouts_per_step"),
        ("eval_evry = 3\n", "eval_evry"),
        ("[grpo]\nreference = 'none'\n", 'reference="none"'),
    ],
)
def test_bad_settings_give_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "train.toml"
    path.write_text(text)
    with pytest.raises(SieveError, match=message) as err:
        load_settings(path)
    assert "\n" not in str(err.value)


def test_missing_or_empty_curriculum(setup: tuple[Path, Path]) -> None:
    home, model = setup
    with Ledger.open(home) as ledger, pytest.raises(SieveError, match="no items"):
        train(ledger, "cur-nope", model, SMALL, home)


def test_resume_refuses_a_corrupt_checkpoint_and_uses_the_older_one(
    setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    home, model = setup
    with Ledger.open(home) as ledger:
        first = train(ledger, "cur-test", model, SMALL, home, max_steps=3, reward=even_length)
        newest = first.final_checkpoint
        assert newest.name == "step-000003"
        weights = next(newest.glob("*.safetensors"))
        weights.write_bytes(weights.read_bytes()[:-10])
        capsys.readouterr()
        again = train(ledger, "cur-test", model, SMALL, home, resume=True, reward=even_length)
    err = capsys.readouterr().err
    assert "truncated" in err and "trying an older checkpoint" in err
    assert again.resumed_from == 2 and again.steps == 4


def test_trainer_log_probs_equal_the_samplers(tiny_model_dir: Path) -> None:
    """The update scores exactly the tokens that were sampled, under the same distribution."""
    import torch

    from grpo_core.config import GRPOConfig
    from grpo_core.trainer import Trainer
    from pipeline.policy.model import load_policy
    from pipeline.sampling.base import SamplingParams
    from pipeline.sampling.hf import HFSampler
    from pipeline.sampling.training import HFGroupSampler
    from pipeline.train import verifier_reward

    model, tok = load_policy(tiny_model_dir)
    hf = HFSampler(model=model, tokenizer=tok)
    adapter = HFGroupSampler(hf)
    prompts = ["12+7=", "3*x=12; x=", "123+45="]
    groups = hf.sample(prompts, 4, SamplingParams(1.0, max_new_tokens=8, seed=1))
    flat = [c for g in groups for c in g]
    cfg = GRPOConfig(checkpoint_every=0, max_new_tokens=8)
    trainer = Trainer(model, tok, adapter, verifier_reward, lambda s: [], cfg)
    items = [Item(p, "1", 4) for p in prompts for _ in range(4)]
    batch = trainer._tensors(items, [adapter._sample(c) for c in flat], torch.zeros(len(flat)))
    with torch.no_grad():
        logp, _ = trainer._logp(batch)
    for row, c in enumerate(flat):
        assert c.logprob is not None
        assert float(logp[row, : len(c.token_ids)].sum()) == pytest.approx(c.logprob, abs=1e-4)
