"""Whether a run's model servers answer, checked before anything starts: a server that is down is one line
with the fix, not an outage wait later."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from spade.errors import SetupError

SERVER_CHECK_TIMEOUT_S = 5.0


def check_servers(base_urls: Sequence[str]) -> None:
    """Every endpoint of a generation fleet answers (see :func:`check_server`); at least one is given."""
    if not base_urls:
        raise SetupError(
            "model.backend 'openai' needs a server URL: --model.openai.base-urls http://HOST:PORT/v1"
        )
    for url in base_urls:
        check_server(url)


def check_server(base_url: str) -> None:
    """An OpenAI-compatible server answers ``GET {base_url}/models``."""
    if not base_url.startswith(("http://", "https://")):
        raise SetupError(
            f"--model.openai.base-urls: {base_url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1"
        )
    url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, timeout=SERVER_CHECK_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise SetupError(
            f"no model server answers at {base_url} ({type(exc).__name__}): start the server first "
            "(see docs/running.md) or fix --model.openai.base-urls"
        ) from None
    if response.status_code >= 400:
        raise SetupError(
            f"the model server at {base_url} answered GET /models with HTTP {response.status_code}: "
            "check --model.openai.base-urls (each ends in /v1) and the server's log"
        )
