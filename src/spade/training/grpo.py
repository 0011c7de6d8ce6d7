"""Pure math of the GRPO update: token log-probabilities, PPO-clip loss, KL, importance sampling, metrics.

Shape suffixes: ``_B`` sequences of a (micro-)batch, ``_T`` tokens, ``_V`` vocabulary. Every per-token tensor
here is aligned with the *targets*: entry ``t`` is about token ``t + 1`` of the sequence predicted at ``t``.

Three log-probabilities of a sampled token appear:

- ``sample``: recorded by the engine at sampling time (raw model, temperature 1; see ``spade.backends.hf``);
- ``old``: the trainer's own forward pass at the start of the update (before the optimiser step);
- ``new``: the trainer's forward pass being differentiated.

The PPO ratio is ``exp(new - old)``; the truncated importance-sampling (TIS) weight ``min(exp(old - sample),
cap)`` corrects for the gap between the policy that sampled and the one being updated (stale samples, or
engine/trainer numerical mismatch). Aggregation is the token mean over all loss tokens of the whole step
(every micro-batch divides its token sum by the step's total token count), so long sequences weigh more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

KL_CLAMP = 10.0
"""Per-token bound of the k3 KL estimate (as in common GRPO implementations); keeps rare outliers finite."""


@dataclass(frozen=True, slots=True)
class ClipConfig:
    """Asymmetric PPO clip range: the ratio is kept in ``[1 - low, 1 + high]``."""

    low: float = 0.2
    high: float = 0.28


def token_logprobs(logits_BTV: Tensor, targets_BT: Tensor, chunk: int = 1024) -> Tensor:
    """Log-probabilities of ``targets`` under ``logits`` (raw model, temperature 1).

    Works in sequence chunks so no second full ``B×T×V`` float tensor is materialised.
    """
    out = []
    for start in range(0, logits_BTV.shape[1], chunk):
        piece = logits_BTV[:, start : start + chunk].float()
        lse = torch.logsumexp(piece, dim=-1)
        picked = piece.gather(-1, targets_BT[:, start : start + chunk].unsqueeze(-1)).squeeze(-1)
        out.append(picked - lse)
    return torch.cat(out, dim=1)


def ppo_clip_terms(
    new_BT: Tensor, old_BT: Tensor, advantages_B: Tensor, clip: ClipConfig
) -> tuple[Tensor, Tensor]:
    """Per-token clipped surrogate loss (to minimise) and where the clip is active.

    ``loss = -min(r·A, clip(r, 1 - low, 1 + high)·A)`` with ``r = exp(new - old)``.

    Returns:
        ``(loss_BT, clipped_BT)``; ``clipped_BT`` is 1.0 where the clipped branch is the minimum (the token's
        gradient is zero).
    """
    ratio = torch.exp(new_BT - old_BT)
    adv = advantages_B.unsqueeze(-1).to(ratio.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip.low, 1.0 + clip.high) * adv
    loss = -torch.minimum(unclipped, clipped)
    active = (clipped < unclipped).to(ratio.dtype)
    return loss, active


def k3_kl(new_BT: Tensor, ref_BT: Tensor) -> Tensor:
    """Low-variance (k3) estimate of KL(new ‖ ref) per token: ``exp(ref - new) - (ref - new) - 1`` (≥ 0)."""
    log_ratio = ref_BT - new_BT
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, max=KL_CLAMP)


def tis_weights(old_BT: Tensor, sample_BT: Tensor, cap: float) -> Tensor:
    """Truncated importance weights ``min(exp(old - sample), cap)`` (no gradient)."""
    return torch.clamp(torch.exp(old_BT - sample_BT), max=cap).detach()


def importance_weights(old_BT: Tensor, sample_BT: Tensor, cap: float, on_B: Tensor) -> Tensor:
    """:func:`tis_weights` for the sequences where ``on_B`` is 1.0, weight 1 for those where it is 0.0."""
    weights_BT = tis_weights(old_BT, sample_BT, cap)
    on = on_B.unsqueeze(-1).to(weights_BT.dtype)
    return on * weights_BT + (1.0 - on)


def masked_sum(x_BT: Tensor, mask_BT: Tensor) -> Tensor:
    """Sum of ``x`` over tokens where ``mask`` is 1."""
    return (x_BT * mask_BT).sum()


def masked_mean(x_BT: Tensor, mask_BT: Tensor) -> Tensor:
    """Mean of ``x`` over tokens where ``mask`` is 1 (0 when the mask is empty)."""
    return masked_sum(x_BT, mask_BT) / mask_BT.sum().clamp(min=1.0)


@dataclass(frozen=True, slots=True)
class LossParts:
    """Token sums of one micro-batch; divide by the step's loss-token count for the token mean."""

    loss_sum: Tensor
    """Differentiable: policy loss (+ ``kl_coef`` × KL) summed over loss tokens."""
    pg_sum: float
    kl_sum: float
    clipped_sum: float
    approx_kl_sum: float
    """k3 estimate of KL(old ‖ new) summed (0 at the first and only forward pass of a step)."""
    mismatch_kl_sum: float
    """k3 estimate of KL(sample ‖ old) summed: how far the sampling engine was from the trainer."""
    tis_sum: float
    nll_sum: float
    """Negative log-likelihood of the loss tokens under the trainer, summed (the warm start's loss)."""
    tokens: float


