"""HTTP transport to a fleet of OpenAI-compatible servers: failover, retries, deadlines, outages, probes.

:class:`FleetTransport` posts each request to the live endpoint with the fewest requests in flight
(:mod:`spade.backends.fleet`); a connection failure or a timeout marks the endpoint down and moves the request
at once to another live one (a *failover*, which spends no retry); 408/429/5xx answers are retried with
exponential backoff and seeded jitter; a down endpoint is probed again every ``reprobe_s`` seconds and, once
it answers, brought to the current weights (:mod:`spade.backends.weight_sync`) before it takes requests.
:class:`~spade.backends.openai_server.OpenAIPolicy` builds on it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any

import httpx

from spade.backends.fleet import Endpoint, Fleet, Weights
from spade.backends.openai_parse import RequestFailedError, json_answer, server_message
from spade.backends.weight_sync import sync_endpoint
from spade.errors import SpadeError

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class ModelServerDownError(SpadeError):
    """The server failed every request for ``outage_s`` seconds: an outage, not a bad request.

    Raised (not returned as an error completion) so that a run stops resumably instead of spending its
    steps on errors.
    """


class FleetTransport:
    """Requests to one or more OpenAI-compatible servers (the arguments are
    :class:`~spade.backends.openai_server.OpenAIPolicy`'s)."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        model: str,
        api_key: str,
        timeout_s: float,
        max_concurrency: int,
        retries: int,
        backoff_s: float,
        backoff_max_s: float,
        seed: int,
        outage_s: float,
        reprobe_s: float,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad or not urls:
            raise ValueError(
                f"base_url must be http(s) URLs such as http://127.0.0.1:8000/v1 (got {bad or urls})"
            )
        self.fleet = Fleet(urls, reprobe_s=reprobe_s)
        self.base_url = self.fleet.endpoints[0].url
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._rng = random.Random(seed)
        self.outage_s = outage_s
        self._down_since: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None
        self._weights = Weights("base")

    async def aclose(self) -> None:
        """Close the HTTP connection pool of the current event loop."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST to the least-loaded live endpoint, with failover, retries and deadlines.

        Returns:
            The JSON answer and the weight version of the endpoint that gave it.

        Raises:
            RequestFailedError: the request failed for good. ModelServerDownError: an outage (``outage_s``).
        """
        client, slots = self._session()
        payload = {"model": self.model or await self._served_model(client), **body}
        last, attempt, failovers, backoff = "no attempt made", -1, 0, False
        while (attempt := attempt + 1) <= self.retries or self._outage_goes_on():
            if backoff:
                await asyncio.sleep(self._backoff(attempt))
            backoff = True
            async with slots:
                endpoint = await self._endpoint(client)
                if endpoint is None:
                    last = f"every endpoint is down ({self._down_reasons()})"
                    continue
                response, last, dead = await self._attempt(client, endpoint, path, payload)
            if response is not None:
                self._down_since = None
                return json_answer(response, path), endpoint.version
            if dead:
                self.fleet.mark_down(endpoint)
                if self.fleet.any_up() and failovers < len(self.fleet.endpoints):
                    failovers += 1  # another live endpoint takes it now: no backoff, no retry spent
                    self.fleet.failovers += 1
                    attempt, backoff = attempt - 1, False
        if self.outage_s > 0:
            raise ModelServerDownError(
                f"every model server ({', '.join(e.url for e in self.fleet.endpoints)}) failed every request "
                f"for {self.outage_s:g} s (model.openai.outage_s; last: {last})"
            )
        raise RequestFailedError(f"{path} failed after {attempt} attempts: {last}")

    async def _attempt(
        self, client: httpx.AsyncClient, endpoint: Endpoint, path: str, payload: dict[str, Any]
    ) -> tuple[httpx.Response | None, str, bool]:
        """One POST: (the answer or None, why it failed, whether the endpoint looks dead)."""
        endpoint.in_flight += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client.post(endpoint.url + path, json=payload)
        except TimeoutError:
            endpoint.last_error = f"{endpoint.url}: no answer within {self.timeout_s:g} s (request_timeout_s)"
            return None, endpoint.last_error, True
        except httpx.TransportError as exc:
            endpoint.last_error = f"{endpoint.url}: {type(exc).__name__}: {exc or 'connection failed'}"
            return None, endpoint.last_error, True
        finally:
            endpoint.in_flight -= 1
        if response.status_code in RETRY_STATUS:
            return None, f"{endpoint.url}: HTTP {response.status_code}: {server_message(response)}", False
        endpoint.served += 1
        return response, "", False

    async def _endpoint(self, client: httpx.AsyncClient) -> Endpoint | None:
        """The live endpoint to use, after probing the down ones that are due (all of them when none is up)."""
        for endpoint in self.fleet.due(all_down=not self.fleet.any_up()):
            await self._probe(client, endpoint)
        return self.fleet.pick()

    async def _probe(self, client: httpx.AsyncClient, endpoint: Endpoint) -> None:
        """GET /models on a down endpoint; if it answers, bring it to the current weights and mark it up."""
        endpoint.probing = True
        self.fleet.probes += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client.get(endpoint.url + "/models")
            listed = {str(m.get("id")) for m in json_answer(response, "/models").get("data") or []}
            await asyncio.to_thread(self._sync, endpoint, listed)
        except (TimeoutError, httpx.TransportError, RequestFailedError) as exc:
            endpoint.last_error = f"{endpoint.url}: {type(exc).__name__}: {exc or 'no answer'}"
            self.fleet.mark_down(endpoint)
        else:
            self.fleet.mark_up(endpoint)
        finally:
            endpoint.probing = False

    def _down_reasons(self) -> str:
        return "; ".join(e.last_error or f"{e.url}: being probed" for e in self.fleet.endpoints)

    def _outage_goes_on(self) -> bool:
        """After a request's own retries: keep retrying while the outage is younger than ``outage_s``."""
        if self.outage_s <= 0:
            return False
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        return now - self._down_since < self.outage_s

    async def _served_model(self, client: httpx.AsyncClient) -> str:
        """The first model the first answering endpoint lists."""
        errors = []
        for endpoint in self.fleet.endpoints:
            try:
                async with asyncio.timeout(self.timeout_s):
                    response = await client.get(endpoint.url + "/models")
            except (TimeoutError, httpx.TransportError) as exc:
                errors.append(f"{endpoint.url}/models: {type(exc).__name__}: {exc}")
                continue
            models = json_answer(response, "/models").get("data") or []
            if not models or not isinstance(models[0], dict) or "id" not in models[0]:
                raise RequestFailedError(
                    f"{endpoint.url}/models lists no model; set model.openai.served_model"
                )
            self.model = str(models[0]["id"])
            return self.model
        raise RequestFailedError(
            f"cannot list models ({'; '.join(errors)}); is the server up? (or set model.openai.served_model "
            "to skip the lookup)"
        )

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The connection pool and concurrency slots of the running loop (one pair per event loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._slots is None or self._loop is not loop:
            slots = self.max_concurrency * len(self.fleet.endpoints)
            self._loop = loop
            self._client = httpx.AsyncClient(
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=slots),
            )
            self._slots = asyncio.Semaphore(slots)
        return self._client, self._slots

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        return float(delay * (0.5 + 0.5 * self._rng.random()))

    def _sync(self, endpoint: Endpoint, listed: set[str] | None) -> None:
        sync_endpoint(endpoint, self._weights, listed, api_key=self.api_key, timeout_s=self.timeout_s)
