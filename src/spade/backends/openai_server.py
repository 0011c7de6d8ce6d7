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
  ``tool_calls`` when it sends them, else from the reply text (:func:`spade.replies.extract_tool_calls`).

Several servers (a generation fleet, ``base_urls``) share the work (the transport:
:mod:`spade.backends.openai_transport`): each request goes to the live endpoint with the fewest requests in
flight (:mod:`spade.backends.fleet`). A connection failure or a timeout marks the endpoint down and the
request moves at once to another live one (a *failover*, which spends no retry); a down endpoint is probed
again every ``reprobe_s`` seconds and, once it answers, brought to the current weights before it takes
requests. Counters are in :meth:`OpenAIPolicy.metrics` (``fleet/...``).

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from spade.backends.openai_parse import (
    ChatReply,
    RequestFailedError,
    chat_reply,
    completion_from_choice,
    failed,
    first_choice,
)
from spade.backends.openai_transport import FleetTransport, ModelServerDownError
from spade.backends.weight_sync import weights_at
from spade.config import ModelConfig
from spade.types import ChatTemplate, Completion, Message, SamplingParams, ToolSchema

__all__ = ["ChatReply", "ModelServerDownError", "OpenAIPolicy", "RequestFailedError", "top_k_refusal"]

OPENAI_API_HOST = "api.openai.com"
"""The OpenAI API itself, which has no ``top_k`` and answers a request carrying one with a 400."""


def top_k_refusal(base_urls: Sequence[str]) -> str | None:
    """Why ``top_k`` cannot be sent to ``base_urls`` (one of them is the OpenAI API), or None when it can.

    vLLM and SGLang servers read ``top_k`` as a field of the request body (what the ``openai`` client's
    ``extra_body`` sends), so :meth:`OpenAIPolicy._sampling_body` sends it there whenever it is set.
    """
    hosts = [u for u in base_urls if urlsplit(u).hostname == OPENAI_API_HOST]
    if not hosts:
        return None
    return (
        f"the OpenAI API ({hosts[0]}) has no top_k and rejects requests that carry one: drop --top-k "
        "(or set it to 0), or serve the model with vLLM or SGLang, which take it"
    )


class OpenAIPolicy(FleetTransport):
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
        super().__init__(
            base_url,
            model=model,
            api_key=api_key,
            timeout_s=timeout_s,
            max_concurrency=max_concurrency,
            retries=retries,
            backoff_s=backoff_s,
            backoff_max_s=backoff_max_s,
            seed=seed,
            outage_s=outage_s,
            reprobe_s=reprobe_s,
        )
        self._template = template
        self.token_ids = token_ids
        self.max_context = max_context
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
