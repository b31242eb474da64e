"""benchmarks/roofline.py: the analytic update FLOPs against torch's FlopCounterMode on a tiny
random Llama (full rows and shared prompts), the peak measurement's contract, the bounds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from roofline import (
    ModelShape,
    Peak,
    SieveStepLog,
    arm_roofline,
    matmul_peak,
    sampling_bound,
    update_flops,
)


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=True, attn_implementation="eager",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def counted(fn: object) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()  # type: ignore[operator]
    return counter.get_total_flops()


def loss_of(logits: torch.Tensor) -> torch.Tensor:
    return logits.float().log_softmax(-1).mean()


def test_shape_counts_every_linear_with_the_tied_head(llama: torch.nn.Module) -> None:
    shape = ModelShape.of(llama)
    per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 160  # q, o; k, v (GQA 2 × 16); mlp
    assert shape == ModelShape(2 * per_layer + 256 * 64, 2, 64, 256 * 64)


@pytest.mark.parametrize(("reference", "iterations"), [(True, 1), (False, 1), (True, 2)])
def test_full_rows_match_flop_counter(
    llama: torch.nn.Module, reference: bool, iterations: int
) -> None:
    b, p, c = 4, 20, 12
    ids = torch.randint(0, 256, (b, p + c))

    def update() -> None:
        with torch.no_grad():
            for _ in range(int(reference) + int(iterations > 1)):  # reference, old log-probs
                llama(input_ids=ids)
        for _ in range(iterations):
            loss_of(llama(input_ids=ids).logits).backward()

    want = counted(update)
    got = update_flops(
        ModelShape.of(llama), [p] * b, [c] * b, reference=reference, num_iterations=iterations
    )
    assert got == pytest.approx(want, rel=0.10)


def test_shared_prefix_matches_flop_counter(llama: torch.nn.Module) -> None:
    """The trainer's shared-prompt forward (grpo_core.logprobs.shared_prefix_logp's calls):
    each prompt once into a KV cache, gathered to its G rows, the completions on top."""
    from transformers import DynamicCache

    from grpo_core.logprobs import cache_kwarg

    groups, g, p, c = 2, 4, 24, 10
    prompts = torch.randint(0, 256, (groups, p))
    comps = torch.randint(0, 256, (groups * g, c))
    owner = torch.arange(groups).repeat_interleave(g)

    def forward() -> torch.Tensor:
        cache = DynamicCache(config=llama.config)
        first = llama(input_ids=prompts, **{cache_kwarg(llama): cache}, use_cache=True).logits
        cache.batch_select_indices(owner)
        pos = torch.arange(p, p + c)[None, :].expand(groups * g, c)
        rest = llama(
            input_ids=comps, position_ids=pos, **{cache_kwarg(llama): cache}, use_cache=True
        ).logits
        return loss_of(first) + loss_of(rest)

    def update() -> None:
        with torch.no_grad():
            forward()  # reference
        forward().backward()

    want = counted(update)
    got = update_flops(
        ModelShape.of(llama), [p] * (groups * g), [c] * (groups * g), groups=owner.tolist()
    )
    assert got == pytest.approx(want, rel=0.10)
    unshared = update_flops(ModelShape.of(llama), [p] * (groups * g), [c] * (groups * g))
    assert got < 0.6 * unshared  # the prompt (most of each row) is fed once per group, not G times


def test_head_on_completions_only_matches_logits_to_keep(llama: torch.nn.Module) -> None:
    """TRL's forward: logits only at the completion positions (`logits_to_keep`)."""
    b, p, c = 4, 20, 12
    ids = torch.randint(0, 256, (b, p + c))
    want = counted(lambda: loss_of(llama(input_ids=ids, logits_to_keep=c).logits).backward())
    shape = ModelShape.of(llama)
    got = update_flops(shape, [p] * b, [c] * b, reference=False, head_on_completions_only=True)
    assert got == pytest.approx(want, rel=0.10)
    assert got < update_flops(shape, [p] * b, [c] * b, reference=False)


