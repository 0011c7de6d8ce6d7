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

Failure is data: a request that cannot be completed yields a completion with ``finish_reason="error"`` and
a message, never a raise and never a hang. Each attempt has a hard deadline (``timeout_s``); connection
failures, timeouts and 408/429/5xx answers are retried ``retries`` times with exponential backoff and
seeded jitter; other 4xx answers (a prompt longer than the context window, an unknown model) fail at once
with the server's message. At most ``max_concurrency`` requests are in flight. The worst case for one
request is thus ``(retries + 1) * timeout_s`` plus the backoff.

Weight sync (:meth:`OpenAIPolicy.load_weights`) targets a vLLM server started by
:func:`spade.backends.vllm_server.launch_vllm_server`: a LoRA adapter is hot-loaded under a new name (later
requests use it, the previous one is unloaded); a full model folder is reloaded in place through the
development endpoint ``/collective_rpc`` and the prefix cache is reset. The server reads the folder itself,
so it must see the same filesystem (same machine or a shared mount).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from spade.backends.toolcalls import extract_tool_calls
from spade.config import ModelConfig
from spade.errors import SpadeError
from spade.types import ChatTemplate, Completion, FinishReason, Message, SamplingParams, ToolCall, ToolSchema

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "stop", "eos": "stop"}


class RequestFailedError(SpadeError, RuntimeError):
    """A server request that failed for good (after retries where they apply); the message says why."""


