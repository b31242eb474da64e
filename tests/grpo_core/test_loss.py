"""Clipped surrogate, masking, aggregations against slow loops, and metrics."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_core.loss import AGGREGATIONS, clipped_surrogate, grpo_loss

B, T = 6, 5


def make_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3  # (B, T)
    lengths = torch.tensor([5, 3, 1, 4, 2, 5])  # (B,)
    return {
        "logp": logp.requires_grad_(),
        "old_logp": logp.detach() + 0.3 * torch.randn(B, T, generator=g, dtype=torch.float64),
        "adv": torch.tensor([1.0, -0.5, 0.8, 0.0, 0.0, -1.2], dtype=torch.float64),
        "mask": torch.arange(T)[None, :] < lengths[:, None],  # (B, T) right padding
        "informative": torch.tensor([True, True, True, False, False, True]),
    }


def slow_loss(b: dict[str, torch.Tensor], agg: str, eps_lo: float, eps_hi: float) -> float:
    """Loop over sequences and tokens with plain floats."""
    per_seq: list[list[float]] = []
    for i in range(B):
        if not b["informative"][i]:
            continue
        toks = []
        for t in range(T):
            if b["mask"][i, t]:
                r = float(torch.exp(b["logp"][i, t].detach() - b["old_logp"][i, t]))
                a = float(b["adv"][i])
                toks.append(-min(r * a, min(max(r, 1 - eps_lo), 1 + eps_hi) * a))
        per_seq.append(toks)
    if agg == "token_mean":
        return sum(sum(s) for s in per_seq) / sum(len(s) for s in per_seq)
    if agg == "seq_mean":
        return sum(sum(s) / len(s) for s in per_seq) / len(per_seq)
    return sum(sum(s) for s in per_seq) / (T * len(per_seq))  # dr_grpo, max_tokens = T


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.2, 0.28), (0.05, 0.1)])
def test_each_aggregation_matches_slow_loop(agg: str, eps: tuple[float, float]) -> None:
    b = make_batch()
    loss, _ = grpo_loss(**b, eps_low=eps[0], eps_high=eps[1], aggregation=agg)  # type: ignore[arg-type]
    assert loss.item() == pytest.approx(slow_loss(b, agg, *eps), rel=1e-9)
    loss.backward()
    assert torch.isfinite(b["logp"].grad).all()


@settings(max_examples=50, deadline=None)
@given(
    logp=st.lists(st.floats(-20, 0), min_size=1, max_size=8),
    adv=st.floats(-5, 5),
    eps=st.floats(0.01, 0.5),
)
def test_clipped_equals_unclipped_at_ratio_one(logp: list[float], adv: float, eps: float) -> None:
    x = torch.tensor([logp], dtype=torch.float64)  # (1, T)
    per_token, ratio = clipped_surrogate(x, x.clone(), torch.tensor([adv]), eps, eps + 0.1)
    assert torch.equal(ratio, torch.ones_like(x))
    assert torch.allclose(per_token, torch.full_like(x, -adv))


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
def test_padding_is_ignored(agg: str) -> None:
    b = make_batch()
    loss, _ = grpo_loss(**b, aggregation=agg, max_tokens=T)  # type: ignore[arg-type]
    garbage = {k: v.detach().clone() for k, v in b.items()}
    pad = ~b["mask"]
    garbage["logp"][pad] = -float("inf")  # values under padding must not matter
    garbage["old_logp"][pad] = 123.0
    garbage = {k: v.float() if v.is_floating_point() else v for k, v in garbage.items()}
    garbage["logp"].requires_grad_()
    ref = garbage["logp"].detach().clone()
    ref[pad] = float("nan")
    loss2, m = grpo_loss(**garbage, aggregation=agg, max_tokens=T, ref_logp=ref, beta=0.1)  # type: ignore[arg-type]
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-5)
    assert m["kl_ref"] == 0.0
    loss2.backward()
    assert torch.isfinite(garbage["logp"].grad).all()


@pytest.mark.parametrize("agg", sorted(AGGREGATIONS))
def test_uninformative_groups_contribute_nothing_and_stay_out_of_denominator(agg: str) -> None:
    b = make_batch()
    keep = b["informative"]
    loss, m = grpo_loss(**b, aggregation=agg, max_tokens=T)  # type: ignore[arg-type]
    only = {k: v.detach()[keep] for k, v in b.items()}  # drop the uninformative rows
    loss_only, m_only = grpo_loss(**only, aggregation=agg, max_tokens=T)  # type: ignore[arg-type]
    assert loss.item() == pytest.approx(loss_only.item(), rel=1e-12)
    assert m["valid_tokens"] == m_only["valid_tokens"]
    loss.backward()
    assert torch.equal(b["logp"].grad[~keep], torch.zeros_like(b["logp"][~keep]))


def test_truncated_completions_can_be_masked() -> None:
    b = make_batch()
    truncated = torch.tensor([False, False, False, False, False, True])
    loss, m = grpo_loss(**b, truncated=truncated)
    b2 = {k: v.detach().clone() for k, v in b.items()}
    b2["informative"][5] = False  # masking truncation == leaving that row out
    loss2, m2 = grpo_loss(**b2)
    assert loss.item() == pytest.approx(loss2.item())
    assert m["valid_tokens"] == m2["valid_tokens"] == 5 + 3 + 1


def test_nothing_valid_gives_zero_with_a_graph() -> None:
    b = make_batch()
    b["informative"] = torch.zeros(B, dtype=torch.bool)
    for agg in AGGREGATIONS:
        loss, _ = grpo_loss(**b, aggregation=agg)  # type: ignore[arg-type]
        assert loss.item() == 0.0 and loss.requires_grad


def test_kl_term_and_metrics() -> None:
    b = make_batch()
    ref = b["logp"].detach() - 0.1  # (B, T)
    base, _ = grpo_loss(**b, ref_logp=ref, beta=0.0)
    with_kl, m = grpo_loss(**b, ref_logp=ref, beta=0.5)
    assert m["kl_ref"] > 0
    assert with_kl.item() == pytest.approx(base.item() + 0.5 * m["kl_ref"], rel=1e-9)
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(**b, beta=0.1)
    with pytest.raises(ValueError, match="choose one of"):
        grpo_loss(**b, aggregation="sum")  # type: ignore[arg-type]
    for key in ("clip_frac_low", "clip_frac_high", "approx_kl_old"):
        assert m[key] >= 0.0
    assert m["clip_frac_low"] + m["clip_frac_high"] > 0  # old_logp differs by ~0.3


def test_entropy_metric_is_the_mean_over_real_tokens() -> None:
    b = make_batch()
    entropy = torch.arange(B * T, dtype=torch.float32).view(B, T)  # (B, T)
    _, m = grpo_loss(**b, entropy=entropy)
    mask = b["mask"].bool()
    assert m["entropy"] == pytest.approx(float(entropy[mask].mean()), rel=1e-6)
    assert "entropy" not in grpo_loss(**b)[1]


def test_k1_estimator_option() -> None:
    b = make_batch()
    ref = b["logp"].detach() - 0.1  # k1 = logp − ref = 0.1 on every valid token
    _, m = grpo_loss(**b, ref_logp=ref, beta=0.1, kl_estimator="k1")
    assert m["kl_ref"] == pytest.approx(0.1)


def test_dr_grpo_divides_by_the_given_constant_not_the_width() -> None:
    """The trainer passes a constant (max_new_tokens) larger than this batch's width T."""
    b = make_batch()
    loss, _ = grpo_loss(**b, aggregation="dr_grpo", max_tokens=16)
    want = slow_loss(b, "dr_grpo", 0.2, 0.2) * T / 16  # slow loop's Σ / (T · n) → Σ / (16 · n)
    assert loss.item() == pytest.approx(want, rel=1e-9)


def test_k2_estimator_option() -> None:
    b = make_batch()
    ref = b["logp"].detach() - 0.2  # k2 = ½ · 0.2² on every valid token
    _, m = grpo_loss(**b, ref_logp=ref, beta=0.1, kl_estimator="k2")
    assert m["kl_ref"] == pytest.approx(0.02)
