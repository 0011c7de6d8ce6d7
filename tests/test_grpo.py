"""GRPO math, with numbers worked by hand."""

from __future__ import annotations

import math

import pytest
import torch

from spade.training.grpo import (
    KL_CLAMP,
    ClipConfig,
    grpo_loss_parts,
    k3_kl,
    masked_mean,
    ppo_clip_terms,
    tis_weights,
    token_logprobs,
)

CLIP = ClipConfig(low=0.2, high=0.28)
LN = math.log


def test_token_logprobs_by_hand_and_chunked() -> None:
    # softmax([0, ln 3]) = [1/4, 3/4]
    logits = torch.tensor([[[0.0, LN(3)], [LN(3), 0.0], [0.0, 0.0]]])
    targets = torch.tensor([[1, 1, 0]])
    expected = torch.tensor([[LN(0.75), LN(0.25), LN(0.5)]])
    assert torch.allclose(token_logprobs(logits, targets), expected, atol=1e-6)
    assert torch.allclose(token_logprobs(logits, targets, chunk=2), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("ratio", "adv", "loss", "clipped"),
    [
        (1.5, 1.0, -1.28, 1.0),  # above 1 + 0.28 with A > 0: clipped
        (1.25, 1.0, -1.25, 0.0),  # inside the asymmetric upper range
        (0.5, 1.0, -0.5, 0.0),  # below range with A > 0: the unclipped term is the minimum
        (0.5, -1.0, 0.8, 1.0),  # below 1 - 0.2 with A < 0: clipped
        (0.75, -1.0, 0.8, 1.0),
        (1.5, -1.0, 1.5, 0.0),  # above range with A < 0: unclipped (pessimistic)
        (1.0, 2.0, -2.0, 0.0),
    ],
)
def test_ppo_clip_values(ratio: float, adv: float, loss: float, clipped: float) -> None:
    new = torch.tensor([[LN(ratio)]])
    old = torch.zeros(1, 1)
    got_loss, got_clipped = ppo_clip_terms(new, old, torch.tensor([adv]), CLIP)
    assert got_loss.item() == pytest.approx(loss, abs=1e-6)
    assert got_clipped.item() == clipped


def test_ppo_clip_gradient_is_minus_advantage_inside_and_zero_when_clipped() -> None:
    new = torch.tensor([[0.0, LN(1.5)]], requires_grad=True)
    loss, _ = ppo_clip_terms(new, torch.zeros(1, 2), torch.tensor([2.0]), CLIP)
    loss.sum().backward()
    assert new.grad is not None
    # d/d new of -(exp(new - old) * A) at ratio 1 is -A; the clipped token has no gradient.
    assert new.grad[0].tolist() == pytest.approx([-2.0, 0.0])


def test_k3_kl_by_hand() -> None:
    new = torch.tensor([[LN(0.5), LN(0.3)]])
    ref = torch.tensor([[LN(0.25), LN(0.3)]])
    # exp(ln 0.5) - ln 0.5 - 1 = 0.5 + 0.693147 - 1
    assert k3_kl(new, ref)[0].tolist() == pytest.approx([0.5 + LN(2) - 1.0, 0.0], abs=1e-6)
    assert k3_kl(torch.tensor([[0.0]]), torch.tensor([[30.0]])).item() == KL_CLAMP


def test_tis_weights_truncate_and_carry_no_gradient() -> None:
    old = torch.tensor([[LN(1.5), LN(3.0), LN(0.5)]], requires_grad=True)
    weights = tis_weights(old, torch.zeros(1, 3), cap=2.0)
    assert weights[0].tolist() == pytest.approx([1.5, 2.0, 0.5])
    assert not weights.requires_grad


def test_masked_mean_ignores_masked_tokens_and_empty_mask() -> None:
    x = torch.tensor([[1.0, 2.0, 100.0]])
    assert masked_mean(x, torch.tensor([[1.0, 1.0, 0.0]])).item() == 1.5
    assert masked_mean(x, torch.zeros(1, 3)).item() == 0.0


def _parts(**kw: object) -> object:
    new = torch.zeros(2, 3, requires_grad=True)
    defaults: dict[str, object] = {
        "new_BT": new,
        "old_BT": new.detach(),
        "sample_BT": torch.zeros(2, 3),
        "advantages_B": torch.tensor([1.0, -0.5]),
        "mask_BT": torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]]),
        "clip": CLIP,
        "tis_cap": 2.0,
        "tis_on_B": torch.zeros(2),
    }
    defaults.update(kw)
    return grpo_loss_parts(**defaults)  # type: ignore[arg-type]


def test_loss_parts_token_sums() -> None:
    parts = _parts()
    # ratio 1 everywhere: per-token loss is -A; seq 1 has 2 tokens at -1, seq 2 has 2 tokens at +0.5.
    assert parts.loss_sum.item() == pytest.approx(-1.0)
    assert parts.pg_sum == pytest.approx(-1.0)
    assert parts.tokens == 4.0
    assert parts.clipped_sum == 0.0
    assert parts.approx_kl_sum == 0.0
    assert parts.mismatch_kl_sum == 0.0
    assert parts.tis_sum == 4.0  # weight 1 where the correction is off


def test_loss_parts_importance_weights_only_on_stale_sequences() -> None:
    # Sequence 2 was sampled by a policy that gave its tokens 1/1.5 of the current probability.
    sample = torch.tensor([[LN(0.1)] * 3, [-LN(1.5)] * 3])
    parts = _parts(sample_BT=sample, tis_on_B=torch.tensor([0.0, 1.0]))
    # seq 1: 2 × (-1) unweighted; seq 2: 2 × (+0.5 × 1.5)
    assert parts.loss_sum.item() == pytest.approx(-2.0 + 1.5)
    assert parts.tis_sum == pytest.approx(2.0 + 3.0)
    # mismatch KL(sample ‖ old) per token: exp(old - sample) - (old - sample) - 1
    per_seq1 = math.exp(-LN(0.1)) + LN(0.1) - 1.0
    per_seq2 = 1.5 - LN(1.5) - 1.0
    assert parts.mismatch_kl_sum == pytest.approx(2 * per_seq1 + 2 * per_seq2, rel=1e-5)


def test_loss_parts_kl_penalty() -> None:
    ref = torch.full((2, 3), LN(0.5))  # new = ln 1: k3 = 0.5 + ln 2 - 1 per token
    parts = _parts(ref_BT=ref, kl_coef=0.1)
    k3 = 0.5 + LN(2) - 1.0
    assert parts.kl_sum == pytest.approx(4 * k3, rel=1e-5)
    assert parts.loss_sum.item() == pytest.approx(-1.0 + 0.1 * 4 * k3, rel=1e-5)
    with pytest.raises(ValueError, match="reference"):
        _parts(kl_coef=0.1)


def test_loss_parts_gradient_matches_token_mean_objective() -> None:
    new = torch.zeros(2, 3, requires_grad=True)
    parts = _parts(new_BT=new, old_BT=new.detach())
    (parts.loss_sum / parts.tokens).backward()
    assert new.grad is not None
    expected = torch.tensor([[-1.0, -1.0, 0.0], [0.0, 0.5, 0.5]]) / 4
    assert torch.allclose(new.grad, expected)
