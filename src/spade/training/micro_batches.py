"""Micro-batches of a training step and the per-token pieces of their loss (pure tensor code).

A step's samples are packed into micro-batches of at most ``trainer.micro_batch_tokens`` padded tokens (a
longer sample gets a micro-batch of its own), never mixing roles, so the loss of each role can be reported
on its own. Only the positions whose next token carries the loss have their logits formed
(:func:`logprobs_at`); the sums a micro-batch returns (:class:`~spade.training.grpo.LossParts`) are divided
by the step's total loss-token count (:func:`summarise`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from spade.training.grpo import LossParts, token_logprobs
from spade.types import TrainSample

ROLES = ("agent", "designer")
"""The roles a step trains, in the order their micro-batches run."""


def pack_micro_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Indices grouped so each group's padded size (count × longest) stays within ``budget`` tokens.

    Sequences are taken longest first, so similar lengths share a micro-batch and padding stays small; a
    sequence longer than the budget forms a group of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def role_micro_batches(samples: Sequence[TrainSample], budget: int) -> list[tuple[str, list[TrainSample]]]:
    """``samples`` packed per role (:func:`pack_micro_batches`): ``(role, micro-batch)`` in run order."""
    return [
        (role, [of_role[i] for i in group])
        for role in ROLES
        if (of_role := [s for s in samples if s.role == role])
        for group in pack_micro_batches([len(s.tokens_T) for s in of_role], budget)
    ]


def loss_tokens(sample: TrainSample) -> int:
    """How many of ``sample``'s tokens carry the loss."""
    return sum(sample.mask_T[1:])  # the first token is never predicted


def loss_positions(mask_BT: torch.Tensor) -> torch.Tensor:
    """Positions ``t`` whose next token carries the loss in some row: the only logits the loss needs."""
    keep = mask_BT[:, 1:].any(dim=0).nonzero().squeeze(-1)
    return keep if keep.numel() else torch.zeros(1, dtype=torch.long, device=mask_BT.device)


def logprobs_at(model: Any, ids: torch.Tensor, attention: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of ``ids[:, 1:]`` (``B×(T-1)``), computed at positions ``keep`` only, 0 elsewhere.

    The vocabulary head is a large share of a small model's pass and its ``B×T×V`` logits dominate the
    memory of a step; prompts and observations carry no loss, so their logits are never formed.
    """
    logits = model(input_ids=ids, attention_mask=attention, logits_to_keep=keep, use_cache=False).logits
    picked = token_logprobs(logits, ids[:, 1:].index_select(1, keep))
    out = torch.zeros(ids.shape[0], ids.shape[1] - 1, dtype=picked.dtype, device=picked.device)
    return out.index_copy(1, keep, picked)


def pad(batch: Sequence[TrainSample], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Right-padded ``ids``, ``attention``, ``mask`` and ``sample_logprobs`` of a micro-batch."""
    for s in batch:
        if not len(s.tokens_T) == len(s.mask_T) == len(s.sample_logprobs_T):
            raise ValueError(
                f"TrainSample fields differ in length (tokens {len(s.tokens_T)}, mask {len(s.mask_T)}, "
                f"logprobs {len(s.sample_logprobs_T)}); build samples with TokenStream.train_sample"
            )
    width = max(len(s.tokens_T) for s in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.float32)
    sample_lp = torch.zeros((len(batch), width), dtype=torch.float32)
    for row, s in enumerate(batch):
        n = len(s.tokens_T)
        ids[row, :n] = torch.tensor(s.tokens_T)
        attention[row, :n] = 1
        mask[row, :n] = torch.tensor(s.mask_T, dtype=torch.float32)
        sample_lp[row, :n] = torch.tensor(s.sample_logprobs_T, dtype=torch.float32)
    return ids.to(device), attention.to(device), mask.to(device), sample_lp.to(device)


def summarise(parts: Sequence[LossParts], tokens: int) -> dict[str, float]:
    """The step's ``train/*`` metrics: every micro-batch's sums over the step's ``tokens`` loss tokens."""

    def mean(field: str) -> float:
        return float(sum(getattr(p, field) for p in parts)) / tokens

    return {
        "train/loss": sum(float(p.loss_sum) for p in parts) / tokens,
        "train/pg_loss": mean("pg_sum"),
        "train/kl": mean("kl_sum"),
        "train/clip_frac": mean("clipped_sum"),
        "train/approx_kl": mean("approx_kl_sum"),
        "train/mismatch_kl": mean("mismatch_kl_sum"),
        "train/tis_weight": mean("tis_sum"),
        "train/nll": mean("nll_sum"),
        "train/tokens": float(tokens),
    }
