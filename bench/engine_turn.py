"""What one turn of a multi-turn play costs the vLLM engine, by the length of the conversation so far.

A turn of a play sends the whole conversation again: the prefix cache supplies the earlier turns, the engine
computes the rest (the new observation and the last, partly filled, KV block) and then decodes the reply. For
``--batch`` conversations of ``--context`` cached tokens each (random token ids), it measures:

- prefill: ``--new`` more tokens per conversation, one sampled token (tokens computed per second);
- decode: milliseconds per engine step at that batch, from the same call with ``--decode`` more tokens.

Each is the median of ``--repeats`` rounds after one warm-up round, with cpu-tiny's engine settings (block
size, KV cache, batched tokens, dtype ``auto``).

    python bench/engine_turn.py [--json] [--contexts 64 300 700] [--batch 16] [--new 48] [--decode 12]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from spade.backends.vllm_engine import VLLMPolicy
from spade.config import CPU_TINY
from spade.types import SamplingParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[64, 300, 700])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new", type=int, default=48, help="tokens computed per conversation and turn")
    parser.add_argument("--decode", type=int, default=12, help="reply tokens of the decode measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    policy = VLLMPolicy.from_config(CPU_TINY.model)
    rng = random.Random(0)

    def tokens(n: int) -> list[int]:
        return [rng.randrange(100, 40_000) for _ in range(n)]

    def timed(prompts: list[list[int]], max_tokens: int) -> tuple[float, int]:
        """Seconds of one call, and its longest reply (a reply may end early on an end-of-turn token)."""
        params = SamplingParams(temperature=0.7, max_tokens=max_tokens)
        start = time.perf_counter()
        out = policy.generate(prompts, params)
        elapsed = time.perf_counter() - start
        failed = [c.error for c in out if c.finish_reason == "error"]
        if failed:
            raise RuntimeError(f"{len(failed)} failed completions, e.g. {failed[0]}")
        return elapsed, max(len(c.token_ids_T) for c in out)

    figures: dict[str, float] = {}
    for context in args.contexts:
        cached = [tokens(context) for _ in range(args.batch)]
        timed(cached, 1)  # into the prefix cache
        prefill, step = [], []
        for rep in range(args.repeats + 1):
            one, _ = timed([c + tokens(args.new) for c in cached], 1)
            full, longest = timed([c + tokens(args.new) for c in cached], args.decode + 1)
            if rep and longest > 1:
                prefill.append(args.batch * args.new / one)
                step.append((full - one) / (longest - 1) * 1000)
        rate, ms = round(statistics.median(prefill), 1), round(statistics.median(step), 1)
        figures[f"prefill_tok_s_ctx{context}"], figures[f"decode_step_ms_ctx{context}"] = rate, ms
        if not args.json:
            print(
                f"context {context:5d}: prefill {rate:7.1f} tok/s, decode {ms:6.1f} ms/step at batch {args.batch}"
            )
    policy.close()
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
