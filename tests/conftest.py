"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spade.backends.embedded import resolve_model, write_tiny_model
from spade.backends.vllm_server import ServerProcess, launch_vllm_server

# -- torch models -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Run a module's torch work on one thread (tiny matmuls on 2 shared cores: no OpenMP spin contention)."""
    import torch  # noqa: PLC0415 - only the modules that use torch pay for the import

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama folder (fast real-model tests)."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny"))


# -- vLLM OpenAI server (openai backend tests) ------------------------------------------------------------


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real vLLM OpenAI server on the embedded model for the whole session (LoRA + tool parsing on).

    Tests that use it carry ``xdist_group("vllm")`` so that under ``-n`` they share one worker, and thus
    one server; the server is stopped at the end of the session.
    """
    log = Path(tmp_path_factory.mktemp("vllm-server")) / "server.log"
    server = launch_vllm_server(resolve_model("embedded"), log, kv_cache_gib=1.0, max_lora_rank=16)
    try:
        yield server
    finally:
        server.stop()
