"""Training on a verifiers environment: ``--mode fixed_pool --pool verifiers:MODULE``.

The module is loaded with verifiers' own loader; each of its tasks (the first :data:`MAX_TASKS`) becomes one
pool environment. verifiers environments drive the exchange themselves (``Env.run(task, agents)`` calls
``agents.player.interaction(task)`` and ``turn(message)``), so :class:`VerifiersInstance` turns that around
for spade's rollout: ``reset`` starts ``run`` and returns the first message the environment sends, ``step``
hands it the agent's reply and returns the next message, and the episode ends when ``run`` returns, with
the rewards the environment recorded (weighted sum) as the last step's reward. ``run`` executes on the
instance's own event-loop thread; an exception from it is a ``crash`` of that play.

Environments whose ``run`` starts a harness program instead of an interaction (verifiers' ``SingleAgentEnv``)
are not playable this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import threading
from collections.abc import AsyncIterator, Coroutine
from types import SimpleNamespace
from typing import Any, TypeVar

from spade.env import StepResult
from spade.sandbox import EnvMeta, SandboxError, SyncInstance
from spade.types import EnvSource

PREFIX = "verifiers:"
MAX_TASKS = 256
"""Tasks of one module taken into the pool (infinite tasksets are cut here)."""
T = TypeVar("T")


def is_verifiers(pool: str) -> bool:
    """Whether ``--pool`` names a verifiers environment module."""
    return pool.startswith(PREFIX)


@functools.cache
def load(module: str) -> tuple[Any, list[Any]]:
    """The environment of ``module`` (verifiers' ``load_environment``) and its first tasks."""
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: PLC0415

    env = load_environment(resolve_env_config({"taskset": {"id": module}}))
    tasks = []
    for task in env.taskset:
        tasks.append(task)
        if len(tasks) == MAX_TASKS:
            break
    return env, tasks


def pool_sources(pool: str) -> list[EnvSource]:
    """One marker source per task of ``verifiers:MODULE``."""
    module = pool.removeprefix(PREFIX)
    _, tasks = load(module)
    out = []
    for i, task in enumerate(tasks):
        name = re.sub(r"[^0-9a-zA-Z]+", "_", str(task.data.name or i)).strip("_")
        target = json.dumps({"kind": "verifiers", "module": module, "task": i})
        code = f'"""Task {i} of the verifiers environment {module} (spade.ecosystem)."""\n\nSPADE_REMOTE = {target}\n'
        out.append(EnvSource(code=code, skill="", env_id=f"vf_{module}_{i:04d}_{name}"[:120]))
    return out


def _text(message: Any) -> str:
    if isinstance(message, str):
        return message
    if isinstance(message, list):  # chat messages
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in message)
    return "" if message is None else str(message)


class _Trace:
    """The part of verifiers' trace an environment's ``run`` writes: rewards, info, an early stop."""

    def __init__(self) -> None:
        self.rewards: dict[str, float] = {}
        self.info: dict[str, Any] = {}
        self.stopped = ""

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = float(value) * float(weight)

    def record_metric(self, name: str, value: float) -> None:
        self.info[name] = value

    def stop(self, reason: str) -> None:
        self.stopped = reason


class _Segment:
    def __init__(self, reply: str, terminated: bool) -> None:
        self.last_reply, self.terminated = reply, terminated


class _Seat:
    """spade's agent in the seat an environment's ``run`` talks to (``interaction(task).turn(message)``)."""

    def __init__(self) -> None:
        self.trace = _Trace()
        self.messages: asyncio.Queue[str] = asyncio.Queue()
        self.replies: asyncio.Queue[str] = asyncio.Queue()

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any, **_: Any) -> AsyncIterator[_Seat]:
        yield self

    async def turn(self, message: Any = None) -> _Segment:
        await self.messages.put(_text(message))
        return _Segment(await self.replies.get(), terminated=False)


class VerifiersInstance(SyncInstance):
    """One episode of one verifiers task (see :class:`spade.sandbox.EnvInstance` and the module docstring)."""

    def __init__(self, module: str, index: int) -> None:
        self.env, tasks = load(module)
        self.task = tasks[index]
        self.meta = EnvMeta(class_name=type(self.env).__name__, max_turns=1000, is_tool_env=False, skill="",
                            difficulty_levels=1)  # fmt: skip
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="verifiers-env")
        self._thread.start()
        self._seat: _Seat | None = None
        self._run: asyncio.Task[None] | None = None
        self._closed = False

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start(self) -> str | None:
        self._seat = _Seat()
        self._run = asyncio.ensure_future(self.env.run(self.task, SimpleNamespace(player=self._seat)))
        return await self._next("reset")

    async def _next(self, op: str) -> str | None:
        """The environment's next message, or None when its ``run`` returned."""
        assert self._seat is not None
        assert self._run is not None
        message = asyncio.ensure_future(self._seat.messages.get())
        await asyncio.wait({message, self._run}, return_when=asyncio.FIRST_COMPLETED)
        if message.done():
            return message.result()
        message.cancel()
        if self._run.exception() is not None:
            error = self._run.exception()
            raise SandboxError("crash", f"{type(error).__name__}: {error}", op=op)
        return None

    async def _cancel(self) -> None:
        if self._run is not None and not self._run.done():
            self._run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._run

    async def _reply(self, action: str) -> str | None:
        assert self._seat is not None
        await self._seat.replies.put(action)
        return await self._next("step")

    # -- the EnvInstance API ---------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start the task's ``run``; its first message is the observation (the task is the instance)."""
        first = self._on_loop(self._start())
        if first is None:
            raise SandboxError(
                "invalid_value", "the environment's run ended before its first message", op="reset"
            )
        return first, {}

    def step(self, action: str) -> StepResult:
        """Hand the environment the agent's reply; at the end, the recorded rewards are the reward."""
        message = self._on_loop(self._reply(action))
        if message is not None:
            return message, 0.0, False, False, {}
        assert self._seat is not None
        return "", sum(self._seat.trace.rewards.values()), True, False, {}

    def tools(self) -> list[dict[str, Any]]:
        """Played as text: no native tools."""
        return []

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """No native tools: say so, as a bad tool call does."""
        return f"Error: unknown tool {name!r}. This environment takes text replies only."

    def solution(self) -> list[str] | str:
        """verifiers environments reveal no solution."""
        raise NotImplementedError("a verifiers environment has no scripted solution")

    def close(self) -> None:
        """Cancel the environment's ``run`` if it is still going and stop the loop thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._on_loop(self._cancel())  # lets run's cleanup (closing its own resources) finish
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
