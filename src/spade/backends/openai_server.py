"""The OpenAI-compatible server Policy (vLLM, SGLang, llama.cpp server, hosted APIs).

Two ways to sample:

- :meth:`OpenAIPolicy.sample` (the :class:`~spade.types.Policy` contract, token in / token out): each prompt
  goes to ``/v1/completions`` as a list of token ids (the OpenAI API accepts token arrays). With
  ``token_ids=True`` the request also asks for the sampled ids (vLLM's ``return_token_ids``, and
  ``return_tokens_as_token_ids`` as a fallback) so completions carry exact ids; log-probabilities of the
  sampled tokens come from ``logprobs=0``. A server that returns neither gives text-only completions (the
  token stream re-tokenises them and marks itself inexact).
- :meth:`OpenAIPolicy.chat` for servers without token endpoints (a frozen designer, evaluation):
  ``/v1/chat/completions`` with messages and tool schemas; tool calls come from the server's parsed
  ``tool_calls`` when it sends them, else from the reply text (:mod:`spade.backends.toolcalls`).

Several servers (a generation fleet, ``base_urls``) share the work: each request goes to the live endpoint
with the fewest requests in flight (:mod:`spade.backends.fleet`). A connection failure or a timeout marks
the endpoint down and the request moves at once to another live one (a *failover*, which spends no retry);
a down endpoint is probed again every ``reprobe_s`` seconds and, once it answers, brought to the current
weights before it takes requests. Counters are in :meth:`OpenAIPolicy.metrics` (``fleet/...``).

Failure is data: a request that cannot be completed yields a completion with ``finish_reason="error"`` and
a message, never a raise and never a hang. Each attempt has a hard deadline (``timeout_s``); connection
failures, timeouts and 408/429/5xx answers are retried ``retries`` times with exponential backoff and
seeded jitter; other 4xx answers (a prompt longer than the context window, an unknown model) fail at once
with the server's message. At most ``max_concurrency`` requests per endpoint are in flight. When every
endpoint is down, each attempt probes them, and with ``outage_s > 0`` requests wait out an outage of up to
``outage_s`` seconds before :class:`ModelServerDownError` stops the run resumably.

Weight sync (:meth:`OpenAIPolicy.load_weights`) reaches every live endpoint (vLLM servers started like
:func:`spade.backends.vllm_server.launch_vllm_server`): a LoRA adapter is hot-loaded under a new name (later
requests use it, the previous one is unloaded); a full model folder is reloaded in place through the
development endpoint ``/collective_rpc`` and the prefix cache is reset. Servers read the folder themselves,
so they must see the same filesystem (same machine or a shared mount). Every completion carries the
``policy_version`` (weight loads applied) of the endpoint that sampled it; an endpoint that missed a load is
down until it has caught up, so every completion is sampled at the newest version.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from spade.backends.fleet import Endpoint, Fleet, Weights
from spade.backends.openai_parse import (
    ChatReply,
    RequestFailedError,
    chat_reply,
    completion_from_choice,
    failed,
    first_choice,
    json_answer,
    server_message,
)
from spade.backends.weight_sync import sync_endpoint, weights_at
from spade.config import ModelConfig
from spade.errors import SpadeError
from spade.types import ChatTemplate, Completion, Message, SamplingParams, ToolSchema

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})

__all__ = ["ChatReply", "ModelServerDownError", "OpenAIPolicy", "RequestFailedError"]


class ModelServerDownError(SpadeError):
    """The server failed every request for ``outage_s`` seconds: an outage, not a bad request.

    Raised (not returned as an error completion) so that a run stops resumably instead of spending its
    steps on errors.
    """


class OpenAIPolicy:
    """:class:`~spade.types.Policy` over one or more OpenAI-compatible HTTP servers (see module docstring).

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``, or several (a fleet).
        template: the chat template of the served model (renders prompts for :meth:`sample`); may be None
            for chat-only use.
        model: model name to request; empty: the first model the server lists.
        api_key: bearer token (local servers accept any).
        timeout_s: hard deadline of one attempt.
        max_concurrency: requests in flight at once per endpoint.
        retries: further attempts after a retryable failure.
        backoff_s: first backoff; doubles per attempt up to ``backoff_max_s``, with jitter.
        token_ids: ask for sampled token ids (vLLM extensions); off for servers that reject unknown fields.
        max_context: context window used to cap ``max_tokens`` and reject over-long prompts locally (0: leave
            it to the server).
        seed: seed of per-request seeds for calls without ``params.seed`` and of the backoff jitter.
        outage_s: 0: a request that still fails after its retries is an error completion. > 0: it is
            retried with backoff while the server has failed every request for less than ``outage_s``
            seconds, then :class:`ModelServerDownError` is raised; any success ends the outage.
        reprobe_s: a down endpoint is probed again after this many seconds.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        template: ChatTemplate | None = None,
        model: str = "",
        api_key: str = "EMPTY",
        timeout_s: float = 120.0,
        max_concurrency: int = 16,
        retries: int = 3,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        token_ids: bool = True,
        max_context: int = 0,
        seed: int = 0,
        outage_s: float = 0.0,
        reprobe_s: float = 15.0,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad or not urls:
            raise ValueError(
                f"base_url must be http(s) URLs such as http://127.0.0.1:8000/v1 (got {bad or urls})"
            )
        self.fleet = Fleet(urls, reprobe_s=reprobe_s)
        self.base_url = self.fleet.endpoints[0].url
        self._template = template
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.max_concurrency = max_concurrency
        self.retries = retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.token_ids = token_ids
        self.max_context = max_context
        self._rng = random.Random(seed)
        self.outage_s = outage_s
        self._down_since: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None
        self._weights = Weights("base")
        self._base_model = model

    @classmethod
    def from_config(cls, cfg: ModelConfig, *, seed: int = 0) -> OpenAIPolicy:
        """A policy for ``cfg``: ``cfg.model`` names the local folder whose tokenizer renders prompts."""
        from transformers import AutoTokenizer  # noqa: PLC0415 -- only for the template

        from spade.backends.embedded import resolve_model  # noqa: PLC0415
        from spade.backends.template import HFChatTemplate  # noqa: PLC0415

        template = HFChatTemplate(AutoTokenizer.from_pretrained(resolve_model(cfg.model)))
        o = cfg.openai
        return cls(
            o.base_urls,
            template=template,
            model=o.served_model,
            api_key=os.environ.get(o.api_key_env, "EMPTY"),
            timeout_s=o.request_timeout_s,
            max_concurrency=cfg.max_concurrency,
            retries=o.request_retries,
            token_ids=o.token_ids,
            max_context=cfg.max_context,
            seed=seed,
            outage_s=o.outage_s,
            reprobe_s=o.reprobe_s,
        )

    @property
    def template(self) -> ChatTemplate:
        """The served model's chat template."""
        if self._template is None:
            raise ValueError(
                "this OpenAIPolicy has no chat template: build it with template=... to render prompts"
            )
        return self._template

    @template.setter
    def template(self, value: ChatTemplate) -> None:
        self._template = value

    # -- Policy -----------------------------------------------------------------------------------------------

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per token prompt via ``/completions``; failures are error completions."""
        seeds = self._seeds(params, len(prompts))
        return list(
            await asyncio.gather(
                *(self._sample_one(p, params, s) for p, s in zip(prompts, seeds, strict=True))
            )
        )

    async def chat(
        self,
        conversations: Sequence[Sequence[Message]],
        params: SamplingParams,
        tools: Sequence[ToolSchema] | None = None,
        *,
        tool_choice: str | dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> list[ChatReply]:
        """One chat reply per conversation via ``/chat/completions``; failures are error completions.

        Args:
            conversations: OpenAI-format message lists.
            params: sampling parameters (``top_k`` is sent only when set, as a vLLM extension).
            tools: function schemas offered to the model.
            tool_choice: sent as is when tools are given (``"none"`` for servers started without a tool
                parser: calls are then read from the reply text; a named function forces that call).
            extra: further request fields (server extensions, e.g. vLLM's ``structured_outputs``).
        """
        seeds = self._seeds(params, len(conversations))
        options = {
            **(extra or {}),
            **({"tool_choice": tool_choice} if tools and tool_choice is not None else {}),
        }
        jobs = (
            self._chat_one(c, params, tools, options, s) for c, s in zip(conversations, seeds, strict=True)
        )
        return list(await asyncio.gather(*jobs))

    def load_weights(self, path: Path) -> None:
        """Bring every live endpoint to a LoRA adapter or full model folder (see module docstring).

        An endpoint that cannot be reached is marked down (it catches up when a probe brings it back); one
        that refuses is marked down too. Raises only when no endpoint took the weights.

        Raises:
            FileNotFoundError: the folder holds neither an adapter nor a model.
            RequestFailedError: no endpoint took the weights (e.g. a server started without runtime LoRA
                updating, or every endpoint down); the served weights stay as they were.
        """
        target = weights_at(Path(path).resolve(), self._weights.version + 1)
        if self._weights.kind != "adapter":
            self._base_model = self.model
        previous, self._weights = self._weights, target
        synced, last = 0, "every endpoint is down"
        for endpoint in self.fleet.endpoints:
            if not endpoint.up:
                continue  # brought up to date when a probe finds it back
            try:
                self._sync(endpoint, None)
                synced += 1
            except RequestFailedError as exc:
                last = str(exc)
                self.fleet.mark_down(endpoint)
        if not synced:
            self._weights = previous
            raise RequestFailedError(f"no endpoint took the new weights {target.path}: {last}")
        self.model = target.name or self._base_model

    def metrics(self) -> dict[str, float]:
        """Fleet counters (``fleet/requests/<i>``, ``fleet/failovers``, ``fleet/endpoints_up``...)."""
        return self.fleet.metrics()

    async def aclose(self) -> None:
        """Close the HTTP connection pool of the current event loop."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- completions -----------------------------------------------------------------------------------------

    async def _sample_one(self, prompt: Sequence[int], params: SamplingParams, seed: int) -> Completion:
        n = len(prompt)
        max_tokens = params.max_tokens
        if self.max_context:
            if n >= self.max_context:
                return failed(
                    f"prompt has {n} tokens but the context window is {self.max_context}: shorten the "
                    "conversation (context budget) or raise model.max_context",
                    n,
                )
            max_tokens = min(max_tokens, self.max_context - n)
        body = {
            "prompt": [int(t) for t in prompt],
            **self._sampling_body(params, max_tokens, seed),
            "logprobs": 0,
        }
        if self.token_ids:
            body.update(return_token_ids=True, return_tokens_as_token_ids=True)
        try:
            data, version = await self._post("/completions", body)
            completion = completion_from_choice(first_choice(data), n)
            return dataclasses.replace(completion, policy_version=version)
        except RequestFailedError as exc:
            return failed(str(exc), n)

    async def _chat_one(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[ToolSchema] | None,
        options: dict[str, Any],
        seed: int,
    ) -> ChatReply:
        body = {
            "messages": list(messages),
            **self._sampling_body(params, params.max_tokens, seed),
            "logprobs": True,
        }
        if tools:
            body["tools"] = list(tools)
        if self.token_ids:
            body["return_token_ids"] = True
        body.update(options)
        try:
            data, version = await self._post("/chat/completions", body)
            reply = chat_reply(first_choice(data), data, tools)
            completion = dataclasses.replace(reply.completion, policy_version=version)
            return dataclasses.replace(reply, completion=completion)
        except RequestFailedError as exc:
            return ChatReply(failed(str(exc), 0))

    def _sampling_body(self, params: SamplingParams, max_tokens: int, seed: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": seed,
        }
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        return body

    def _seeds(self, params: SamplingParams, n: int) -> list[int]:
        if params.seed is not None:  # distinct per prompt: equal prompts in a group must differ
            return [(params.seed * 1_000_003 + i) % 2**31 for i in range(n)]
        return [self._rng.getrandbits(31) for _ in range(n)]

    # -- transport -------------------------------------------------------------------------------------------

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
