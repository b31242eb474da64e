"""Training (`flows.train.train`, the training flow's sequence, over `pipeline.jobs.train.trainee`'s
steps and `pipeline.jobs.train.recorder`): a curriculum from the ledger trained with grpo_core,
recorded in the ledger."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from flows.train import TrainParams, resolve, train
from grpo_core.config import GRPOConfig
from grpo_core.trainer import Item, Sample, Scores
from pipeline.core.errors import SieveError
from pipeline.jobs.train.curriculum_batches import CurriculumBatches
from pipeline.jobs.train.lineage import (
    TrainJob,
    curriculum_model,
    latest_model,
    lineage_head,
    nightly_model,
)
from pipeline.jobs.train.settings import (
    RECIPES,
    TINY_RECIPE,
    TrainSettings,
    load_settings,
    recipe_for,
    settings_toml,
)
from pipeline.jobs.train.trainee import train_id_for
from pipeline.policy.model import SIEVE_META, folder_revision
from pipeline.store import Ledger

METRICS = {
    "reward_mean", "reward_std", "pass_rate", "zero_var_share", "adv_std", "kl", "beta",
    "clip_low_frac", "clip_high_frac", "entropy", "completion_len", "truncated_share",
    "grad_norm", "skipped_steps", "loss", "time_sample", "time_score", "time_update", "stage",
}  # fmt: skip
SMALL = TrainSettings(
    grpo={
        "total_steps": 4,
        "checkpoint_every": 2,
        "max_new_tokens": 4,
        "lr": 1e-3,
        "beta_schedule": "fixed",
        "beta": 0.02,
    },  # the tiny values train() merged under every run before recipes were files
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
        # named relative to the home, so a home moved or copied trains on (issue 47)
        assert ckpts["path"][-1] == f"checkpoints/{result.train_id}/step-000004"
        final = home / ckpts["path"][-1]
        assert final.resolve() == result.final_checkpoint.resolve()
        base = ledger.run("SELECT base_model FROM train_runs WHERE train_id = $t",
                          {"t": result.train_id})  # fmt: skip
        assert base == [("models/tiny",)]
        assert ckpts["model_revision"][-1] == result.final_revision != result.base_revision
        assert latest_model(ledger, home) == final  # the next curation samples from it
        assert lineage_head(ledger, result.base_revision) == final  # and the next night
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
    # what the difficulty model picks from (selection = "posterior"): every stage at every
    # step, distinct, reproducible; a batch is the step's rollouts over the most common G
    drawn = batches.candidates_all(0, 10)
    assert sorted(it.key for it in drawn) == sorted(f"p{i}" for i in range(10))
    assert [it.key for it in batches.candidates_all(3, 5)] == [
        it.key for it in batches.candidates_all(3, 5)
    ]
    assert len({it.key for it in batches.candidates_all(3, 5)}) == 5
    assert batches.batch_prompts() == 16 // 4
    big = CurriculumBatches(frame, prompts, rollouts_per_step=1000, total_steps=10, seed=0)
    assert big.batch_prompts() == 1000 // 4  # the recipe's batch, not the curriculum's size


@pytest.mark.parametrize("budget", [8, 24, 25, 100, 333])
@pytest.mark.parametrize("n", [1, 3, 7])
def test_a_stage_smaller_than_the_step_still_fills_the_steps_rollouts(budget: int, n: int) -> None:
    """A curriculum (or stage) with fewer rollouts than a step repeats its order from the top:
    the step gets the rollouts the recipe asked for, each prompt at most once more than any
    other, the same draw on every call."""
    frame = pl.DataFrame(
        {
            "problem_id": [f"p{i}" for i in range(n)],
            "stage": [1] * n,
            "group_size": [4] * n,
            "weight": [1.0 + i for i in range(n)],
            "answer": ["1"] * n,
            "verifier": ["math"] * n,
        }
    )
    batches = CurriculumBatches(frame, [f"q{i}=" for i in range(n)], budget, 5, seed=1)
    for step in range(5):
        items = batches(step)
        total = sum(it.group_size for it in items)
        assert budget <= total < budget + 4
        counts = [sum(it.key == f"p{i}" for it in items) for i in range(n)]
        assert max(counts) - min(counts) <= 1 and items == batches(step)
    assert batches.batch_prompts() == max(1, budget // 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[grpo]\nlrr = 1e-3\n", "unknown key 'lrr'"),
        ("[grpo]\nlr = 'fast'\n", "grpo.lr must be a finite number > 0, got 'fast'"),
        ("[grpo]\ngroup_size = 8\n", "unknown key 'group_size'"),  # G comes from each item
        ("[grpo]\nprompts_per_step = 8\n", "unknown key 'prompts_per_step'"),
        ("[grpo]\nnum_iterations = 0\n", r"grpo.num_iterations must be an integer in \[1, "),
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
    from pipeline.jobs.train.curriculum_batches import verifier_reward
    from pipeline.policy.model import load_policy
    from pipeline.sampling.base import SamplingParams
    from pipeline.sampling.group_sampler import HFGroupSampler
    from pipeline.sampling.hf import HFSampler

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


# ---------------------------------------------------------------------- recipes


def chat_copy(model_dir: Path, dest: Path) -> Path:
    """The tiny policy's folder declared a chat model (what recipe picking reads)."""
    shutil.copytree(model_dir, dest)
    meta = json.loads((dest / SIEVE_META).read_text())
    (dest / SIEVE_META).write_text(json.dumps({**meta, "prompt_format": "chat"}))
    return dest