def grpo_loss_parts(
    new_BT: Tensor,
    old_BT: Tensor,
    sample_BT: Tensor,
    advantages_B: Tensor,
    mask_BT: Tensor,
    *,
    clip: ClipConfig,
    tis_cap: float,
    tis_on_B: Tensor,
    ref_BT: Tensor | None = None,
    kl_coef: float = 0.0,
    weights_B: Tensor | None = None,
) -> LossParts:
    """The GRPO loss of one micro-batch as token sums.

    Args:
        new_BT: log-probabilities being differentiated.
        old_BT, sample_BT: the trainer's log-probabilities before the update (no gradient); at sampling.
        advantages_B, mask_BT: one advantage per sequence; 1.0 on loss tokens.
        clip, tis_cap: PPO clip range; truncation of the importance weight.
        tis_on_B: 1.0 for sequences that get the importance correction (stale samples), 0.0 for weight 1.
        ref_BT, kl_coef: reference log-probabilities (needed when ``kl_coef > 0``); weight of the k3 KL.
        weights_B: a weight per sequence on its terms of ``loss_sum`` (e.g. 1 / its loss tokens for a
            per-sample mean); the other sums stay unweighted token sums. None: 1 each.
    """
    pg_BT, clipped_BT = ppo_clip_terms(new_BT, old_BT, advantages_B, clip)
    weights_BT = importance_weights(old_BT, sample_BT, tis_cap, tis_on_B)
    loss_BT = weights_BT * pg_BT
    kl_BT = torch.zeros_like(new_BT)
    if kl_coef > 0.0:
        if ref_BT is None:
            raise ValueError("kl_coef > 0 needs reference log-probabilities (ref_BT)")
        kl_BT = k3_kl(new_BT, ref_BT)
        loss_BT = loss_BT + kl_coef * kl_BT
    with torch.no_grad():
        approx = k3_kl(old_BT, new_BT.detach())
        mismatch = k3_kl(sample_BT, old_BT)
    weighted_BT = loss_BT if weights_B is None else loss_BT * weights_B[:, None]
    return LossParts(
        loss_sum=masked_sum(weighted_BT, mask_BT),
        pg_sum=float(masked_sum(pg_BT.detach(), mask_BT)),
        kl_sum=float(masked_sum(kl_BT.detach(), mask_BT)),
        clipped_sum=float(masked_sum(clipped_BT, mask_BT)),
        approx_kl_sum=float(masked_sum(approx, mask_BT)),
        mismatch_kl_sum=float(masked_sum(mismatch, mask_BT)),
        tis_sum=float(masked_sum(weights_BT, mask_BT)),
        nll_sum=-float(masked_sum(new_BT.detach(), mask_BT)),
        tokens=float(mask_BT.sum()),
    )
