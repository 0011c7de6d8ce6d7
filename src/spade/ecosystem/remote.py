"""Training on environments served elsewhere: ``--mode fixed_pool --pool openenv:URL`` (or ``verifiers:MODULE``,
:mod:`spade.ecosystem.verifiers_remote`).

A remote pool is one environment, the server's: :func:`pool_sources` gives it a marker source (valid Python
naming the server, never executed), and :class:`EcosystemRunner` opens instances of marker sources as
sessions with the server (:class:`OpenEnvInstance`) while every other source goes to the wrapped sandbox.
Remote episodes therefore flow through the same rollout code as sandboxed ones: counted, timed and turned
into trajectories alike. An error the server reports for one episode is a :class:`SandboxError` (the play is
an ``env_error`` trajectory); a server that cannot be reached is :class:`RemoteEnvError`, which stops the run
resumably with one line.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from spade.ecosystem import verifiers_remote
from spade.env import StepResult
from spade.errors import SpadeError
from spade.sandbox import EnvInstance, EnvMeta, EnvRunner, SandboxError, SyncInstance
from spade.types import EnvSource

PREFIX = "openenv:"
"""``--pool openenv:URL``: the OpenEnv server at URL (``http://host:port``)."""
_MARKER = re.compile(r"^SPADE_REMOTE = (\{.*\})$", re.MULTILINE)
_CONNECT_TIMEOUT_S = 10.0
_MESSAGE_TIMEOUT_S = 120.0
T = TypeVar("T")


class RemoteEnvError(SpadeError):
    """A remote environment server cannot be reached: the run stops and resumes once it is back."""


def is_remote(pool: str) -> bool:
    """Whether ``--pool`` names a remote environment server or a verifiers module rather than a folder."""
    return pool.startswith(PREFIX) or verifiers_remote.is_verifiers(pool)


def _url(pool: str) -> str:
    url = pool.removeprefix(PREFIX).rstrip("/")
    if not re.match(r"^(https?|wss?)://[^/\s]+", url):
        raise RemoteEnvError(f"--pool {pool!r}: give the server as openenv:http://HOST:PORT")
    return url


def pool_sources(pool: str) -> list[EnvSource]:
    """The pool of ``openenv:URL`` (one environment whose marker source names the server) or of
    ``verifiers:MODULE`` (one per task, :func:`spade.ecosystem.verifiers_remote.pool_sources`)."""
    if verifiers_remote.is_verifiers(pool):
        return verifiers_remote.pool_sources(pool)
    url = _url(pool)
    env_id = "openenv_" + re.sub(r"[^0-9a-zA-Z]+", "_", url.split("://", 1)[1]).strip("_")
    code = (
        f'"""Remote environment: episodes are played on the OpenEnv server at {url} (spade.ecosystem)."""\n\n'
        f"SPADE_REMOTE = {json.dumps({'kind': 'openenv', 'url': url})}\n"
    )
    return [EnvSource(code=code, skill="", env_id=env_id)]


def check_pool(pool: str) -> None:
    """Raise :class:`RemoteEnvError` unless the server of ``openenv:URL`` answers its health check (or the
    module of ``verifiers:MODULE`` loads with at least one task)."""
    import httpx  # noqa: PLC0415 - only remote pools need it

    if verifiers_remote.is_verifiers(pool):
        module = pool.removeprefix(verifiers_remote.PREFIX)
        try:
            tasks = verifiers_remote.load(module)[1]
        except (ImportError, ValueError, TypeError, AttributeError) as exc:
            raise RemoteEnvError(
                f"verifiers environment {module!r} does not load ({exc}): fix --pool"
            ) from exc
        if not tasks:
            raise RemoteEnvError(f"verifiers environment {module!r} has no tasks: fix --pool")
        return

    url = _url(pool).replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    try:
        httpx.get(f"{url}/health", timeout=_CONNECT_TIMEOUT_S).raise_for_status()
    except httpx.HTTPError as exc:
        raise RemoteEnvError(
            f"the OpenEnv server {url} does not answer ({exc}): start it or fix --pool"
        ) from exc


def remote_target(source: str) -> dict[str, Any] | None:
    """The server a marker source names (None: an ordinary environment source)."""
    found = _MARKER.search(source)
    return json.loads(found.group(1)) if found and "SPADE_REMOTE" in source[:400] else None


class OpenEnvInstance(SyncInstance):
    """One episode on an OpenEnv server (see :class:`spade.sandbox.EnvInstance`), over OpenEnv's client.

    The action goes out as the server's single text field (``message`` for spade's exports, else the one
    required string field of its action schema); the observation's ``text`` field (else its only string field,
    else its JSON) comes back. The calls run on the client's own event-loop thread.
    """

    def __init__(self, url: str) -> None:
        from openenv.core import GenericEnvClient  # noqa: PLC0415 - only remote pools need it

        self.url = url
        self.meta = EnvMeta(
            class_name="openenv", max_turns=1000, is_tool_env=False, skill="", difficulty_levels=1
        )
        self._client = GenericEnvClient(
            base_url=url, connect_timeout_s=_CONNECT_TIMEOUT_S, message_timeout_s=_MESSAGE_TIMEOUT_S
        ).sync()
        self._field = "message"
        self._tools: list[dict[str, Any]] = []
        self._closed = False

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        import httpx  # noqa: PLC0415 - only remote pools need it
        from websockets.exceptions import WebSocketException  # noqa: PLC0415

        try:
            return fn()
        except RuntimeError as exc:  # OpenEnv's client raises it for an error message from the server
            if "Server error" not in str(exc):
                raise
            self.close()
            raise SandboxError("crash", str(exc), op=op) from exc
        except (ConnectionError, OSError, TimeoutError, WebSocketException, httpx.HTTPError) as exc:
            self.close()
            raise RemoteEnvError(
                f"the OpenEnv server {self.url} stopped answering during {op} ({type(exc).__name__}: {exc}); "
                "restart it and resume the run"
            ) from exc

    def _text(self, op: str, result: Any) -> tuple[str, float, bool, bool]:
        obs = dict(result.observation or {})
        if obs.get("error"):
            self.close()
            raise SandboxError("crash", str(obs["error"]), op=op)
        if isinstance(obs.get("tools"), list):
            self._tools = obs["tools"]
        strings = [v for k, v in obs.items() if isinstance(v, str) and k not in ("env_id", "skill", "error")]
        text = obs["text"] if isinstance(obs.get("text"), str) else strings[0] if len(strings) == 1 else None
        text = json.dumps(obs, sort_keys=True) if text is None else text
        truncated = bool(obs.get("truncated", False))
        done = bool(result.done)
        return text, float(result.reward or 0.0), done and not truncated, truncated

    def _action_field(self) -> str:
        import httpx  # noqa: PLC0415

        http = self.url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        schema = httpx.get(f"{http}/schema", timeout=_CONNECT_TIMEOUT_S).json().get("action", {})
        props = schema.get("properties", {})
        if "message" in props:
            return "message"
        required = [k for k in schema.get("required", []) if props.get(k, {}).get("type") == "string"]
        if len(required) != 1:
            raise SandboxError(
                "protocol", f"the action schema of {self.url} has no single text field: {schema}"
            )
        return str(required[0])

    # -- the EnvInstance API ---------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Connect and start an episode; ``options["difficulty"]`` goes to the server's ``reset``."""
        self._field = self._call("schema", self._action_field)
        kwargs: dict[str, Any] = {"seed": seed, **(options or {})}
        text, _, done, truncated = self._text(
            "reset", self._call("reset", lambda: self._client.reset(**kwargs))
        )
        if done or truncated:
            raise SandboxError("invalid_value", "the episode ended at reset", op="reset")
        return text, {}

    def step(self, action: str) -> StepResult:
        """Send one text action."""
        result = self._call("step", lambda: self._client.step({self._field: action}))
        text, reward, terminated, truncated = self._text("step", result)
        return text, reward, terminated, truncated, {}

    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas the server listed with the observation (played as text tool calls)."""
        return list(self._tools)

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """One tool call, sent as a ``<tool_call>`` text action."""
        call = "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"
        return self.step(call)[0]

    def solution(self) -> list[str] | str:
        """Remote environments reveal no solution."""
        raise NotImplementedError("a remote environment has no scripted solution")

    def close(self) -> None:
        """End the session (idempotent)."""
        if not self._closed:
            self._closed = True
            self._client.close()


class EcosystemRunner:
    """An :class:`EnvRunner` that opens remote marker sources itself and hands the rest to ``inner``."""

    def __init__(self, inner: EnvRunner) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # runner metrics and checks of the wrapped runner
        return getattr(self.inner, name)

    @property
    def layers(self) -> dict[str, bool]:
        """The wrapped runner's isolation layers."""
        return self.inner.layers

    def open(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> EnvInstance:
        """A session with the named server, or an instance of the wrapped runner."""
        target = remote_target(source)
        if target is None:
            return self.inner.open(source, filename=filename, max_turns=max_turns)
        return _open(target)

    async def aopen(
        self, source: str, *, filename: str = "<env>", max_turns: int | None = None
    ) -> EnvInstance:
        """Async :meth:`open`."""
        target = remote_target(source)
        if target is None:
            return await self.inner.aopen(source, filename=filename, max_turns=max_turns)
        return await asyncio.to_thread(_open, target)

    def close(self) -> None:
        """Close the wrapped runner."""
        self.inner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _open(target: dict[str, Any]) -> EnvInstance:
    if target["kind"] == "verifiers":
        return verifiers_remote.VerifiersInstance(target["module"], int(target["task"]))
    return OpenEnvInstance(target["url"])


def wrap_runner(pool: str, runner: EnvRunner) -> EnvRunner:
    """``runner`` itself, or for a remote ``pool`` an :class:`EcosystemRunner` around it."""
    return EcosystemRunner(runner) if is_remote(pool) else runner
