"""Sieve's TRL reward function: TRL's call signature, both completion shapes, rg rows scored
through their exported params, and a real 2-step GRPOTrainer run on an exported curriculum with
the tiny policy."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import pytest

from flows.curate import curate
from pipeline.integrations.trl import SieveReward, completion_text, reward_function, stop_ids
from pipeline.jobs.data.export import export_curriculum
from pipeline.problems import generate_mix
from pipeline.scoring import Check, register_verifier
from pipeline.selection import CurateConfig
from pipeline.store import Ledger
from tests.simulated import RATES, simulated_policy

pytestmark = pytest.mark.integration  # 5 s


@register_verifier("test_trl_raises")
def _raises(completion: str, answer: str, timeout: float) -> Check:
    raise RuntimeError("broken verifier")


def test_plain_completions_are_scored_against_the_answer_column() -> None:
    reward = reward_function()
    got = reward(
        ["1+1=", "2+2=", "3+3="], ["\\boxed{2}", "\\boxed{5}", "\\boxed{6}"], answer=["2", "4", "6"]
    )
    assert got == [1.0, 0.0, 1.0]
    assert reward.__name__ == "sieve_reward"


def test_the_safe_chat_reading_is_the_default() -> None:
    """An echoed question, a bare number, a hedge or an unevaluated box earns nothing by
    default; `marker_required=False` or a row exported as `raw` reads bare answers."""
    completions = ["Solve 75 + 74 - 77 =", "72", "\\boxed{72 or 73}", "\\boxed{75+74-77}"]
    answers = {"answer": ["72"] * 4}
    assert reward_function()(["q"] * 4, completions, **answers) == [0.0] * 4
    lenient = reward_function(marker_required=False)(["q"] * 4, completions, **answers)
    assert lenient[1] == 1.0 and lenient[2] == 0.0
    per_row = reward_function()(
        ["q"] * 2, ["72", "72"], answer=["72", "72"], answer_format=["raw", "chat"]
    )
    assert per_row == [1.0, 0.0]


def test_conversational_completions_score_the_assistant_turns() -> None:
    completions = [
        [{"role": "assistant", "content": "so the answer is \\boxed{12}"}],
        [{"role": "assistant", "content": [{"type": "text", "text": "\\boxed{7}"}]}],
    ]
    prompts = [[{"role": "user", "content": "q"}]] * 2
    assert reward_function()(prompts, completions, answer=["12", "8"]) == [1.0, 0.0]
    assert completion_text(completions[1]) == "\\boxed{7}"


def test_the_verifier_column_is_used_per_row_unless_one_is_fixed() -> None:
    kwargs = {"answer": ["x1", "x1"], "verifier": ["exact", "test_trl_raises"]}
    boxed = ["\\boxed{x1}", "\\boxed{x1}"]
    assert reward_function()(["a", "b"], boxed, **kwargs) == [1.0, None]
    assert reward_function("exact")(["a", "b"], boxed, **kwargs) == [1.0, 1.0]


def test_a_failing_verifier_gives_none_and_is_counted_and_logged() -> None:
    logged: dict[str, float] = {}
    reward = reward_function("test_trl_raises", name="strict")
    got = reward(["p"] * 4, ["1"] * 4, answer=["1"] * 4, log_metric=logged.__setitem__)
    assert got == [None] * 4
    assert reward.verifier_errors == 4 and logged == {"strict/verifier_error_share": 1.0}


def test_bad_setup_fails_early_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="unknown verifier 'nope'"):
        reward_function("nope")
    with pytest.raises(KeyError, match=r"no 'answer' column.*solution"):
        reward_function()(["p"], ["1"], solution=["1"])


def test_it_pickles_and_keeps_its_name() -> None:
    copy = pickle.loads(pickle.dumps(reward_function(answer_key="gold", name="sieve_math")))
    assert isinstance(copy, SieveReward) and copy.__name__ == "sieve_math"
    assert copy(["p"], ["\\boxed{3}"], gold=["3"]) == [1.0]


def _exported_curriculum(tmp_path: Path) -> Path:
    """arith and, with the gym extra, a reasoning-gym family; rows repeated for G at 4."""
    mix = {"arith": "1-6"}
    if importlib.util.find_spec("reasoning_gym") is not None:
        mix["rg:chain_sum"] = "1-4"
    cfg = CurateConfig(n_candidates=120, mix=mix, seed=3, chunk_size=40)
    problems = generate_mix(cfg.mix_levels(), cfg.n_candidates, cfg.seed)
    policy = simulated_policy(problems, RATES)
    with Ledger.memory() as ledger:
        curate(ledger, policy, cfg)
        return export_curriculum(ledger, "latest", "trl", tmp_path, repeat_for_g=4).path


class Recording(SieveReward):
    """The reward function, remembering which dataset columns TRL passed to it."""

    seen: list[dict]

    def __call__(self, prompts, completions, **kwargs):  # type: ignore[no-untyped-def]
        self.seen = [*getattr(self, "seen", []), kwargs]
        return super().__call__(prompts, completions, **kwargs)


def test_grpo_trainer_runs_two_steps_on_an_export_with_sieve_rewards(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """~10 s: in the default run. Unshuffled, TRL takes the curriculum's first rows, each
    repeated round(G / 4) times for TRL's one group size of 4."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = datasets.load_dataset(
        "parquet", data_files=str(_exported_curriculum(tmp_path)), split="train"
    )
    reward = Recording(name="sieve_math")
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to=[],
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16,
        logging_steps=1,
        save_strategy="no",
        shuffle_dataset=False,  # stage 1 first, as the curriculum orders it
        gradient_checkpointing=False,  # a 1 M-parameter model needs no memory saving
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model_dir, local_files_only=True),
        processing_class=AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True),
        reward_funcs=[reward],
        args=args,
        train_dataset=data,
    )
    trainer.train()
    steps = [h for h in trainer.state.log_history if "rewards/sieve_math/mean" in h]
    assert len(steps) == 2 and all("reward" in h for h in steps)
    assert len(reward.seen) == 2
    batch = reward.seen[0]
    assert len(batch["answer"]) == 4 and {"stage", "group_size", "problem_id"} <= set(batch)
    assert {"params", "n_samples", "verifier_version", "curriculum_id"} <= set(batch)
    assert batch["stage"] == [1] * 4  # unshuffled: the first prompts are stage 1
    first = data[0]["problem_id"]
    copies = max(1, round(data[0]["group_size"] / 4))
    assert data["problem_id"][:copies] == [first] * copies  # repeated in place for its G
    assert reward.verifier_errors == 0  # every row, rg ones too, was judged


