"""Time and peak memory of one GRPO train step (default: 4 sequences × 256 tokens, LoRA rank 8).

    .venv/bin/python bench/train_step.py [--lora-rank 8] [--seqs 4] [--tokens 256] [--steps 3] [--json]
        [--turns] [--autocast] [--cpu-tiny]

Peak memory is the process's peak RSS on CPU (model, optimiser and activations included) or the peak CUDA
allocation on GPU. With ``--turns N`` the sequences look like N-turn games (8-token replies after 56-token
observations, i.e. 1/8 of the tokens carry the loss), and the step is also timed with the vocabulary head
applied at every position (the trainer before it kept only the loss positions), as the baseline. With
``--autocast`` the same steps are also timed under ``trainer.autocast=bfloat16`` (float32 is the baseline);
``--cpu-tiny`` takes the cpu-tiny preset's trainer settings (LoRA rank 8, gradient checkpointing, compact
heap, 512-token micro-batches). Peak memory is the process's, so it covers every configuration timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics

import torch

from spade.config import CPU_TINY, ModelConfig, TrainerConfig
from spade.training import trainer as trainer_module
from spade.training.trainer import TorchTrainer
from spade.types import TrainSample


def batch(seqs: int, tokens: int, seed: int, *, turns: bool = False) -> list[TrainSample]:
    """Random sequences with a 64-token prompt (mask 0) and the rest as the reply (mask 1); with ``turns``,
    each 64-token block ends with an 8-token reply."""
    rng = random.Random(seed)
    out = []
    for i in range(seqs):
        ids = tuple(rng.randrange(100, 40_000) for _ in range(tokens))
        mask = tuple(int(t % 64 >= 56) if turns else int(t >= 64) for t in range(tokens))
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
    parser.add_argument("--turns", action="store_true", help="multi-turn masks; also time the full head")
    parser.add_argument("--autocast", action="store_true", help="also time the step in bfloat16 autocast")
    parser.add_argument("--cpu-tiny", action="store_true", help="the cpu-tiny preset's trainer settings")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = TrainerConfig(lr=1e-5, lora_rank=args.lora_rank, lora_alpha=2 * max(args.lora_rank, 1))
    if args.cpu_tiny:
        cfg = dataclasses.replace(CPU_TINY.trainer, autocast="off")
    trainer = TorchTrainer(cfg, ModelConfig(model=args.model, device=args.device))

    def timed() -> tuple[float, float]:
        times, peak = [], 0.0
        for step in range(args.steps + 1):  # the first step warms up
            metrics = trainer.train_step(batch(args.seqs, args.tokens, seed=step, turns=args.turns))
            peak = max(peak, metrics["train/peak_mem_mb"])
            if step:
                times.append(metrics["time/train_step_s"])
        return statistics.median(times), peak

    step_s, peak = timed()
    result: dict[str, object] = {
        "device": str(trainer.device),
        "mode": f"lora r{cfg.lora_rank}" if cfg.lora_rank else "full",
        "batch": f"{args.seqs}x{args.tokens}",
        "step_s_median": round(step_s, 2),
        "peak_mem_mb": round(peak, 1),
    }
    if args.turns:  # baseline: the head at every position, as before loss positions were kept
        kept = trainer_module.loss_positions
        trainer_module.loss_positions = lambda mask: torch.arange(mask.shape[1] - 1, device=mask.device)
        try:
            full_s, _ = timed()
        finally:
            trainer_module.loss_positions = kept
        result.update(full_head_step_s_median=round(full_s, 2), speedup=round(full_s / step_s, 2))
    if args.autocast:
        trainer.autocast = torch.bfloat16
        autocast_s, peak = timed()
        result.update(
            autocast_step_s_median=round(autocast_s, 2),
            autocast_speedup=round(step_s / autocast_s, 2),
            peak_mem_mb=round(peak, 1),
        )
    if args.json:
        print(json.dumps(result))
    else:
        print(", ".join(f"{k} {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
