"""Weight sync of one vLLM OpenAI server: hot-load a LoRA adapter or reload a full model folder.

Used by :class:`~spade.backends.openai_server.OpenAIPolicy` for every endpoint of its fleet, after each update
and when a probe brings a down endpoint back. Control requests are synchronous (weight sync happens between
sampling phases). The server needs ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` for
adapters and ``VLLM_SERVER_DEV_MODE=1`` for full weights (``/collective_rpc``, ``/reset_prefix_cache``); it
reads the folder itself, so it must see the same filesystem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from spade.backends.fleet import Endpoint, Weights
from spade.backends.openai_parse import RequestFailedError, server_message

ADAPTER_PREFIX = "spade-adapter-"
"""Adapters loaded by spade are named ``spade-adapter-<version>``; others on the server are left alone."""


class EndpointUnreachableError(RequestFailedError):
    """A control request that got no answer: the endpoint is down, not refusing."""


def weights_at(path: Path, version: int) -> Weights:
    """What ``path`` holds, as the fleet's ``version``-th weights.

    Raises:
        FileNotFoundError: the folder holds neither an adapter nor a model.
    """
    if (path / "adapter_config.json").is_file():
        return Weights("adapter", path, f"{ADAPTER_PREFIX}{version}", version)
    if (path / "config.json").is_file():
        return Weights("full", path, "", version)
    raise FileNotFoundError(
        f"{path} holds neither adapter_config.json (a LoRA adapter) nor config.json (a model folder); pass a "
        "folder written by Trainer.export_weights"
    )


def sync_endpoint(
    endpoint: Endpoint, weights: Weights, listed: set[str] | None, *, api_key: str, timeout_s: float
) -> None:
    """Bring ``endpoint`` to ``weights`` and record it there.

    Args:
        endpoint: the server.
        weights: what it must serve.
        listed: the model ids it lists (a probe of a server that may have restarted), or None (a live one,
            whose state this process knows).
        api_key: bearer token.
        timeout_s: deadline of each control request.

    Raises:
        EndpointUnreachableError: no answer. RequestFailedError: the server refused.
    """

    def control(path: str, body: dict[str, Any]) -> None:
        post(endpoint, path, body, api_key=api_key, timeout_s=timeout_s)

    if weights.kind == "adapter" and (listed is None or weights.name not in listed):
        control("/v1/load_lora_adapter", {"lora_name": weights.name, "lora_path": str(weights.path)})
    elif weights.kind == "full":  # also on every probe: a restarted server is back at its start-up weights
        control(
            "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(weights.path)}}
        )
        control("/reset_prefix_cache", {})
    stale = {endpoint.adapter} if listed is None else {m for m in listed if m.startswith(ADAPTER_PREFIX)}
    for name in sorted(stale - {"", weights.name}):  # the new weights replace the previous adapter
        control("/v1/unload_lora_adapter", {"lora_name": name})
    endpoint.adapter, endpoint.version = weights.name, weights.version


def post(endpoint: Endpoint, path: str, body: dict[str, Any], *, api_key: str, timeout_s: float) -> None:
    """One control request to the server root.

    Raises:
        EndpointUnreachableError: no answer. RequestFailedError: the server refused (404: not enabled).
    """
    url = endpoint.root + path
    try:
        response = httpx.post(
            url, json=body, timeout=timeout_s, headers={"Authorization": f"Bearer {api_key}"}
        )
    except httpx.TransportError as exc:
        raise EndpointUnreachableError(f"{url}: {type(exc).__name__}: {exc}; is the server up?") from None
    if response.status_code == 404:
        raise RequestFailedError(
            f"{url} is not served: start vLLM with --enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "
            "and VLLM_SERVER_DEV_MODE=1 (spade.backends.vllm_server.launch_vllm_server does)"
        )
    if response.status_code >= 400:
        raise RequestFailedError(f"{url}: HTTP {response.status_code}: {server_message(response)}")