def test_recipes_are_files_and_nothing_is_merged_under_them() -> None:
    assert load_settings(RECIPES / "tiny_train.toml") == TINY_RECIPE
    # what used to be merged silently under every run is the tiny recipe's, written out
    tiny = TINY_RECIPE.grpo_config()
    assert (tiny.lr, tiny.total_steps, tiny.max_new_tokens) == (2e-4, 30, 16)
    assert (tiny.checkpoint_every, tiny.beta_schedule, tiny.beta) == (20, "fixed", 0.02)
    # a settings table sits on GRPOConfig's documented defaults and nothing else
    assert TrainSettings(grpo={"lr": 1e-5}).grpo_config() == GRPOConfig(lr=1e-5)
    real = load_settings(RECIPES / "real_train.toml")
    cfg = real.grpo_config()
    assert 1e-6 <= cfg.lr <= 1e-5 and cfg.max_new_tokens >= 256
    assert cfg.beta_schedule == "warmup" and cfg.beta_start > cfg.beta
    assert cfg.micro_batch_tokens > 0 and cfg.autocast == "bf16"


def test_the_recipe_follows_the_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    tiny = recipe_for(tiny_model_dir)
    assert tiny.path.name == "tiny_train.toml" and tiny.settings == TINY_RECIPE
    chat = recipe_for(chat_copy(tiny_model_dir, tmp_path / "chat"))
    assert chat.path.name == "real_train.toml"
    assert chat.settings == load_settings(RECIPES / "real_train.toml")
    assert chat.settings.grpo_config().max_new_tokens >= 256  # not the tiny 16
    assert "real_train.toml" in chat.line() and "chat" in chat.line()


def test_print_config_round_trips_through_a_config_file(tmp_path: Path) -> None:
    real = load_settings(RECIPES / "real_train.toml").with_steps(7)
    path = tmp_path / "effective.toml"
    path.write_text(settings_toml(real, ["a header"]))
    again = load_settings(path)
    assert again.grpo_config() == real.grpo_config()
    assert again.model_dump(exclude={"grpo"}) == real.model_dump(exclude={"grpo"})
    assert again.grpo_config().total_steps == 7


