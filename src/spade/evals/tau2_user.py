"""The user simulator of ``tau2_bench``: the policy under test (the default) or a separate user model.

tau2 runs its user simulator on a model of its own (``src/tau2/config.py``: ``DEFAULT_LLM_USER``
gpt-4.1-2025-04-14 at ``DEFAULT_LLM_TEMPERATURE_USER`` 0.0), so only a run with that user model is
comparable with tau2's numbers. ``--param user_base_url=http://HOST:PORT/v1 --param user_model=NAME`` puts
the user on an OpenAI-compatible server, reached through spade's openai backend
(:class:`~spade.backends.openai_server.OpenAIPolicy`, its ``/chat/completions`` path: the user's
conversation goes as messages, no tools); ``--param user_api_key_env=VAR`` names the environment variable
holding its API key (default ``OPENAI_API_KEY``; unset: a placeholder local servers accept; a key is never
a parameter), ``--param user_temperature=`` its sampling temperature (default 0.0, as tau2). Without
``user_base_url`` the policy under test plays the user with the evaluation's sampling, as before.

A user server that cannot answer is one :class:`~spade.evals.base.EvalError` line before any conversation:
:func:`probe` sends it one tiny chat request (the suite's ``check`` does so before the policy is loaded).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from spade.config import EvalOptions
from spade.evals.base import EvalError
from spade.types import Message, Policy, SamplingParams

if TYPE_CHECKING:
    from spade.backends.openai_server import OpenAIPolicy

USER_PARAMS = frozenset({"user_base_url", "user_model", "user_api_key_env", "user_temperature"})
USER_TEMPERATURE = 0.0
"""tau2's ``DEFAULT_LLM_TEMPERATURE_USER``."""
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_KEY = "EMPTY"
"""Sent when the key's variable is unset (as ``model.openai.api_key_env``): local servers accept any."""
PROBE = SamplingParams(temperature=0.0, max_tokens=1)
POLICY_USER = "the policy under test"


@dataclass(frozen=True, slots=True)
class UserServer:
    """Where the separate user model is served and how it samples."""

    base_url: str
    model: str
    api_key_env: str = DEFAULT_KEY_ENV
    temperature: float = USER_TEMPERATURE

    def label(self) -> str:
        """One line naming the user model, for the workload line."""
        return f"{self.model} at {self.base_url} (temperature {self.temperature:g})"

    def describe(self) -> dict[str, Any]:
        """JSON-safe record of the user model (never the key), for each item's ``detail``."""
        return {
            "kind": "server",
            "model": self.model,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "api_key_env": self.api_key_env,
        }

    def api_key(self) -> str:
        """The key from the environment (the placeholder when the variable is unset)."""
        return os.environ.get(self.api_key_env) or PLACEHOLDER_KEY


