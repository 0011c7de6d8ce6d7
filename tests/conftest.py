"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spade.backends.embedded import resolve_model
from spade.backends.vllm_server import ServerProcess, launch_vllm_server

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