def _id_of(text: str) -> str:
    """A run's id from the text it hashes, written here as `train_id_for` documents it."""
    return "train-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def test_train_ids_stay_what_they_were() -> None:
    """A run's id hashes its settings' JSON (`train_id_for`: settings added later count only
    when set); the GRPOConfig the settings keep (issue 49) is no part of it, so runs keep the
    ids they had: computed here from the dump format itself, for settings fresh from their
    file, after their config was handed out, and after copies."""
    tiny = (
        '{"grpo":{"lr":0.0002,"lr_warmup_steps":20,"total_steps":30,"max_new_tokens":16,'
        '"checkpoint_every":20,"beta_schedule":"fixed","beta":0.02},"rollouts_per_step":512,'
        '"eval_every":0,"eval_per_level":10,"eval_samples":4,"eval_families":null,'
        '"tensorboard":true,"selection":"curriculum","carry_over":false}'
    )
    expected = _id_of(f"cur-test|rev0|{tiny}")
    assert expected == "train-6b6b5cbd82ef"  # the tiny recipe's run of cur-test on rev0, as ever
    fresh = load_settings(RECIPES / "tiny_train.toml")
    assert train_id_for("cur-test", "rev0", fresh) == expected
    fresh.grpo_config()
    assert train_id_for("cur-test", "rev0", fresh) == expected
    assert train_id_for("cur-test", "rev0", TINY_RECIPE.model_copy()) == expected
    night = fresh.with_steps(5).model_copy(
        update={"replay_curation": True, "selection": "posterior"}
    )
    text = tiny.replace('"total_steps":30', '"total_steps":5').replace(
        '"tensorboard":true,"selection":"curriculum"',
        '"tensorboard":true,"replay_curation":true,"selection":"posterior"',
    )
    assert train_id_for("cur-test", "rev0", night, "vllm") == _id_of(f"cur-test|rev0|{text}|vllm")
    assert _id_of(f"cur-test|rev0|{text}|vllm") == "train-3b3b98d7e07b"


def test_settings_keep_the_grpo_config_they_were_checked_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 49: the `[grpo]` table's GRPOConfig is built once, when the settings are validated,
    and handed out from then on; `--steps` makes one checked copy; a copy whose table was
    replaced builds its own; none of this makes two settings unequal."""
    built: list[dict[str, object]] = []
    init = GRPOConfig.__init__

    def counted(self: GRPOConfig, **kwargs: object) -> None:
        built.append(kwargs)
        init(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(GRPOConfig, "__init__", counted)
    settings = load_settings(RECIPES / "tiny_train.toml")
    assert len(built) == 1
    cfg = settings.grpo_config()
    assert settings.grpo_config() is cfg and len(built) == 1
    five = settings.with_steps(5)
    assert len(built) == 2 and five.grpo_config().total_steps == 5 and len(built) == 2
    assert five.grpo["total_steps"] == 5 and settings.grpo_config().total_steps == 30
    assert five.grpo_config(seed=3).seed == 3 and five.grpo_config().seed == cfg.seed
    with pytest.raises(ValueError, match=r"^grpo\.total_steps must be an integer"):
        settings.with_steps(2**31)
    other = settings.model_copy(update={"grpo": {**settings.grpo, "lr": 1e-3}})
    assert other.grpo_config().lr == 1e-3 and settings.grpo_config() is cfg
    assert settings == TINY_RECIPE and other != settings
    assert five == load_settings(RECIPES / "tiny_train.toml").with_steps(5)


def test_the_flow_takes_a_resolved_job_as_it_is(
    ledger: Ledger, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`sieve train` hands the flow its job resolved (issue 49): the flow resolves nothing
    again (this ledger has no curriculum at all); a job comes alone."""
    job = TrainJob(curriculum_id="cur-x", model=tiny_model_dir, home=tmp_path, settings=SMALL)
    assert resolve(ledger, TrainParams(job=job)) is job
    with pytest.raises(ValidationError, match="not both"):
        TrainParams(job=job, curriculum="cur-y")
    with pytest.raises(SieveError, match="no curriculum yet"):
        resolve(ledger, TrainParams())


# ---------------------------------------------------------------------- which model


def curriculum_row(ledger: Ledger, cid: str, model: str | None, revision: str | None, at: int):
    ledger.write(
        "curricula",
        pl.DataFrame(
            {
                "curriculum_id": [cid],
                "created_at": [datetime(2026, 1, 1, at, tzinfo=UTC)],
                "model": pl.Series([model], dtype=pl.Utf8),
                "model_revision": pl.Series([revision], dtype=pl.Utf8),
                "config": ["{}"],
                "status": ["finished"],
            }
        ),
    )


