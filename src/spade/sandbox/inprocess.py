"""UNSAFE in-process runner: the sandbox API without isolation, for trusted code only.

:class:`InProcessSandbox` executes environment source in the calling process (through
:func:`spade.envs.loader.load_env_factory`), so it is as fast as an environment can be (a step costs a few
microseconds) and runs anywhere. It gives **no protection at all**: no time or memory limits, no seccomp, no
separate process. Use it for the seed library, your own files and tests; generated code goes through
:class:`spade.sandbox.Sandbox`.

It keeps the sandbox's observable contract so the two are interchangeable: every value is validated by the
harness (:mod:`spade.sandbox.validate`), every failure is a :class:`~spade.sandbox.errors.SandboxError` with a
kind (exceptions raised by the environment are ``crash``, a ``MemoryError`` is ``memory``, a bad source is
``load_error``), an instance is dead after its first failure, and ``solution()`` raises NotImplementedError
when the environment defines none. Each ``open`` executes the source afresh, so module-level state is never
shared between instances (as with one process per instance).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from spade.config.sandbox import Limits
from spade.env import StepResult, TextEnv, ToolEnv
from spade.envs.loader import EnvLoadError, load_env_factory
from spade.envs.official import OfficialEnv
from spade.sandbox import validate
from spade.sandbox.api import LAYER_NAMES, EnvMeta, SyncInstance
from spade.sandbox.errors import ErrorKind, SandboxError

T = TypeVar("T")


def _describe(exc: BaseException) -> str:
    """``Type: message (line N)`` with the innermost line of environment code when known."""
    line = ""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<"):
            line = f" (line {tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(exc).__name__}: {exc}{line}"


def _guard(op: str, kind: ErrorKind, call: Callable[[], T]) -> T:
    """Run environment code; anything it raises becomes a SandboxError (the one boundary of this module)."""
    try:
        return call()
    except SandboxError:
        raise
    except MemoryError as exc:
        raise SandboxError("memory", f"the environment ran out of memory: {_describe(exc)}", op=op) from exc
    except RecursionError as exc:
        raise SandboxError("crash", f"unbounded recursion: {_describe(exc)}", op=op) from exc
    except SystemExit as exc:
        raise SandboxError("crash", f"the environment called exit ({exc.code!r})", op=op) from exc
    except Exception as exc:  # boundary: any error raised by environment code is data, not a crash
        raise SandboxError(kind, _describe(exc), op=op) from exc


def _meta(env: TextEnv) -> EnvMeta:
    inner = env.inner if isinstance(env, OfficialEnv) else env
    return EnvMeta(
        class_name=type(inner).__name__,
        max_turns=int(env.max_turns),
        is_tool_env=env.is_tool_env if isinstance(env, OfficialEnv) else isinstance(env, ToolEnv),
        skill=str(getattr(type(inner), "skill", "") or ""),
        difficulty_levels=int(getattr(type(inner), "difficulty_levels", 1) or 1),
    )


class InProcessInstance(SyncInstance):
    """One environment instance living in this process (see the module docstring: no isolation)."""

    inline = True

    def __init__(self, env: TextEnv, limits: Limits) -> None:
        self._env = env
        self._limits = limits
        self._failed: SandboxError | None = None
        self._closed = False
        self.meta = _meta(env)

    def _call(self, op: str, call: Callable[[], T]) -> T:
        if self._failed is not None:
            raise SandboxError(self._failed.kind, f"instance already failed: {self._failed.message}", op=op)
        if self._closed:
            raise SandboxError("protocol", "instance is closed", op=op)
        try:
            return _guard(op, "crash", call)
        except SandboxError as exc:
            self._failed = exc
            raise

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; returns the validated ``(observation, info)``."""
        return self._call(
            "reset", lambda: validate.reset_result(self._env.reset(seed=seed, options=options), self._limits)
        )

    def step(self, action: str) -> StepResult:
        """Apply one action; returns the validated 5-tuple."""
        if not isinstance(action, str):
            raise TypeError(f"action must be a str, got {type(action).__name__}")
        return self._call("step", lambda: validate.step_result(self._env.step(action), self._limits))

    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas in OpenAI function format (empty for games)."""
        env = self._env
        if not isinstance(env, ToolEnv) or (isinstance(env, OfficialEnv) and not env.is_tool_env):
            return []
        return self._call("tools", lambda: validate.tool_schemas(env.tool_schemas(), self._limits))

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool; bad names and arguments come back as error text."""
        env = self._env
        if not isinstance(env, ToolEnv):
            return "Error: this environment has no tools."
        return self._call("call_tool", lambda: validate.tool_output(env.call_tool(name, args), self._limits))

    def solution(self) -> list[str] | str:
        """The scripted winning actions; NotImplementedError when the environment defines none."""
        try:
            value = self._call("solution", self._env.solution)
        except SandboxError as exc:
            if isinstance(exc.__cause__, NotImplementedError):
                self._failed = None  # a missing solution leaves the instance usable, as in the sandbox
                raise NotImplementedError("the environment defines no solution()") from None
            raise
        return self._call("solution", lambda: validate.solution(value, self._limits))

    def close(self) -> None:
        """End the instance (idempotent)."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(SandboxError):  # closing never fails from the caller's point of view
                _guard("close", "crash", self._env.close)


class InProcessSandbox:
    """UNSAFE runner with the sandbox API: environment code runs in this process, unlimited.

    Args:
        limits: only the value-validation fields apply (observation size, reward range, info size, tools,
            solution length, source size); time, memory and isolation limits are not enforced.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._closed = False

    @property
    def layers(self) -> dict[str, bool]:
        """No isolation layer is active."""
        return dict.fromkeys(LAYER_NAMES, False)

    def open(
        self, source: str, *, filename: str = "<env>", max_turns: int | None = None
    ) -> InProcessInstance:
        """Execute ``source`` and build one instance (``load_error`` when it does not define one)."""
        if self._closed:
            raise SandboxError("protocol", "the runner is closed", op="load")
        size = len(source.encode())
        if size > self.limits.max_source_bytes:
            raise SandboxError(
                "load_error",
                f"source is {size} bytes, over the limit of {self.limits.max_source_bytes}",
                op="load",
            )
        if not filename.startswith("<"):
            filename = f"<{filename}>"  # marks environment frames in error messages
        try:
            factory = _guard("load", "load_error", lambda: load_env_factory(source, filename, max_turns))
            env = _guard("load", "load_error", factory)
        except SandboxError as exc:
            if isinstance(exc.__cause__, EnvLoadError):
                raise SandboxError("load_error", str(exc.__cause__), op="load") from exc.__cause__
            raise
        return InProcessInstance(env, self.limits)

    async def aopen(
        self, source: str, *, filename: str = "<env>", max_turns: int | None = None
    ) -> InProcessInstance:
        """Async :meth:`open` (runs inline)."""
        return self.open(source, filename=filename, max_turns=max_turns)

    def close(self) -> None:
        """Mark the runner closed (idempotent); instances already open keep working."""
        self._closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["InProcessInstance", "InProcessSandbox"]
