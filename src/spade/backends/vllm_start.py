"""Starting the vLLM engine (:mod:`spade.backends.vllm_engine`): its arguments, where its threads run, and
whether it runs in worker processes or in this one."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BIND_VAR = "VLLM_CPU_OMP_THREADS_BIND"
PROCESSES_VAR = "VLLM_ENABLE_V1_MULTIPROCESSING"
LOADER_LOG = "vllm.model_executor.models.utils"


def llm_kwargs(
    model_dir: Path,
    *,
    dtype: str,
    max_context: int,
    max_batch: int,
    seed: int,
    max_lora_rank: int,
    kv_cache_gib: float,
    block_size: int,
    max_batched_tokens: int,
) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments of a policy (the optional ones only when set)."""
    kwargs: dict[str, Any] = {
        "model": str(model_dir),
        "dtype": dtype,
        "max_model_len": max_context,
        "max_num_seqs": max_batch,
        "seed": seed,
        "logprobs_mode": "raw_logprobs",
    }
    if kv_cache_gib > 0:
        kwargs["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
    if block_size > 0:
        kwargs["block_size"] = block_size
    if max_batched_tokens > 0:
        kwargs["max_num_batched_tokens"] = max_batched_tokens
    if max_lora_rank > 0:
        kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
    return kwargs


@contextlib.contextmanager
def cpu_binding(cpu_bind: str) -> Iterator[None]:
    """Bind the OpenMP threads of the engine processes started inside to ``cpu_bind``'s cores.

    vllm-cpu reads ``VLLM_CPU_OMP_THREADS_BIND`` in the processes it starts; the variable is set for the
    start only. ``auto`` leaves the environment (and a binding the user exported) as it is.
    """
    if cpu_bind == "auto":
        yield
        return
    cores = os.sched_getaffinity(0)
    value = ",".join(str(c) for c in sorted(cores)) if cpu_bind == "all" else cpu_bind
    with env_set(BIND_VAR, value):
        yield


@contextlib.contextmanager
def env_set(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` inside the block; the previous value (or its absence) afterwards."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            del os.environ[name]
        else:
            os.environ[name] = saved


@contextlib.contextmanager
def inside_this_process() -> Iterator[None]:
    """Start the engine inside: it runs in this process, which keeps its own torch threading.

    vllm reads ``VLLM_ENABLE_V1_MULTIPROCESSING`` while it starts, then caches every ``VLLM_*`` variable and
    freezes the garbage collector's heap (right for a serving process); both are undone afterwards, so engines
    started later read the environment afresh and this process's garbage is still collected.
    """
    import gc  # noqa: PLC0415

    import torch  # noqa: PLC0415
    import vllm.envs  # noqa: PLC0415

    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    try:
        with env_set(PROCESSES_VAR, "0"):
            yield
    finally:
        vllm.envs.disable_envs_cache()
        gc.unfreeze()
        torch.set_num_threads = set_threads  # the worker replaces it with a no-op that only warns
        set_threads(threads)


def model_limit(model_dir: Path, default: int) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    return int(config.get("max_position_embeddings") or default)


def quiet_narrowing(record: logging.LogRecord) -> bool:
    """Drop vllm's "Attempted to load weight ... with dtype" warnings: loading float32 files into a bfloat16
    engine is what ``model.vllm.dtype`` asks for, and vllm says so once per tensor (≈120 lines a load)."""
    return not str(record.msg).startswith("Attempted to load weight %s with dtype")