def test_the_curriculum_names_its_model(
    ledger: Ledger, tiny_model_dir: Path, tmp_path: Path
) -> None:
    revision = folder_revision(tiny_model_dir)
    curriculum_row(ledger, "cur-a", str(tiny_model_dir), revision, 1)
    folder, why = curriculum_model(ledger, "cur-a", tmp_path)
    assert folder == tiny_model_dir and "curated with" in why and "warning" not in why
    curriculum_row(ledger, "cur-b", str(tiny_model_dir), "another-revision", 2)
    assert "weights changed" in curriculum_model(ledger, "cur-b", tmp_path)[1]
    curriculum_row(ledger, "cur-gone", str(tmp_path / "gone"), revision, 3)
    with pytest.raises(SieveError, match="pass --model FOLDER") as err:
        curriculum_model(ledger, "cur-gone", tmp_path)
    assert "\n" not in str(err.value) and str(tmp_path / "gone") in str(err.value)
    curriculum_row(ledger, "cur-served", "smollm2", "served:smollm2", 4)
    with pytest.raises(SieveError, match="served model 'smollm2'"):
        curriculum_model(ledger, "cur-served", tmp_path)
    # a ledger from before curricula named their model: the tiny policy, and it says so
    curriculum_row(ledger, "cur-old", None, None, 5)
    with pytest.raises(SieveError, match="records no model and there is no tiny policy"):
        curriculum_model(ledger, "cur-old", tmp_path)
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny")
    folder, why = curriculum_model(ledger, "cur-old", tmp_path)
    assert folder == tmp_path / "models" / "tiny" and "records no model" in why


def register(ledger: Ledger, tmp_path: Path, train_id: str, base: str, ckpts, status="finished"):
    """A train run from `base` with checkpoints [(step, revision, hour)], folders on disk."""
    ledger.write(
        "train_runs",
        pl.DataFrame(
            {
                "train_id": [train_id], "curriculum_id": ["c"], "base_model": ["m"],
                "base_revision": [base], "config": ["{}"], "started_at": [datetime.now(UTC)],
                "finished_at": [datetime.now(UTC)], "status": [status],
            }
        ),
    )  # fmt: skip
    paths = {}
    for step, revision, hour in ckpts:
        path = tmp_path / train_id / f"step-{step}"
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
        paths[revision] = path
        row = {
            "train_id": [train_id], "step": [step], "path": [str(path)],
            "model_revision": [revision], "metrics": ["{}"],
            "created_at": [datetime(2026, 1, 2, hour, tzinfo=UTC)],
        }  # fmt: skip
        ledger.write("checkpoints", pl.DataFrame(row))
    return paths


def test_a_lineage_is_followed_to_its_newest_checkpoint(ledger: Ledger, tmp_path: Path) -> None:
    night1 = register(ledger, tmp_path, "t1", "R0", [(2, "R1a", 1), (4, "R1", 2)])
    night2 = register(ledger, tmp_path, "t2", "R1", [(4, "R2", 3)])
    crashed = register(ledger, tmp_path, "t3", "R2", [(2, "R3", 4)], status="running")
    other = register(ledger, tmp_path, "t9", "Q0", [(4, "Q1", 9)])  # newest, another model
    assert lineage_head(ledger, "R0") == night2["R2"]  # two generations down
    assert lineage_head(ledger, "R1") == night2["R2"]
    assert lineage_head(ledger, "R2") is None  # only an unfinished run trained from it
    assert lineage_head(ledger, "Q0") == other["Q1"]
    assert lineage_head(ledger, "nobody") is None
    shutil.rmtree(night1["R1a"])  # an older step of a run (a run keeps its last K): no matter
    assert lineage_head(ledger, "R0") == night2["R2"]
    # no model given: the lineage of the newest curriculum's model
    curriculum_row(ledger, "cur-1", str(tmp_path / "base"), "R0", 1)
    folder, why = nightly_model(ledger, None, tmp_path)
    assert folder == night2["R2"] and "cur-1" in why
    # the newest checkpoint gone: one line naming it, not a night on an older one (issue 47)
    shutil.rmtree(night2["R2"])
    for find in (lambda: lineage_head(ledger, "R0"), lambda: nightly_model(ledger, None, tmp_path)):
        with pytest.raises(SieveError) as err:
            find()
        assert str(err.value) == (
            f"the newest checkpoint of this lineage, {night2['R2']} (training t2, step 4), is "
            "missing: restore it (was the home moved or copied without it?), or start from "
            "another model with --model"
        )
    curriculum_row(ledger, "cur-2", str(night2["R2"]), "R2", 2)  # curated with it, untrained
    with pytest.raises(SieveError, match=r"curated with checkpoint .* \(training t2, step 4\)"):
        nightly_model(ledger, None, tmp_path)
    assert crashed["R3"].exists()
    # a fresh ledger: the tiny policy
    empty = Ledger.memory()
    try:
        assert nightly_model(empty, None, tmp_path)[0] == tmp_path / "models" / "tiny"
    finally:
        empty.close()