class ModelServerDownError(SpadeError):
    """The server failed every request for ``outage_s`` seconds: an outage, not a bad request.

    Raised (not returned as an error completion) so that a run stops resumably instead of spending its
    steps on errors.
    """


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One chat completion with its tool calls."""

    completion: Completion
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_errors: tuple[str, ...] = ()
    """One message per tool call that could not be read (malformed text or arguments)."""
    content: str = ""
    """The reply text without tool-call blocks."""


class OpenAIPolicy:
    """:class:`~spade.types.Policy` over an OpenAI-compatible HTTP server (see module docstring).

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        template: the chat template of the served model (renders prompts for :meth:`sample`); may be None
            for chat-only use.
        model: model name to request; empty: the first model the server lists.
        api_key: bearer token (local servers accept any).
        timeout_s: hard deadline of one attempt.
        max_concurrency: requests in flight at once.
        retries: further attempts after a retryable failure.
        backoff_s: first backoff; doubles per attempt up to ``backoff_max_s``, with jitter.
        token_ids: ask for sampled token ids (vLLM extensions); off for servers that reject unknown fields.
        max_context: context window used to cap ``max_tokens`` and reject over-long prompts locally (0: leave
            it to the server).
        seed: seed of per-request seeds for calls without ``params.seed`` and of the backoff jitter.
        outage_s: 0: a request that still fails after its retries is an error completion. > 0: it is
            retried with backoff while the server has failed every request for less than ``outage_s``
            seconds, then :class:`ModelServerDownError` is raised; any success ends the outage.
    """

    def __init__(
        self,
        base_url: str,
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
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1 (got {base_url!r})"
            )
        self.base_url = base_url.rstrip("/")
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
        self._adapters = 0
        self._adapter: str | None = None
        self._base_model = model

    @classmethod
    def from_config(cls, cfg: ModelConfig, *, seed: int = 0) -> OpenAIPolicy:
        """A policy for ``cfg``: ``cfg.model`` names the local folder whose tokenizer renders prompts."""
        from transformers import AutoTokenizer  # noqa: PLC0415 -- only for the template

        from spade.backends.embedded import resolve_model  # noqa: PLC0415
        from spade.backends.template import HFChatTemplate  # noqa: PLC0415

        template = HFChatTemplate(AutoTokenizer.from_pretrained(resolve_model(cfg.model)))
        return cls(
            cfg.base_url,
            template=template,
            model=cfg.served_model,
            api_key=os.environ.get(cfg.api_key_env, "EMPTY"),
            timeout_s=cfg.request_timeout_s,
            max_concurrency=cfg.max_concurrency,
            retries=cfg.request_retries,
            token_ids=cfg.server_token_ids,
            max_context=cfg.max_context,
            seed=seed,
            outage_s=cfg.outage_s,
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
        """Sync the server to a LoRA adapter or full model folder (see module docstring).

        Raises:
            FileNotFoundError: the folder holds neither an adapter nor a model.
            RequestFailedError: the server refused (e.g. started without runtime LoRA updating).
        """
        path = Path(path).resolve()
        if (path / "adapter_config.json").is_file():
            self._load_adapter(path)
        elif (path / "config.json").is_file():
            self._control(
                "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(path)}}
            )
            self._control("/reset_prefix_cache", {})
            if self._adapter is not None:  # the new weights replace base + adapter
                self._control("/v1/unload_lora_adapter", {"lora_name": self._adapter})
                self._adapter, self.model = None, self._base_model
        else:
            raise FileNotFoundError(
                f"{path} holds neither adapter_config.json (a LoRA adapter) nor config.json (a model "
                "folder); pass a folder written by Trainer.export_weights"
            )

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
                return _failed(
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
            data = await self._post("/completions", body)
            return _completion_from_choice(_first_choice(data), n)
        except RequestFailedError as exc:
            return _failed(str(exc), n)

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
            data = await self._post("/chat/completions", body)
            return _chat_reply(_first_choice(data), data, tools)
        except RequestFailedError as exc:
            return ChatReply(_failed(str(exc), 0))

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

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST with the model name, retries and deadlines: the JSON answer, or RequestFailedError."""
        client, slots = self._session()
        payload = {"model": self.model or await self._served_model(client), **body}
        last = "no attempt made"
        attempt = -1
        while (attempt := attempt + 1) <= self.retries or self._outage_goes_on():
            if attempt:
                await asyncio.sleep(self._backoff(attempt))
            async with slots:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        response = await client.post(self.base_url + path, json=payload)
                except TimeoutError:
                    last = f"no answer within {self.timeout_s:g} s (model.request_timeout_s)"
                    continue
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc or 'connection failed'}"
                    continue
            if response.status_code in RETRY_STATUS:
                last = f"HTTP {response.status_code}: {_server_message(response)}"
                continue
            self._down_since = None
            return _json_answer(response, path)
        if self.outage_s > 0:
            raise ModelServerDownError(
                f"the model server at {self.base_url} failed every request for {self.outage_s:g} s "
                f"(model.outage_s; last: {last})"
            )
        raise RequestFailedError(f"{self.base_url}{path} failed after {attempt} attempts: {last}")

    def _outage_goes_on(self) -> bool:
        """After a request's own retries: keep retrying while the outage is younger than ``outage_s``."""
        if self.outage_s <= 0:
            return False
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
        return now - self._down_since < self.outage_s

    async def _served_model(self, client: httpx.AsyncClient) -> str:
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await client.get(self.base_url + "/models")
        except (TimeoutError, httpx.TransportError) as exc:
            raise RequestFailedError(
                f"cannot list models at {self.base_url}/models ({type(exc).__name__}: {exc}); is the server "
                "up? (or set model.served_model to skip the lookup)"
            ) from None
        models = _json_answer(response, "/models").get("data") or []
        if not models or not isinstance(models[0], dict) or "id" not in models[0]:
            raise RequestFailedError(f"{self.base_url}/models lists no model; set model.served_model")
        self.model = str(models[0]["id"])
        return self.model

    def _session(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        """The connection pool and concurrency slots of the running loop (one pair per event loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._slots is None or self._loop is not loop:
            self._loop = loop
            self._client = httpx.AsyncClient(
                headers={"Authorization": f"Bearer {self.api_key}"},
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=self.max_concurrency),
            )
            self._slots = asyncio.Semaphore(self.max_concurrency)
        return self._client, self._slots

    def _backoff(self, attempt: int) -> float:
        delay = min(self.backoff_max_s, self.backoff_s * 2 ** (attempt - 1))
        return float(delay * (0.5 + 0.5 * self._rng.random()))

    # -- weight sync -----------------------------------------------------------------------------------------

    def _load_adapter(self, path: Path) -> None:
        self._adapters += 1
        name = f"spade-adapter-{self._adapters}"
        self._control("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        if self._adapter is None:
            self._base_model = self.model
        previous, self._adapter, self.model = self._adapter, name, name
        if previous:
            self._control("/v1/unload_lora_adapter", {"lora_name": previous})

    def _control(self, path: str, body: dict[str, Any]) -> None:
        """A synchronous control request to the server root (weight sync happens between sampling phases)."""
        url = self.base_url.removesuffix("/v1") + path
        try:
            response = httpx.post(
                url, json=body, timeout=self.timeout_s, headers={"Authorization": f"Bearer {self.api_key}"}
            )
        except httpx.TransportError as exc:
            raise RequestFailedError(f"{url}: {type(exc).__name__}: {exc}; is the server up?") from None
        if response.status_code == 404:
            raise RequestFailedError(
                f"{url} is not served: start vLLM with --enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True "
                "and VLLM_SERVER_DEV_MODE=1 (spade.backends.vllm_server.launch_vllm_server does)"
            )
        if response.status_code >= 400:
            raise RequestFailedError(f"{url}: HTTP {response.status_code}: {_server_message(response)}")


# -- response parsing (pure) ---------------------------------------------------------------------------------


def _json_answer(response: httpx.Response, path: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise RequestFailedError(f"{path}: HTTP {response.status_code}: {_server_message(response)}")
    try:
        data = response.json()
    except ValueError:
        raise RequestFailedError(
            f"{path}: the server answered with non-JSON: {response.text[:200]!r}"
        ) from None
    if not isinstance(data, dict):
        raise RequestFailedError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _server_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(data, dict) and data.get("detail"):
        return str(data["detail"])
    return json.dumps(data)[:300]


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RequestFailedError(f"the server's answer has no choices: {json.dumps(data)[:200]}")
    return choices[0]


def _failed(message: str, prompt_tokens: int) -> Completion:
    return Completion("", (), (), "error", prompt_tokens=prompt_tokens, error=message)


def _finish(choice: dict[str, Any]) -> tuple[FinishReason, str | None]:
    reason = choice.get("finish_reason")
    if isinstance(reason, str) and reason in _FINISH:
        return _FINISH[reason], None
    return "error", f"the server ended the request with finish_reason={reason!r}"


def _completion_from_choice(choice: dict[str, Any], prompt_tokens: int) -> Completion:
    logprobs = choice.get("logprobs") or {}
    values = [float(x) if x is not None else 0.0 for x in logprobs.get("token_logprobs") or []]
    ids = _token_ids(choice.get("token_ids"), logprobs.get("tokens"))
    if len(values) != len(ids):
        values = []
    reason, error = _finish(choice)
    return Completion(str(choice.get("text") or ""), ids, tuple(values), reason, prompt_tokens, error)


def _token_ids(token_ids: Any, tokens: Any) -> tuple[int, ...]:
    if isinstance(token_ids, list) and all(isinstance(t, int) for t in token_ids):
        return tuple(token_ids)
    if (
        isinstance(tokens, list)
        and tokens
        and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens)
    ):
        return tuple(int(t.removeprefix("token_id:")) for t in tokens)
    return ()


def _chat_reply(
    choice: dict[str, Any], data: dict[str, Any], tools: Sequence[ToolSchema] | None
) -> ChatReply:
    message = choice.get("message") or {}
    text = str(message.get("content") or "")
    content = (choice.get("logprobs") or {}).get("content") or []
    values = [float(item.get("logprob", 0.0)) for item in content if isinstance(item, dict)]
    ids = _token_ids(choice.get("token_ids"), None)
    if len(values) != len(ids):
        values = []
    reason, error = _finish(choice)
    prompt_tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
    completion = Completion(text, ids, tuple(values), reason, prompt_tokens, error)
    server_calls = message.get("tool_calls") or []
    if server_calls:
        calls, errors = _server_tool_calls(server_calls)
        return ChatReply(completion, calls, errors, text.strip())
    parsed = extract_tool_calls(text, tools)
    return ChatReply(completion, parsed.calls, parsed.errors, parsed.content)


def _server_tool_calls(raw: list[Any]) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    for item in raw:
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            errors.append(f"server tool call without a function name: {json.dumps(item)[:200]}")
            continue
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            errors.append(f"tool call {fn['name']!r}: arguments are not JSON ({exc.msg})")
            continue
        if not isinstance(args, dict):
            errors.append(f"tool call {fn['name']!r}: arguments must be an object, got {type(args).__name__}")
            continue
        calls.append(ToolCall(fn["name"], args, str(item.get("id") or "")))
    return tuple(calls), tuple(errors)