def _temperature(suite: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise EvalError(f"{suite}: --param user_temperature= must be a number >= 0 (got {raw!r})")
    return value


def user_server(suite: str, opts: EvalOptions) -> UserServer | None:
    """The separate user model ``opts`` asks for (None: the policy plays the user); EvalError for bad params."""
    params = opts.params
    if "user_api_key" in params:
        raise EvalError(
            f"{suite}: no API key on the command line: put it in an environment variable and name that with "
            "--param user_api_key_env=VAR"
        )
    url = str(params.get("user_base_url") or "").strip()
    if not url:
        given = sorted(USER_PARAMS & set(params))
        if given:
            raise EvalError(
                f"{suite}: --param {', '.join(given)} needs --param user_base_url=http://HOST:PORT/v1"
            )
        return None
    if not url.startswith(("http://", "https://")):
        raise EvalError(
            f"{suite}: --param user_base_url={url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1"
        )
    model = str(params.get("user_model") or "").strip()
    if not model:
        raise EvalError(
            f"{suite}: --param user_base_url needs --param user_model=NAME (the served user model)"
        )
    key_env = str(params.get("user_api_key_env") or DEFAULT_KEY_ENV)
    if "user_api_key_env" in params and not os.environ.get(key_env):
        raise EvalError(f"{suite}: the environment variable {key_env} (--param user_api_key_env) is not set")
    temperature = _temperature(suite, params.get("user_temperature", USER_TEMPERATURE))
    return UserServer(url.rstrip("/"), model, key_env, temperature)


class UserSimulator(Protocol):
    """The side that writes the user's turns."""

    async def reply(self, messages: list[Message]) -> tuple[str, str | None]:
        """The user's next message for ``messages`` (system prompt first, roles flipped), or ('', error)."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-safe record of who played the user."""
        ...

    async def aclose(self) -> None:
        """Release what the simulator holds (connections)."""
        ...


async def policy_reply(
    policy: Policy, messages: list[Message], tools: Any, sampling: SamplingParams
) -> tuple[str, str | None]:
    """One sample of ``policy`` on ``messages`` rendered by its chat template with ``tools``, or ('', error)."""
    prompt = policy.template.render(messages, tools, add_generation_prompt=True)
    completion = (await policy.sample([prompt], sampling))[0]
    if completion.finish_reason == "error":
        return "", completion.error or "the policy returned no reply"
    return completion.text, None


class PolicyUser:
    """The policy under test plays the user: the conversation rendered by its chat template and sampled."""

    def __init__(self, policy: Policy, sampling: SamplingParams) -> None:
        self.policy, self.sampling = policy, sampling

    async def reply(self, messages: list[Message]) -> tuple[str, str | None]:
        """One sample of the policy on the rendered conversation."""
        return await policy_reply(self.policy, messages, None, self.sampling)

    def describe(self) -> dict[str, Any]:
        """``{"kind": "policy"}``."""
        return {"kind": "policy"}

    async def aclose(self) -> None:
        """Nothing held."""


def server_client(server: UserServer, concurrency: int, *, retries: int = 3) -> OpenAIPolicy:
    """An openai-backend client of the user server (chat only: no template, no token-id extensions)."""
    from spade.backends.openai_server import OpenAIPolicy  # noqa: PLC0415 - httpx only when a server is used

    return OpenAIPolicy(
        server.base_url,
        model=server.model,
        api_key=server.api_key(),
        max_concurrency=concurrency,
        retries=retries,
        token_ids=False,
    )


class ServerUser:
    """A separate user model on an OpenAI-compatible server."""

    def __init__(self, server: UserServer, sampling: SamplingParams, concurrency: int) -> None:
        self.server, self.sampling = server, sampling
        self.client = server_client(server, concurrency)

    async def reply(self, messages: list[Message]) -> tuple[str, str | None]:
        """One chat reply of the user model."""
        completion = (await self.client.chat([messages], self.sampling))[0].completion
        if completion.finish_reason == "error":
            return "", f"the user model ({self.server.model} at {self.server.base_url}): {completion.error}"
        return completion.text, None

    def describe(self) -> dict[str, Any]:
        """The server's record (model, URL, temperature)."""
        return self.server.describe()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def make_user(
    server: UserServer | None, policy: Policy, sampling: SamplingParams, opts: EvalOptions
) -> UserSimulator:
    """The user simulator: ``server``'s model (at its temperature, ``--max-tokens``) or the policy itself."""
    if server is None:
        return PolicyUser(policy, sampling)
    user_sampling = SamplingParams(temperature=server.temperature, max_tokens=opts.max_tokens)
    return ServerUser(server, user_sampling, opts.concurrency)


async def probe(suite: str, server: UserServer) -> None:
    """One tiny chat request, no retries (EvalError, one line, when the user server cannot answer)."""
    client = server_client(server, 1, retries=0)
    try:
        reply = (await client.chat([[{"role": "user", "content": "Hi"}]], PROBE))[0].completion
    finally:
        await client.aclose()
    if reply.finish_reason == "error":
        error = " ".join(str(reply.error).split())
        raise EvalError(
            f"{suite}: the user simulator cannot answer ({server.model} at {server.base_url}): {error}; start "
            "its server or fix --param user_base_url / user_model"
        )
