"""Time and peak memory of one GRPO train step (default: 4 sequences × 256 tokens, LoRA rank 8).

    .venv/bin/python bench/train_step.py [--lora-rank 8] [--seqs 4] [--tokens 256] [--steps 3] [--json]

Peak memory is the process's peak RSS on CPU (model, optimiser and activations included) or the peak CUDA
allocation on GPU.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

from spade.backends.trainer import TorchTrainer
from spade.config import ModelConfig, TrainerConfig
from spade.types import TrainSample


def batch(seqs: int, tokens: int, seed: int) -> list[TrainSample]:
    """Random sequences with a 64-token prompt (mask 0) and the rest as the reply (mask 1)."""
    rng = random.Random(seed)
    out = []
    for i in range(seqs):
        ids = tuple(rng.randrange(100, 40_000) for _ in range(tokens))
        mask = tuple(int(t >= 64) for t in range(tokens))
        out.append(TrainSample(ids, mask, tuple(-2.0 * m for m in mask), (-1.0) ** i, "agent"))
    return out


def main() -> None:
    """Parse flags, run, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--seqs", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = TrainerConfig(lr=1e-5, lora_rank=args.lora_rank, lora_alpha=2 * max(args.lora_rank, 1))
    trainer = TorchTrainer(cfg, ModelConfig(model=args.model, device=args.device))
    times, peak = [], 0.0
    for step in range(args.steps + 1):  # the first step warms up
        metrics = trainer.train_step(batch(args.seqs, args.tokens, seed=step))
        peak = max(peak, metrics["train/peak_mem_mb"])
        if step:
            times.append(metrics["time/train_step_s"])
    result = {
        "device": str(trainer.device),
        "mode": f"lora r{args.lora_rank}" if args.lora_rank else "full",
        "batch": f"{args.seqs}x{args.tokens}",
        "step_s_median": round(statistics.median(times), 2),
        "peak_mem_mb": round(peak, 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(", ".join(f"{k} {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