def test_rg_rows_are_scored_through_their_exported_params() -> None:
    pytest.importorskip("reasoning_gym")
    from pipeline.problems import generate

    rows = generate("rg:leg_counting", [1], 2, seed=0)
    gold = rows["answer"].to_list()
    kwargs = {"answer": gold, "verifier": ["rg"] * 2, "family": rows["family"].to_list()}
    completions = [f"\\boxed{{{gold[0]}}}", "\\boxed{12345}"]
    with_params = reward_function()(
        ["q"] * 2, completions, **kwargs, params=rows["params"].to_list()
    )
    assert with_params[0] == 1.0 and with_params[1] is not None and with_params[1] < 1.0
    assert reward_function()(["q"] * 2, completions, **kwargs) == [None, None]  # no source


def test_a_completion_cut_at_the_budget_is_told_by_its_last_token() -> None:
    """TRL passes `completion_ids`; with the stop ids given, a completion whose last id is not
    one of them was cut, and an answer running to the cut is not paid."""
    texts = ["The final answer is 9", "The final answer is 9"]
    ids = [[5, 6, 7], [5, 6, 2]]  # 2 is the end-of-sequence id: the second one stopped
    cut = reward_function(stop_token_ids=[2, 0])
    assert cut(["q"] * 2, texts, answer=["9", "9"], completion_ids=ids) == [0.0, 1.0]
    unknown = reward_function()  # cannot tell: every text is read as finished
    assert unknown(["q"] * 2, texts, answer=["9", "9"], completion_ids=ids) == [1.0, 1.0]
    with pytest.raises(ValueError, match="completion_ids"):
        cut(["q"] * 2, texts, answer=["9", "9"], completion_ids=ids[:1])


def test_stop_ids_are_the_tokenizers_end_and_pad_tokens() -> None:
    class Tok:
        eos_token_id, pad_token_id = 2, 0

    class NoPad:
        eos_token_id, pad_token_id = 2, None

    assert stop_ids(Tok()) == [0, 2] and stop_ids(NoPad()) == [2]
