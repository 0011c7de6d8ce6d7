"""The public shape of an environment runner, shared by the sandbox and the in-process runner.

Code that plays or checks environments is written against :class:`EnvInstance` and :class:`EnvRunner`, so the
isolated runner (:class:`spade.sandbox.Sandbox`) and the unsafe in-process one (for trusted code) are
interchangeable. Every failure of an instance is a :class:`~spade.sandbox.errors.SandboxError`.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypeVar, runtime_checkable

from spade.env import StepResult

T = TypeVar("T")

LAYER_NAMES: tuple[str, ...] = (
    "process",
    "rlimits",
    "no_new_privs",
    "seccomp",
    "uid_drop",
    "bubblewrap",
    "pid_namespace",
    "net_namespace",
    "hidden_filesystem",
)
"""Isolation layers a runner reports in ``layers``.

``process``: environment code runs in a separate, single-use process. ``rlimits``: address space, CPU,
files and core limits. ``no_new_privs``: PR_SET_NO_NEW_PRIVS. ``seccomp``: the system-call deny-list.
``uid_drop``: a per-instance unprivileged UID (only when the harness is root). ``bubblewrap``: the zygote runs
inside bubblewrap. ``pid_namespace`` / ``net_namespace``: instances cannot see host processes / have no
network devices. ``hidden_filesystem``: read-only root with private /tmp and hidden home directories.
"""


@dataclass(frozen=True, slots=True)
class EnvMeta:
    """What the harness learned about an instance when it was built (validated values)."""

    class_name: str
    """Name of the environment class found in the source."""
    max_turns: int
    """Turn budget of one episode."""
    is_tool_env: bool
    """Whether the environment offers tools (``tools()`` may still be empty before ``reset``)."""
    skill: str
    """The class's ``skill`` slug ('' when it declares none)."""
    difficulty_levels: int
    """Number of levels accepted by ``reset(options={"difficulty": k})``."""


@runtime_checkable
class EnvInstance(Protocol):
    """One live environment instance: Gymnasium-style calls with validated results.

    ``solution()`` raises NotImplementedError when the environment defines none (the instance stays usable);
    every other failure raises SandboxError and kills the instance.
    """

    meta: EnvMeta

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; returns ``(observation, info)``."""
        ...

    def step(self, action: str) -> StepResult:
        """Apply one action; returns ``(observation, reward, terminated, truncated, info)``."""
        ...

    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas in OpenAI function format (empty for games)."""
        ...

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool natively; bad names and arguments come back as error text."""
        ...

    def solution(self) -> list[str] | str:
        """The scripted winning actions of the current instance."""
        ...

    def close(self) -> None:
        """End the instance (idempotent)."""
        ...

    async def areset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Async :meth:`reset`."""
        ...

    async def astep(self, action: str) -> StepResult:
        """Async :meth:`step`."""
        ...

    async def atools(self) -> list[dict[str, Any]]:
        """Async :meth:`tools`."""
        ...

    async def acall_tool(self, name: str, args: dict[str, Any]) -> str:
        """Async :meth:`call_tool`."""
        ...

    async def asolution(self) -> list[str] | str:
        """Async :meth:`solution`."""
        ...

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class SyncInstance(ABC):
    """An :class:`EnvInstance` whose work is synchronous: the async methods run the sync ones in a worker
    thread (or inline, with ``inline``), and the instance closes when its ``with`` block ends."""

    inline: ClassVar[bool] = False
    """Run the async methods on the event loop itself (work too short to be worth a thread)."""

    @abstractmethod
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]: ...

    @abstractmethod
    def step(self, action: str) -> StepResult: ...

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]: ...

    @abstractmethod
    def call_tool(self, name: str, args: dict[str, Any]) -> str: ...

    @abstractmethod
    def solution(self) -> list[str] | str: ...

    @abstractmethod
    def close(self) -> None: ...

    async def _in_thread(self, call: Callable[..., T], *args: Any) -> T:
        return call(*args) if self.inline else await asyncio.to_thread(call, *args)

    async def areset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Async :meth:`reset`."""
        return await self._in_thread(self.reset, seed, options)

    async def astep(self, action: str) -> StepResult:
        """Async :meth:`step`."""
        return await self._in_thread(self.step, action)

    async def atools(self) -> list[dict[str, Any]]:
        """Async :meth:`tools`."""
        return await self._in_thread(self.tools)

    async def acall_tool(self, name: str, args: dict[str, Any]) -> str:
        """Async :meth:`call_tool`."""
        return await self._in_thread(self.call_tool, name, args)

    async def asolution(self) -> list[str] | str:
        """Async :meth:`solution`."""
        return await self._in_thread(self.solution)

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        await self._in_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@runtime_checkable
class EnvRunner(Protocol):
    """Builds environment instances from source text (native or official format)."""

    @property
    def layers(self) -> dict[str, bool]:
        """Which isolation layers are active (keys: :data:`LAYER_NAMES`)."""
        ...

    def open(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> EnvInstance:
        """Load ``source`` and build one instance (raises SandboxError, kind ``load_error`` and others)."""
        ...

    async def aopen(
        self, source: str, *, filename: str = "<env>", max_turns: int | None = None
    ) -> EnvInstance:
        """Async :meth:`open`."""
        ...

    def close(self) -> None:
        """End every instance and release the runner (idempotent)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...
