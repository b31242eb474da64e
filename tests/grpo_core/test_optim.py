"""The trainer's AdamW (`grpo_core.optim`): torch's fused kernel where it applies, the same
parameters after several steps as torch's reference single-tensor AdamW (float32 rounding: 2
ulps of weights ≤ ~0.1, atol 2e-8 + rtol 1e-6, on moves of ~lr = 1e-2 a step), an exact
continuation from its own state_dict, and the default implementation where fused does not apply.

Test: `.venv/bin/pytest tests/grpo_core/test_optim.py -q`.
"""

from __future__ import annotations

import copy

import pytest
import torch

from grpo_core.config import GRPOConfig
from grpo_core.optim import fused_ok, make_optimiser
from tests.grpo_core.conftest import toy_model


def random_grads(model: torch.nn.Module, step: int) -> None:
    g = torch.Generator().manual_seed(step)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g) * 0.1


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_fused_adamw_moves_the_weights_as_the_reference_adamw(weight_decay: float) -> None:
    cfg = GRPOConfig(lr=1e-2, weight_decay=weight_decay, lr_warmup_steps=2)
    fast, slow = toy_model(1), toy_model(1)
    opt, sched = make_optimiser(list(fast.parameters()), cfg, lambda m: None)
    assert opt.defaults["fused"] is True
    ref = torch.optim.AdamW(slow.parameters(), lr=1e-2, weight_decay=weight_decay, foreach=False)
    ref_sched = torch.optim.lr_scheduler.LambdaLR(ref, lambda s: min(1.0, (s + 1) / 2))
    for step in range(5):
        for model, o, s in ((fast, opt, sched), (slow, ref, ref_sched)):
            random_grads(model, step)
            o.step()
            s.step()
    for (name, a), b in zip(fast.named_parameters(), slow.parameters(), strict=True):
        assert not torch.equal(a, toy_model(1).get_parameter(name))  # it moved
        torch.testing.assert_close(a, b, rtol=1e-6, atol=2e-8, msg=name)


def test_fused_state_resumes_exactly() -> None:
    cfg = GRPOConfig(lr=1e-2)
    straight, resumed = toy_model(2), toy_model(2)
    opt, _ = make_optimiser(list(straight.parameters()), cfg, lambda m: None)
    for step in range(3):
        random_grads(straight, step)
        opt.step()
    resumed.load_state_dict(straight.state_dict())
    opt2, _ = make_optimiser(list(resumed.parameters()), cfg, lambda m: None)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))  # as read back from a checkpoint
    for step in range(3, 5):
        for model, o in ((straight, opt), (resumed, opt2)):
            random_grads(model, step)
            o.step()
    for a, b in zip(straight.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


def test_fused_only_where_torch_has_the_kernel() -> None:
    plain = list(toy_model().parameters())
    assert fused_ok(plain)
    assert not fused_ok([])
    assert not fused_ok([torch.nn.Parameter(torch.zeros(3, dtype=torch.int32), False)])
    sparse = torch.nn.Parameter(torch.zeros(2, 2).to_sparse())
    assert not fused_ok([*plain, sparse])
    opt, _ = make_optimiser([sparse], GRPOConfig(), lambda m: None)
    assert opt.defaults["fused"] is None
