"""One rank of the two-process trainer test (run by ``accelerate launch``; see test_distributed.py).

Rank 0 drives a :class:`~spade.training.distributed.LeaderTrainer` (one update, one checkpoint, stop) and writes the
summed gradient it stepped with; the other rank runs :func:`~spade.training.distributed.follow`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from spade.config import ModelConfig, TrainerConfig
from spade.training.distributed import LeaderTrainer, follow, rank
from spade.training.trainer import TorchTrainer
from spade.types import TrainSample

CFG = TrainerConfig(lr=1e-2, lora_rank=4, lora_alpha=8, micro_batch_tokens=40, max_grad_norm=1e6)


def samples() -> list[TrainSample]:
    """Six samples of mixed length, advantage and staleness (both roles)."""

    def one(n: int, adv: float, role: str = "agent", staleness: int = 0) -> TrainSample:
        tokens = tuple(100 + (7 * i + n) % 50 for i in range(n))
        mask = (0,) * 4 + (1,) * (n - 4)
        return TrainSample(tokens, mask, tuple(-3.0 * m for m in mask), adv, role, staleness)  # type: ignore[arg-type]

    return [one(12, 1.0), one(20, -1.0, staleness=2), one(9, 0.5), one(16, -0.5), one(14, 0.8, "designer"),
            one(11, -0.8, "designer")]  # fmt: skip


def record_gradients(trainer: TorchTrainer) -> dict[str, torch.Tensor]:
    """Fill the returned dict with each trainable gradient (by name) when the optimiser steps."""
    names = {id(p): n for n, p in trainer._unwrapped().named_parameters()}
    grads: dict[str, torch.Tensor] = {}
    inner = trainer._inner_optimizer()
    step = inner.step

    def capture(*args: Any, **kwargs: Any) -> Any:
        for group in inner.param_groups:
            for p in group["params"]:
                grads[names[id(p)]] = p.grad.detach().clone()
        return step(*args, **kwargs)

    inner.step = capture  # type: ignore[method-assign]
    return grads


def main(model_dir: str, out: str) -> None:
    trainer = TorchTrainer(CFG, ModelConfig(model=model_dir, device="cpu"), seed=0, use_accelerate=True)
    if rank() != 0:
        follow(trainer)
        return
    grads = record_gradients(trainer)
    leader = LeaderTrainer(trainer)
    metrics = leader.train_step(samples())
    leader.save(Path(out) / "ckpt")
    leader.stop()
    params = {n: p.detach().clone() for n, p in trainer._trainable()}
    world = trainer.accelerator.num_processes if trainer.accelerator is not None else 1
    torch.save({"grads": grads, "params": params, "metrics": metrics, "world": world}, Path(out) / "rank0.pt")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
