"""reasoning-gym families (`rg:<dataset>`) and the "rg" verifier: levels, reproducible sources,
the committed-answer rule in front of score_answer, and a curation of an rg mix on the tiny
policy. Skipped as a whole without the `gym` extra."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

pytest.importorskip("reasoning_gym")

from pipeline.core.errors import SieveError
from pipeline.problems import generate, generate_mix, parse_levels, rg
from pipeline.scoring import VERIFIER_VERSION, StepContext, verify, verify_batch
from pipeline.scoring.rg import rg_reading
from pipeline.scoring.rg_source import as_config, dataset_for, score_here
from pipeline.scoring.verifiers import RG_VERIFIER_VERSION
from pipeline.selection.config import load_mix
from pipeline.store import Ledger

CELLS = [(d, lv) for d, levels in rg.LEVEL_CONFIGS.items() for lv in levels]


def context(row: dict) -> StepContext:
    return StepContext(row["question"], row["family"], row["params"])


def one(family: str, level: int = 1, seed: int = 0) -> dict:
    return generate(family, [level], 1, seed=seed).row(0, named=True)


def test_at_least_ten_datasets_each_with_levels_easiest_first() -> None:
    assert len(rg.LEVEL_CONFIGS) >= 10
    for dataset, levels in rg.LEVEL_CONFIGS.items():
        assert sorted(levels) == list(range(1, len(levels) + 1)), dataset
        assert parse_levels("all", f"rg:{dataset}") == sorted(levels)
    assert "min_animals=1" in rg.describe("leg_counting", 1)


@pytest.mark.parametrize(("dataset", "level"), CELLS)
def test_every_cell_rebuilds_from_its_stored_source_and_its_gold_scores_one(
    dataset: str, level: int
) -> None:
    frame = generate(f"rg:{dataset}", [level], 3, seed=5)
    assert frame.height == 3 and set(frame["verifier"]) == {"rg"}
    assert set(frame["source"]) == {f"gen:rg:{dataset}"}
    contexts = []
    for row in frame.iter_rows(named=True):
        params = json.loads(row["params"])
        assert params["rg_version"] == RG_VERIFIER_VERSION.split("/")[1]  # type: ignore[union-attr]
        assert params["dataset"] == dataset and isinstance(params["index"], int)
        assert params["config"]["seed"] == rg.RG_SEED
        assert {k: params["config"][k] for k in rg.LEVEL_CONFIGS[dataset][level]} == (
            rg.LEVEL_CONFIGS[dataset][level]
        )
        import reasoning_gym

        entry = reasoning_gym.create_dataset(  # the stored source, rebuilt by hand
            dataset,
            **as_config(type(dataset_for(dataset, params["config"]).config), params["config"]),
        )[params["index"]]
        assert (entry["question"], str(entry["answer"])) == (row["question"], row["answer"])
        contexts.append(context(row))
    boxed = [f"So the answer is \\boxed{{{a}}}" for a in frame["answer"]]
    verdicts = verify_batch(boxed, frame["answer"].to_list(), "rg", contexts=contexts)
    assert [(v.reward, v.correct) for v in verdicts] == [(1.0, True)] * 3, verdicts


def test_the_same_seed_gives_the_same_problems_and_another_seed_others() -> None:
    first = generate("rg:chain_sum", [1, 2], 10, seed=1)
    assert first.drop("created_at").equals(
        generate("rg:chain_sum", [1, 2], 10, seed=1).drop("created_at")
    )
    other = generate("rg:chain_sum", [1, 2], 10, seed=2)
    assert set(first["problem_id"]) != set(other["problem_id"])


def test_the_committed_answer_rule_runs_before_score_answer() -> None:
    row = one("rg:leg_counting")
    ctx, gold = context(row), row["answer"]
    cases = {  # completion -> (reason in chat mode, reason in raw mode)
        gold: ("no_answer", "correct"),
        f"\\boxed{{{gold}}}": ("correct", "correct"),
        f"Answer: {gold}": ("correct", "correct"),
        f"\\boxed{{{gold}}} wait, no": ("wrong", "wrong"),
        f"\\boxed{{{gold} or 99}}": ("wrong", "wrong"),
    }
    for completion, (chat, raw) in cases.items():
        got_chat = verify(completion, gold, "rg", context=ctx, marker_required=True)
        got_raw = verify(completion, gold, "rg", context=ctx, marker_required=False)
        assert (got_chat.reason, got_raw.reason) == (chat, raw), completion
    hedged = verify(f"\\boxed{{{gold} or 99}}", gold, "rg", context=ctx)
    assert hedged.detail.startswith("hedged") and hedged.reward == 0.0


@pytest.mark.parametrize(
    ("dataset", "pad"),
    [("rg:spell_backward", "{gold}x"), ("rg:count_bits", "1{gold}"), ("rg:products", "{gold}0")],
)
def test_a_partial_score_is_not_paid(dataset: str, pad: str) -> None:
    """reasoning-gym's default score_answer pays len(gold)/len(answer) for any answer holding the
    gold; Sieve pays only the gold (priority 1: a padded answer must not earn reward)."""
    row = one(dataset)
    gold = row["answer"]
    padded = pad.format(gold=gold)
    assert 0.0 < score_here(row["params"], padded, gold)[0] < 1.0  # what reasoning-gym would pay
    verdict = verify(f"The final answer is {padded}.", gold, "rg", context=context(row))
    assert (verdict.reward, verdict.correct, verdict.reason) == (0.0, False, "wrong")
    assert verdict.components["correctness"] == 0.0
    assert verdict.detail.startswith("rg: partial score") and verdict.detail.endswith("not paid")
    right = verify(f"The final answer is {gold}.", gold, "rg", context=context(row))
    assert (right.reward, right.correct) == (1.0, True)


def test_a_restated_answer_is_kept_and_another_number_withdraws_it() -> None:
    """SmolLM2's text from sieve seed 1's training (`3 * 6`): before rg/3 the verifier compared
    the restated number with nothing and withdrew every restatement."""
    row = one("rg:products", 2)
    gold, ctx = row["answer"], context(row)
    kept = verify(
        f"The final answer is {gold}.\n\n{gold} is the final answer.", gold, "rg", context=ctx
    )
    assert (kept.reward, kept.correct) == (1.0, True)
    other = str(int(gold) + 1)
    gone = verify(
        f"The final answer is {gold}.\n\n{other} is the final answer.", gold, "rg", context=ctx
    )
    assert (gone.correct, gone.detail) == (False, "retracted: restated")


@pytest.mark.parametrize(
    "text",
    [  # SmolLM2's, from sieve seed 1's ledger: unpaid partial scores before rg/4
        "Your final answer is simply {g}.",
        "The answer is simply {g}.",
        "The final answer is {a} * {b} = {g}.",
        "\\boxed{{{a} * {b} = {g}}}",
        "The final answer is {g}.\n\nRemember that the final answer is only {g}, not a fraction.",
    ],
)
def test_score_answer_gets_the_committed_value(text: str) -> None:
    row = one("rg:products", 2)
    a, b = (int(x) for x in row["question"].split(": ")[1].split(".")[0].split(" * "))
    gold = row["answer"]
    got = verify(text.format(a=a, b=b, g=gold), gold, "rg", context=context(row))
    assert (got.reward, got.correct) == (1.0, True), got.detail
    wrong = verify(text.format(a=a, b=b, g=int(gold) + 1), gold, "rg", context=context(row))
    assert wrong.correct is False


def test_the_reading_leaves_a_non_numeric_gold_alone() -> None:
    assert rg_reading("simply olleh", "olleh") == "simply olleh"
    assert rg_reading("x = 3", "x = 3") == "x = 3"
    assert rg_reading("simply 16", "16") == "16"
    assert rg_reading("4 + 4 = 8", "8") == "8"


def test_a_negation_of_the_answer_itself_is_a_contradiction() -> None:
    row = one("rg:products", 2)
    gold = row["answer"]
    text = f"Justifying the answer: {gold} is not equal to {gold}."
    assert verify(text, gold, "rg", context=context(row)).correct is False
    assert verify(text, gold).correct is False  # the math verifier too (sieve-math/8)
    kept = f"The final answer is {gold}, not {int(gold) + 1}."
    assert verify(kept, gold, "rg", context=context(row)).correct is True


@pytest.mark.parametrize(
    "text",
    [
        "The final answer is $\\boxed{{\\text{{cannot be }} {g}}}$",
        "The final answer is $\\boxed{{\\text{{isn’t }} {g}}}$",
        "The final answer is $\\boxed{{\\text{{none }} {g}}}$",
        "The final answer is $\\boxed{{{g}}}$. That's false.",
    ],
)
def test_the_negation_class_is_refused_by_rg_too(text: str) -> None:
    """sieve-math/10 / rg 5: the rg verifier reads the committed answer with the same hedge and
    retraction scans. Under rg 4 the last was paid (score_answer refuses the others' text)."""
    row = one("rg:products", 2)
    gold = row["answer"]
    assert verify(text.format(g=gold), gold, "rg", context=context(row)).correct is False


def test_an_answer_that_makes_score_answer_raise_is_wrong_not_an_error() -> None:
    row = one("rg:prime_factorization")  # its score_answer parses the factors with int()
    verdict = verify("\\boxed{12 ☃}", row["answer"], "rg", context=context(row))
    assert verdict.reason == "wrong" and verdict.reward == 0.0
    assert verdict.detail.startswith("rg: score_answer raised")


def test_a_problem_that_cannot_be_rebuilt_is_a_verifier_error() -> None:
    row = one("rg:gcd")
    params = json.loads(row["params"])
    box = f"\\boxed{{{row['answer']}}}"
    missing = verify(box, row["answer"], "rg")
    assert missing.reason == "verifier_error" and "needs the problem's params" in missing.detail
    old = StepContext(params_json=json.dumps({**params, "rg_version": "0.0.1"}))
    assert "made with reasoning-gym 0.0.1" in verify(box, row["answer"], "rg", context=old).detail
    moved = StepContext(params_json=json.dumps({**params, "index": params["index"] + 1}))
    assert "no longer gives its gold" in verify(box, row["answer"], "rg", context=moved).detail


def test_the_verifier_version_names_reasoning_gym() -> None:
    assert RG_VERIFIER_VERSION is not None and RG_VERIFIER_VERSION.startswith("rg/")
    assert VERIFIER_VERSION.endswith(f"+{RG_VERIFIER_VERSION}")


def test_unknown_datasets_and_levels_are_one_clear_error() -> None:
    with pytest.raises(SieveError, match=r"unknown reasoning-gym family 'rg:nope'.*rg:gcd"):
        generate("rg:nope", [1], 1, seed=0)
    with pytest.raises(SieveError, match="level 9 not in rg:gcd levels 1-4"):
        generate("rg:gcd", [9], 1, seed=0)


def test_a_mix_toml_takes_rg_families_beside_the_home_made_ones(tmp_path: Path) -> None:
    path = tmp_path / "mix.toml"
    path.write_text('[families]\narith = "1"\n"rg:leg_counting" = "1-2"\n"rg:gcd" = "1"\n')
    levels = load_mix(path).levels()
    assert levels == {"arith": [1], "rg:leg_counting": [1, 2], "rg:gcd": [1]}
    frame = generate_mix(levels, 12, seed=0)
    counts = dict(frame.group_by("family").len().iter_rows())
    assert counts == {"arith": 4, "rg:leg_counting": 4, "rg:gcd": 4}
    assert set(frame.filter(pl.col("family") == "arith")["verifier"]) == {"math"}


def test_sieve_generate_takes_an_rg_family(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    args = ["generate", "--family", "rg:leg_counting", "--levels", "1-2", "--n", "6"]
    result = CliRunner().invoke(app, [*args, "--seed", "3", "--home", str(tmp_path)])
    assert result.exit_code == 0, result.output
    with Ledger.open(tmp_path, read_only=True) as ledger:
        stored = ledger.sql("SELECT family, level, verifier, params FROM problems")
    assert stored.height == 6 and set(stored["verifier"]) == {"rg"}
    assert sorted(set(stored["level"])) == [1, 2]
    assert {json.loads(p)["dataset"] for p in stored["params"]} == {"leg_counting"}


def test_an_rg_mix_curates_end_to_end_on_the_tiny_policy(
    tmp_path: Path, partly_trained_dir: Path
) -> None:
    """Real sampling (the hf tiny policy) and the real rg verifier; every candidate is kept or
    rejected with a reason, and no verdict is a verifier error."""
    from flows.curate import curate
    from pipeline.jobs.curate.curation import policy_for
    from pipeline.selection import CurateConfig

    cfg = CurateConfig(
        n_candidates=40, mix={"rg:basic_arithmetic": "1", "rg:chain_sum": "1"}, seed=0,
        chunk_size=40,
    )  # fmt: skip
    with Ledger.memory() as ledger:
        result = curate(ledger, policy_for(partly_trained_dir), cfg)
        verdicts = ledger.sql(
            "SELECT count(*) AS n, count(*) FILTER (WHERE reward IS NULL) AS errors FROM rollouts"
        ).row(0)
        version = ledger.sql("SELECT DISTINCT verifier_version FROM sampling_runs")[
            "verifier_version"
        ]
        kept = ledger.sql("SELECT count(*) AS n FROM curriculum_items")["n"][0]
        rejected = ledger.sql("SELECT count(*) AS n FROM rejections")["n"][0]
    assert verdicts[0] >= 8 * 30 and verdicts[1] == 0  # screened, and never a verifier error
    assert version.to_list() == [VERIFIER_VERSION]
    assert kept + rejected == result.candidates == cfg.n_candidates


def test_training_scores_rg_rows_from_their_stored_source() -> None:
    """`sieve train` reads a curriculum's items with their problems' params, and the training
    reward hands them to the rg verifier: the gold answer, marked, is correct, a wrong one is
    not, and neither is a verifier error (the params reached it)."""
    from datetime import UTC, datetime

    from grpo_core.trainer import Sample
    from pipeline.jobs.train.curriculum_batches import (
        CurriculumBatches,
        curriculum_frame,
        verifier_reward,
    )

    problems = generate("rg:basic_arithmetic", [1], 6, seed=2).filter(pl.col("split") == "train")
    n = problems.height
    items = pl.DataFrame({
        "curriculum_id": "cur-rg", "problem_id": problems["problem_id"], "stage": 1,
        "position": list(range(n)), "group_size": 2, "weight": 1.0, "p_mean": 0.5,
        "p_low": 0.2, "p_high": 0.8, "reason": "mid_band",
    })  # fmt: skip
    head = pl.DataFrame({
        "curriculum_id": ["cur-rg"], "created_at": [datetime.now(UTC)], "model": ["m"],
        "model_revision": ["r"], "config": ["{}"], "status": ["finished"],
    })  # fmt: skip
    with Ledger.memory() as ledger:
        ledger.write("problems", problems)
        ledger.write_batch({"curricula": head, "curriculum_items": items})
        frame = curriculum_frame(ledger, "cur-rg")
    batch = CurriculumBatches(frame, frame["question"].to_list(), 2 * n, 1, seed=0)(0)
    assert len(batch) == n and all(it.verifier == "rg" and it.params for it in batch)
    texts = [f"The answer is \\boxed{{{it.answer}}}" for it in batch]
    texts += [f"The answer is \\boxed{{{it.answer}1}}" for it in batch]
    samples = [Sample((1,), t, False) for t in texts]
    scores = verifier_reward(batch + batch, samples)
    assert scores.correct == [True] * n + [False] * n
    assert None not in scores.rewards


def test_an_answer_opening_with_another_number_is_not_paid_its_last_one() -> None:
    """sieve-math/9: SmolLM2 answered a count_bits problem "2 in the binary representation of 1"
    (gold 1); the reading that pays the last number paid it."""
    row = one("rg:count_bits")
    gold = row["answer"]
    text = f"The answer is {int(gold) + 1} in the binary representation of {gold}."
    got = verify(text, gold, "rg", context=context(row))
    assert (got.correct, got.detail) == (False, "hedged: several values")
    assert verify(f"The answer is {gold}.", gold, "rg", context=context(row)).correct is True