def test_held_out_eval_samples_the_weights_being_trained(tiny_model_dir: Path) -> None:
    from pipeline.jobs.train.trainee import eval_sampler
    from pipeline.policy.model import load_policy
    from pipeline.sampling.hf import HFSampler

    class Engine:  # a synced in-process engine (vllm) or a server (openai)
        def sample(self, *args: object) -> list:
            return []

    class Rollouts:
        sampler = Engine()

    model, tok = load_policy(tiny_model_dir)
    assert eval_sampler(Rollouts(), "vllm", model, tok, "m") is Rollouts.sampler
    served = eval_sampler(Rollouts(), "openai", model, tok, "m")  # the server's weights are stale
    assert isinstance(served, HFSampler) and served.model is model


def store_flat_screen(ledger: Ledger, model: Path) -> None:
    """A screen run of 4 samples per curriculum item of cur-test, sampled (as replay requires)
    by the weights training starts from; every group flat (reward 0)."""
    from pipeline.store.ids import curation_runs

    screen, _ = curation_runs("cur-test")
    ids = ledger.sql("SELECT problem_id FROM curriculum_items")["problem_id"].to_list()
    ledger.run(  # sampled by the weights training starts from, as replay requires
        "INSERT INTO sampling_runs (run_id, purpose, model, model_revision, backend, "
        "group_size, temperature, top_p, max_new_tokens, started_at, status) VALUES "
        "($r, 'screen', 'tiny', $rev, 'hf', 4, 1.0, 1.0, 4, now(), 'finished')",
        {"r": screen, "rev": folder_revision(model)},
    )
    # even lengths: the replayed groups are flat under even_length too, so streaks grow
    rows = [(pid, j, "12" if j % 2 else "34") for pid in ids for j in range(4)]
    frame = pl.DataFrame(
        {
            "run_id": [screen] * len(rows),
            "problem_id": [r[0] for r in rows],
            "sample_idx": [r[1] for r in rows],
            "completion": [r[2] for r in rows],
            "n_tokens": [len(r[2]) for r in rows],
            "finish_reason": ["stop"] * len(rows),
            "reward": [0.0] * len(rows),  # every stored group flat: a streak of one
            "correct": [False] * len(rows),
        }
    )
    ledger.write("rollouts", frame)


def test_sieve_train_replays_curation_samples_and_skips_flat_prompts(
    setup: tuple[Path, Path],
) -> None:
    """Issue 30 points 2-3 through `sieve train`'s settings: with replay_curation the first
    step trains on the curriculum's stored screen samples (replayed_rollouts > 0, counted apart
    from fresh rollouts); with skip_zero_variance as well, prompts whose ledger history is a
    streak of flat groups are skipped at some step (skipped_zero_var > 0)."""
    home, model = setup
    with Ledger.open(home) as ledger:
        store_flat_screen(ledger, model)
        for extra, name in (({}, "replay"), ({"skip_zero_variance": True}, "replay+skip")):
            settings = SMALL.model_copy(update={"replay_curation": True, **extra})
            settings = settings.with_steps(6)
            result = train(ledger, "cur-test", model, settings, home / name, reward=even_length)
            metrics = ledger.sql(
                "SELECT step, name, value FROM train_metrics WHERE train_id = $t",
                {"t": result.train_id},
            )
            replayed = metrics.filter(pl.col("name") == "replayed_rollouts")
            assert replayed.filter(pl.col("step") == 0)["value"].item() > 0, name
            skipped = metrics.filter(pl.col("name") == "skipped_zero_var")["value"].sum()
            assert (skipped > 0) == bool(extra), (name, skipped)
            # every skip is a row of train_group_stats (no samples), on the step that skipped it
            rows = ledger.sql(
                "SELECT step, count(*) AS skips, sum(n_samples) AS samples "
                "FROM train_group_stats WHERE train_id = $t AND skipped GROUP BY step",
                {"t": result.train_id},
            )
            per_step = metrics.filter(pl.col("name") == "skipped_zero_var").filter(
                pl.col("value") > 0
            )
            assert dict(rows.select("step", "skips").rows()) == {
                s: int(v) for s, v in per_step.select("step", "value").rows()
            }, name
            assert rows["samples"].sum() in (0, None)
            trajectory = ledger.sql(
                "SELECT sum(steps_skipped) FROM train_prompt_trajectory WHERE train_id = $t",
                {"t": result.train_id},
            ).item()
            assert trajectory == skipped, name
        assert ledger.query("cell_evidence")["training_skips"].sum() == skipped