def test_ragged_rows_count_each_row_alone() -> None:
    shape = ModelShape(linear_params=1000, layers=2, attn_width=8)
    got = update_flops(shape, [3, 5], [2, 4], reference=False)
    tokens, pairs = 5 + 9, 25 + 81
    assert got == 3 * (2 * 1000 * tokens + 4 * 2 * 8 * pairs)


def test_groups_share_their_prompt_in_any_order() -> None:
    shape = ModelShape(linear_params=1000, layers=2, attn_width=8)
    got = update_flops(shape, [3, 5, 3, 5], [2, 4, 1, 1], groups=[7, 2, 7, 2], reference=False)
    tokens = 3 + 5 + (2 + 4 + 1 + 1)
    pairs = 9 + 25 + 2 * 5 + 4 * 9 + 1 * 4 + 1 * 6
    assert got == 3 * (2 * 1000 * tokens + 4 * 2 * 8 * pairs)


def test_bad_lengths_are_refused() -> None:
    shape = ModelShape(1000, 2, 8)
    with pytest.raises(ValueError, match="3 prompt lengths for 2 completions"):
        update_flops(shape, [1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="2 group ids for 3 rows"):
        update_flops(shape, [1, 1, 1], [1, 2, 3], groups=[0, 0])


def test_matmul_peak_measures_the_asked_dtype() -> None:
    peak = matmul_peak("bfloat16", n=64, k=3, reps=2)
    assert peak.dtype == "bfloat16" and peak.n == 64 and peak.rounds == 3
    assert peak.gflops >= peak.median_gflops > 0
    assert peak.threads == torch.get_num_threads()
    with pytest.raises(ValueError, match="dtype must be one of"):
        matmul_peak("int8")


def test_sampling_bound_and_arm_shares() -> None:
    assert sampling_bound(135_000_000, 270.0) == pytest.approx(1000.0)
    shape = ModelShape(linear_params=500_000_000, layers=1, attn_width=1)
    peaks = {
        "float32": [Peak("float32", 100.0, 90.0, 1024, 5, 2, 1.0),
                    Peak("float32", 80.0, 70.0, 1024, 5, 2, 3.0)],
    }  # fmt: skip
    step = {"update_flops": 40e9, "update_seconds": 1.0}
    steps = [{**step, "completion_tokens": 30, "sample_seconds": 1.0}] * 2
    out = arm_roofline(shape, steps, peaks, "float32", "float32", standalone_tokens_per_s=60.0)
    assert out["update"]["achieved_gflops"] == pytest.approx(40.0)
    assert out["update"]["share_of_peak"] == pytest.approx(0.5)  # of the lower (end) peak
    assert out["sampling"]["compute_bound_tokens_per_s"] == pytest.approx(80.0)
    assert out["sampling"]["share_of_compute_bound"] == pytest.approx(30 / 80)
    assert out["sampling"]["share_of_standalone"] == pytest.approx(0.5)
    assert len(out["peaks"]["float32"]) == 2


@pytest.mark.parametrize("share", [True, False])
def test_step_log_sees_the_rows_the_update_runs_on(share: bool) -> None:
    """SieveStepLog on the toy trainer: its rows are the update batch's (uninformative groups
    dropped), its FLOPs are update_flops of that batch's own prompt and completion lengths."""
    from grpo_core.config import GRPOConfig
    from grpo_core.logprobs import head_support
    from grpo_core.trainer import Hooks, Trainer
    from tests.grpo_core.conftest import (
        ToySampler,
        ToyTokenizer,
        first_letter_reward,
        toy_batches,
        toy_model,
    )

    model, tok = toy_model(3), ToyTokenizer()
    cfg = GRPOConfig(total_steps=3, seed=1, checkpoint_every=0, share_prefix=share, lr=1e-2)
    sampler = ToySampler(model, tok)
    trainer = Trainer(model, tok, sampler, first_letter_reward, toy_batches(), cfg)
    log = SieveStepLog(ModelShape.of(model), tok, cfg)
    log.watch(sampler, trainer)
    batches, entries = [], []
    optimise = trainer._optimise

    def spy(step: int, batch: object, m: dict[str, float]) -> object:
        batches.append(batch)
        return optimise(step, batch, m)  # type: ignore[arg-type]

    trainer._optimise = spy  # type: ignore[method-assign]
    trainer.hooks = Hooks(metrics=lambda step, m: entries.append(log.step(m)), warning=print)
    trainer.train()
    updated = [e for e in entries if e["update_rows"]]
    assert len(updated) == len(batches) >= 1
    for e, b in zip(updated, batches, strict=True):
        comp = b.comp_mask.sum(-1)  # (B,)
        if share:
            prompt, owner = b.prompt_attn.sum(-1)[b.owner], b.owner.tolist()
        else:
            prompt, owner = b.attn.sum(-1) - comp, None
        want = update_flops(
            ModelShape.of(model), prompt.tolist(), comp.tolist(), groups=owner,
            head_on_completions_only=head_support(model)[1],
        )  # fmt: skip
        assert e["update_rows"] == b.adv.shape[0]
        assert e["update_flops"] == pytest.approx(want)
    assert all(e["completion_tokens"] > 0 and e["sample_seconds"] > 0 for e in entries)


def test_trl_step_log_takes_generation_and_rewards_out_of_the_step() -> None:
    """TRLStepLog on an object with TRL 1.16's two method signatures (the real trainer is
    exercised by benchmarks/real_train.py --arm trl)."""
    from roofline import TRLStepLog

    class FakeTRL:
        def _generate(self, prompts: list[str]) -> tuple[list[list[int]], ...]:
            return [[1, 2], [3]], [[4, 5, 6], [7]], None

        def _calculate_rewards(self, *args: object) -> list[float]:
            return [0.0, 1.0]

    trainer, shape = FakeTRL(), ModelShape(1000, 2, 8, head_params=100)
    log = TRLStepLog(shape, reference=True)
    log.watch(trainer)
    trainer._generate(["a", "b"])
    trainer._calculate_rewards()
    e = log.step(10.0)
    want = update_flops(shape, [2, 1], [3, 1], reference=True, head_on_completions_only=True)
    assert e["update_flops"] == want and e["update_rows"] == 2 and e["completion_tokens"] == 4
    assert e["update_seconds"] == pytest.approx(10.0 - e["sample_seconds"] - e["reward_seconds"])
    assert log.step(1.0)["update_rows"] == 0  # each step starts empty


@pytest.mark.parametrize("fp32", [False, True])
def test_vllm_tuning_sweeps_one_factor_at_a_time(fp32: bool) -> None:
    from argparse import Namespace

    from vllm_tuning import BASE, FP32_BASE, FP32_SWEEP, SWEEP, key, last_json, settings, stem

    args = Namespace(fp32=fp32, smoke=False)
    base, sweep = (FP32_BASE, FP32_SWEEP) if fp32 else (BASE, SWEEP)
    runs = settings(args)
    assert runs[0] == base and key(runs[0], base) == "base"
    assert len(runs) == 1 + sum(len(v) for v in sweep.values())
    assert len({key(s, base) for s in runs}) == len(runs)  # every setting has its own name
    assert all(sum(s[k] != base[k] for k in base) == 1 for s in runs[1:])
    # the fp32 base is the training engine as Sieve runs it; its results never overwrite the other
    assert (FP32_BASE["dtype"], FP32_BASE["omp_threads_bind"]) == ("float32", "0-1")
    assert stem(args) == ("vllm_tuning_fp32" if fp32 else "vllm_tuning")
    noise = 'INFO engine started\n{"tokens_per_s": 1.0}\nWARNING [1, 2]\n{"tokens_per_s": 2.5}\n'
    assert last_json(noise) == {"tokens_per_s": 2.5}
    assert last_json("Traceback ...\nRuntimeError: boom") is None
