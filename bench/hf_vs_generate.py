"""Throughput of the hf Policy against raw ``model.generate`` on the same model, prompts and seed.

Both sides sample with the same temperature and torch seed, so they draw the same tokens and do the same
work; runs are interleaved and the median of the repeats is reported (the machine may be shared).

    .venv/bin/python bench/hf_vs_generate.py --batches 1 8 32 --max-tokens 64 [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import torch

from spade.backends.embedded import resolve_model
from spade.backends.hf import HFPolicy
from spade.types import SamplingParams

QUESTIONS = [
    "What is the capital of France?",
    "Write a short poem about rain.",
    "Explain what a prime number is.",
    "List three fruits.",
    "How do I boil an egg?",
    "Tell me a fun fact about cats.",
    "What is 17 times 3?",
    "Describe the colour blue to someone who cannot see.",
]


def _raw(policy: HFPolicy, prompts: list[list[int]], temperature: float, max_tokens: int, seed: int) -> int:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt)
        mask[row, width - len(prompt) :] = 1
    torch.manual_seed(seed)
    with torch.inference_mode():
        out = policy.model.generate(
            input_ids=ids.to(policy.device),
            attention_mask=mask.to(policy.device),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_tokens,
            eos_token_id=policy.stop_ids,
            pad_token_id=policy.pad_id,
        )
    generated = out[:, width:].tolist()
    return sum(_until_stop(row, policy.stop_ids) for row in generated)


def _until_stop(row: list[int], stops: list[int]) -> int:
    return next((k + 1 for k, t in enumerate(row) if t in stops), len(row))


def measure(
    policy: HFPolicy, batch: int, max_tokens: int, repeats: int, temperature: float
) -> dict[str, Any]:
    """Median tokens/s of both paths at one batch size."""
    chats = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(batch)]
    # Sorted by length as HFPolicy orders a batch, so that equal seeds draw equal tokens on both paths.
    prompts = sorted((policy.template.render(c, add_generation_prompt=True) for c in chats), key=len)
    raw_rates, hf_rates = [], []
    same_work = True
    for rep in range(repeats + 1):  # the first round warms up
        start = time.perf_counter()
        raw_tokens = _raw(policy, prompts, temperature, max_tokens, seed=rep * 1_000_003)
        raw_s = time.perf_counter() - start
        params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=rep)
        start = time.perf_counter()
        hf_tokens = sum(len(c.token_ids_T) for c in policy.generate(prompts, params))
        hf_s = time.perf_counter() - start
        same_work = same_work and raw_tokens == hf_tokens
        if rep:
            raw_rates.append(raw_tokens / raw_s)
            hf_rates.append(hf_tokens / hf_s)
    raw, hf = statistics.median(raw_rates), statistics.median(hf_rates)
    return {
        "batch": batch,
        "raw_tok_s": round(raw, 1),
        "hf_tok_s": round(hf, 1),
        "ratio": round(hf / raw, 3),
        "same_tokens": same_work,
    }


def main() -> None:
    """Parse flags, run, print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    policy = HFPolicy(resolve_model(args.model), device=args.device, max_batch=max(args.batches))
    rows = [measure(policy, b, args.max_tokens, args.repeats, args.temperature) for b in args.batches]
    if args.json:
        print(json.dumps({"device": str(policy.device), "max_tokens": args.max_tokens, "results": rows}))
        return
    print(f"device {policy.device}, max_tokens {args.max_tokens}, median of {args.repeats}")
    for r in rows:
        print(
            f"batch {r['batch']:>3}: raw generate {r['raw_tok_s']:>7} tok/s, "
            f"hf policy {r['hf_tok_s']:>7} tok/s, ratio {r['ratio']}"
        )


if __name__ == "__main__":
    main()