def test_sieve_train_selects_by_the_posterior_before_sampling(setup: tuple[Path, Path]) -> None:
    """`selection = "posterior"` (issue 46 point 2): every step samples exactly the groups it
    trains (nothing sampled only to decide), picks them from more candidates than it trains,
    writes them to train_rollouts, and the curation groups seed the model; combining it with
    replay or the skip is refused in one line."""
    home, model = setup
    with Ledger.open(home) as ledger:
        settings = SMALL.model_copy(update={"selection": "posterior"}).with_steps(4)
        result = train(ledger, "cur-test", model, settings, home / "post", reward=even_length)
        metrics = ledger.sql(
            "SELECT step, name, value FROM train_metrics WHERE train_id = $t",
            {"t": result.train_id},
        )
        sampled = dict(metrics.filter(pl.col("name") == "rollouts").select("step", "value").rows())
        stored = dict(
            ledger.sql(
                "SELECT step, sum(n_samples) AS n FROM train_group_stats "
                "WHERE train_id = $t GROUP BY step",
                {"t": result.train_id},
            ).rows()
        )
        assert sorted(sampled) == [0, 1, 2, 3]
        assert {s: int(v) for s, v in sampled.items()} == {s: int(n) for s, n in stored.items()}
        cands = metrics.filter(pl.col("name") == "candidates")["value"].to_list()
        groups = ledger.sql(
            "SELECT step, count(*) AS g FROM train_group_stats WHERE train_id = $t GROUP BY step",
            {"t": result.train_id},
        )
        assert len(cands) == 4 and min(cands) > max(groups["g"].to_list())
    with pytest.raises(ValueError, match="selection = 'posterior' does not combine"):
        TrainSettings.model_validate(
            {**SMALL.model_dump(), "selection": "posterior", "skip_zero_variance": True}
        )
    with pytest.raises(ValueError, match="'posterior-screen' does not combine"):
        TrainSettings.model_validate(
            {**SMALL.model_dump(), "selection": "posterior-screen", "replay_curation": True}
        )


def test_posterior_selection_replays_a_prompts_curation_samples_on_its_first_pick(
    setup: tuple[Path, Path],
) -> None:
    """`selection = "posterior"` with `replay_curation` (issue 46 point 4: the night's screen
    samples train on the first visit): a picked prompt with stored curation samples trains on
    them the first time it is picked (no rollout sampled for it), fresh samples afterwards; a
    step samples exactly its fresh groups; no prompt is replayed twice."""
    home, model = setup
    with Ledger.open(home) as ledger:
        store_flat_screen(ledger, model)
        settings = SMALL.model_copy(
            update={"selection": "posterior", "replay_curation": True}
        ).with_steps(4)
        out = home / "post-replay"
        result = train(ledger, "cur-test", model, settings, out, reward=even_length)
        m = ledger.sql(
            "SELECT step, name, value FROM train_metrics WHERE train_id = $t",
            {"t": result.train_id},
        )

        def metric(name: str) -> dict[int, float]:
            return dict(m.filter(pl.col("name") == name).select("step", "value").rows())

        replayed, fresh_groups = metric("replayed_groups"), metric("fresh_groups")
        assert replayed[0] > 0  # the first step's picks are all first visits
        screened = set(
            ledger.sql(
                "SELECT DISTINCT problem_id FROM rollouts r JOIN sampling_runs s USING (run_id) "
                "WHERE s.purpose IN ('screen', 'refine')"
            )["problem_id"].to_list()
        )
        groups = ledger.sql(
            "SELECT step, problem_id, n_samples FROM train_group_stats WHERE train_id = $t "
            "ORDER BY step, problem_id",
            {"t": result.train_id},
        )
        first: dict[str, int] = {}
        for step, pid, _n in groups.rows():
            first.setdefault(pid, step)
        replay_expected = {
            s: sum(1 for pid, f in first.items() if f == s and pid in screened) for s in range(4)
        }
        assert {s: int(v) for s, v in replayed.items()} == replay_expected
        per_step = groups.group_by("step").agg(pl.len().alias("g"))
        assert {s: int(replayed[s] + fresh_groups[s]) for s in range(4)} == dict(per_step.rows())
        # rollouts sampled are the fresh groups' samples only
        sampled, replayed_rollouts = metric("rollouts"), metric("replayed_rollouts")
        trained = dict(groups.group_by("step").agg(pl.col("n_samples").sum()).rows())
        for s in range(4):
            assert int(sampled[s]) == int(trained[s] - replayed_rollouts[s])


def test_sieve_train_two_stages_keep_the_screen_samples_in_the_group(
    setup: tuple[Path, Path],
) -> None:
    """`selection = "posterior-screen"` (issue 46 point 3): every rollout a step samples is in
    train_rollouts, the only ones that did not train are the flat screens (metric
    decided_only), and a continued prompt's group holds its screen's samples (one group per
    prompt and step, sample_idx 0..G-1)."""
    home, model = setup
    with Ledger.open(home) as ledger:
        settings = SMALL.model_copy(update={"selection": "posterior-screen"}).with_steps(3)
        result = train(ledger, "cur-test", model, settings, home / "screen", reward=even_length)
        m = ledger.sql(
            "SELECT step, name, value FROM train_metrics WHERE train_id = $t",
            {"t": result.train_id},
        )

        def metric(name: str) -> dict[int, float]:
            return dict(m.filter(pl.col("name") == name).select("step", "value").rows())

        stored = ledger.sql(
            "SELECT step, problem_id, count(*) AS n, max(sample_idx) AS top, "
            "count(DISTINCT sample_idx) AS idx FROM train_rollouts WHERE train_id = $t "
            "GROUP BY ALL",
            {"t": result.train_id},
        )
    assert sorted(metric("rollouts")) == [0, 1, 2]
    per_step = stored.group_by("step").agg(pl.col("n").sum()).sort("step")
    assert {int(s): int(n) for s, n in per_step.rows()} == {
        s: int(v) for s, v in metric("rollouts").items()
    }
    assert (stored["n"] == stored["idx"]).all() and (stored["top"] == stored["n"] - 1).all()
    screened, straight = metric("screened"), metric("straight")
    assert all(screened[s] + straight[s] >= 1 for s in screened)
    assert all(metric("decided_only")[s] <= 4 * screened[s] for s in screened)


def test_a_carried_night_continues_the_lr_schedule_of_the_night_before(
    setup: tuple[Path, Path],
) -> None:
    """`carry_over` (issue 46 point 4: whether moments and schedules carry across nights is a
    setting of the product's loop): a run from the last checkpoint of a 2-step run continues
    its lr warm-up at update 2 (3/4 of lr with a 4-step warm-up); without it the warm-up
    starts again (1/4). The exact continuation (moments, β, reference) is
    tests/grpo_core/test_checkpoint.py's carried-run test."""
    from pipeline.core.home import from_home

    home, model = setup
    grpo = {**SMALL.grpo, "total_steps": 2, "lr_warmup_steps": 4}
    night = SMALL.model_copy(update={"grpo": grpo})
    with Ledger.open(home) as ledger:
        first = train(ledger, "cur-test", model, night, home, reward=even_length)
        (stored,) = ledger.sql(
            "SELECT path FROM checkpoints WHERE train_id = $t AND step = 2",
            {"t": first.train_id},
        ).row(0)
        saved = from_home(stored, home)
        lrs = {}
        for carry in (True, False):
            settings = night.model_copy(update={"carry_over": carry})
            run = train(ledger, "cur-test", saved, settings, home, reward=even_length)
            lrs[carry] = ledger.sql(
                "SELECT step, value FROM train_metrics WHERE train_id = $t AND name = 'lr' "
                "ORDER BY step",
                {"t": run.train_id},
            )["value"].to_list()
    lr = grpo["lr"]
    assert lrs[True] == pytest.approx([lr * 3 / 4, lr])
    assert lrs[False] == pytest.approx([lr / 4, lr / 2])
