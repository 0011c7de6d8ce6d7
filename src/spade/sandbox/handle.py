"""The harness side of one instance: requests with ids, a wall-clock backstop, size caps and validation.

The limit of a call is enforced in the instance in CPU time (:mod:`spade.sandbox.calls`); the harness only
adds a generous wall-clock backstop (``Limits.stall_timeout_s``) reported as ``stalled``.

A handle is single-use and single-threaded: one call at a time. Any failure (timeout, EOF, oversized or
malformed reply, id mismatch, an error reported by the child, a value that fails validation) kills the
instance process and marks the handle failed; every later call raises the same SandboxError again.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import socket
import time
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

from spade.config.sandbox import Limits
from spade.env import StepResult
from spade.errors import SpadeError
from spade.sandbox import decode, validate
from spade.sandbox.api import EnvMeta
from spade.sandbox.errors import ErrorKind, SandboxError

T = TypeVar("T")
Terminate = Callable[[int, float], dict[str, Any]]
"""``(pid, grace_s) -> {"status": {"exited": n} | {"signal": n} | None, "killed": bool}``."""

_READ = 1 << 16
_EOF_GRACE_S = 0.5


class _StopError(SpadeError):
    def __init__(self, kind: ErrorKind | None, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # None: the instance hung up (EOF); its exit status decides the kind


class EnvHandle:
    """One live environment instance in the sandbox (see :class:`spade.sandbox.api.EnvInstance`)."""

    def __init__(
        self,
        sock: socket.socket,
        pid: int,
        limits: Limits,
        *,
        terminate: Terminate,
        release: Callable[[], None],
        abandon: Callable[[int], None],
    ) -> None:
        self._sock, self.pid, self.limits = sock, pid, limits
        self._terminate, self._release = terminate, release
        # A handle dropped without close(): its socket closes with it (the child sees EOF and exits) and the
        # sandbox is told to reap the pid and free the slot (``abandon`` must be safe to call from the GC).
        self._finalizer = weakref.finalize(self, abandon, pid)
        self._buf = bytearray()
        self._ids = itertools.count(1)
        self._failure: SandboxError | None = None
        self._closed = False
        self._busy = False
        self.meta = EnvMeta(class_name="?", max_turns=1, is_tool_env=False, skill="", difficulty_levels=1)

    # -- the API ------------------------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; returns ``(observation, info)``."""
        value = self._call("reset", _reset_args(seed, options))
        return self._valid("reset", lambda: validate.reset_result(value, self.limits))

    def step(self, action: str) -> StepResult:
        """Apply one action; returns ``(observation, reward, terminated, truncated, info)``."""
        value = self._call("step", {"action": _text_arg(action, "action")})
        return self._valid("step", lambda: validate.step_result(value, self.limits))

    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas in OpenAI function format (empty for games)."""
        value = self._call("tools", {})
        return self._valid("tools", lambda: validate.tool_schemas(value, self.limits))

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool natively; bad names and arguments come back as error text."""
        value = self._call("call_tool", _tool_args(name, args))
        return self._valid("call_tool", lambda: validate.tool_output(value, self.limits))

    def solution(self) -> list[str] | str:
        """The scripted winning actions; NotImplementedError when the environment defines none."""
        value = self._call("solution", {})
        if value is None:
            raise NotImplementedError("the environment defines no solution()")
        return self._valid("solution", lambda: validate.solution(value, self.limits))

    async def areset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Async :meth:`reset`."""
        value = await self._acall("reset", _reset_args(seed, options))
        return self._valid("reset", lambda: validate.reset_result(value, self.limits))

    async def astep(self, action: str) -> StepResult:
        """Async :meth:`step`."""
        value = await self._acall("step", {"action": _text_arg(action, "action")})
        return self._valid("step", lambda: validate.step_result(value, self.limits))

    async def atools(self) -> list[dict[str, Any]]:
        """Async :meth:`tools`."""
        value = await self._acall("tools", {})
        return self._valid("tools", lambda: validate.tool_schemas(value, self.limits))

    async def acall_tool(self, name: str, args: dict[str, Any]) -> str:
        """Async :meth:`call_tool`."""
        value = await self._acall("call_tool", _tool_args(name, args))
        return self._valid("call_tool", lambda: validate.tool_output(value, self.limits))

    async def asolution(self) -> list[str] | str:
        """Async :meth:`solution`."""
        value = await self._acall("solution", {})
        if value is None:
            raise NotImplementedError("the environment defines no solution()")
        return self._valid("solution", lambda: validate.solution(value, self.limits))

    @property
    def failed(self) -> SandboxError | None:
        """The failure that ended this instance, or None."""
        return self._failure

    @property
    def closed(self) -> bool:
        """Whether the instance has ended (closed or failed)."""
        return self._closed

    def close(self) -> None:
        """End the instance and reap its process (idempotent)."""
        if not self._closed:
            self._end(grace=0.0)

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        if not self._closed:
            await asyncio.to_thread(self._end, 0.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- one request ----------------------------------------------------------------------------------------
    def load(self, source: str, filename: str, max_turns: int | None) -> None:
        """Load the source in the instance (done once by ``Sandbox.open``)."""
        args = {"source": source, "filename": filename, "max_turns": max_turns}
        value = self._call("load", args)
        self.meta = self._valid("load", lambda: decode.meta(value))

    async def aload(self, source: str, filename: str, max_turns: int | None) -> None:
        """Async :meth:`load`."""
        args = {"source": source, "filename": filename, "max_turns": max_turns}
        value = await self._acall("load", args)
        self.meta = self._valid("load", lambda: decode.meta(value))

    def _begin(self, op: str, args: dict[str, Any]) -> tuple[int, bytes]:
        if self._failure is not None:
            raise SandboxError(self._failure.kind, f"the instance already failed: {self._failure}", op=op)
        if self._closed:
            raise SandboxError("protocol", "the instance is closed; open a new one", op=op)
        if self._busy:
            raise RuntimeError("EnvHandle is not thread-safe: one call at a time")
        rid = next(self._ids)
        return rid, json.dumps({"id": rid, "op": op, "args": args}).encode() + b"\n"

    def _call(self, op: str, args: dict[str, Any]) -> Any:
        rid, data = self._begin(op, args)
        timeout = self.limits.stall_timeout_s
        deadline = time.monotonic() + timeout
        self._busy = True
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(data)
            while (line := self._take_line()) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                self._sock.settimeout(remaining)
                self._feed(self._sock.recv(_READ))
        except TimeoutError:
            self._fail("stalled", _stall_message(op, timeout), op)
        except (_StopError, OSError) as exc:
            self._stopped(exc, op)
        finally:
            self._busy = False
        return self._decode(line, rid, op)

    async def _acall(self, op: str, args: dict[str, Any]) -> Any:
        rid, data = self._begin(op, args)
        timeout = self.limits.stall_timeout_s
        loop = asyncio.get_running_loop()
        self._busy = True
        try:
            self._sock.setblocking(False)
            async with asyncio.timeout(timeout):
                await loop.sock_sendall(self._sock, data)
                while (line := self._take_line()) is None:
                    self._feed(await loop.sock_recv(self._sock, _READ))
        except TimeoutError:
            await asyncio.to_thread(self._fail_quietly, "stalled", _stall_message(op, timeout), op)
            raise self._failure_error() from None
        except (_StopError, OSError) as exc:
            await asyncio.to_thread(self._stopped_quietly, exc, op)
            raise self._failure_error() from None
        except asyncio.CancelledError:
            self._fail_quietly("crash", f"{op} was cancelled by the caller; the instance was ended", op)
            raise
        finally:
            self._busy = False
        return self._decode(line, rid, op)

    def _feed(self, chunk: bytes) -> None:
        if not chunk:
            raise _StopError(None, "EOF")
        self._buf += chunk
        if len(self._buf) > self.limits.max_reply_bytes:
            raise _StopError("protocol", f"the reply exceeds max_reply_bytes ({self.limits.max_reply_bytes})")

    def _take_line(self) -> bytes | None:
        end = self._buf.find(b"\n")
        if end < 0:
            return None
        if end != len(self._buf) - 1:
            raise _StopError(
                "protocol", "the instance sent data beyond its reply (forged or unsolicited output)"
            )
        line = bytes(self._buf[:end])
        self._buf.clear()
        return line

    def _decode(self, line: bytes, rid: int, op: str) -> Any:
        try:
            return decode.parse(line, rid, op)
        except SandboxError as exc:
            self._fail_with(exc)

    def _valid(self, op: str, check: Callable[[], T]) -> T:
        try:
            return check()
        except validate.InvalidValueError as exc:
            self._fail_with(validate.InvalidValueError(exc.field, exc.problem, exc.message, op=op))

    # -- ending ----------------------------------------------------------------------------------------------
    def _end(self, grace: float) -> dict[str, Any]:
        if self._closed:
            return {"status": None, "killed": False}
        self._closed = True
        self._finalizer.detach()
        self._sock.close()
        try:
            return self._terminate(self.pid, grace)
        except SandboxError:
            return {"status": None, "killed": False}  # the zygote is gone, and its children with it
        finally:
            self._release()

    def _fail_quietly(self, kind: ErrorKind, message: str, op: str) -> None:
        self._end(grace=0.0)
        if self._failure is None:
            self._failure = SandboxError(kind, message, op=op)

    def _fail(self, kind: ErrorKind, message: str, op: str) -> NoReturn:
        self._fail_with(SandboxError(kind, message, op=op))

    def _fail_with(self, error: SandboxError) -> NoReturn:
        self._end(grace=0.0)
        if self._failure is None:
            self._failure = error
        raise self._failure_error()

    def _stopped_quietly(self, exc: BaseException, op: str) -> None:
        if isinstance(exc, _StopError) and exc.kind is not None:
            self._fail_quietly(exc.kind, str(exc), op)
            return
        ended = self._end(grace=_EOF_GRACE_S)
        if self._failure is None:
            kind, message = decode.explain_exit(ended, op, self.limits)
            self._failure = SandboxError(kind, message, op=op)

    def _stopped(self, exc: BaseException, op: str) -> NoReturn:
        self._stopped_quietly(exc, op)
        raise self._failure_error()

    def _failure_error(self) -> SandboxError:
        failure = self._failure
        if failure is None:  # pragma: no cover - every caller records a failure first
            return SandboxError("crash", "the instance ended")
        return copy.copy(failure)  # a fresh exception object per raise (tracebacks do not pile up)


def _stall_message(op: str, timeout: float) -> str:
    return (
        f"{op} neither answered nor used up its CPU-time limit within {timeout:g} s of wall-clock time "
        "(Limits.stall_timeout_s): the environment blocks (a lock, a pipe, a wait), or the machine is starved; "
        "environments must never wait"
    )


def _reset_args(seed: int | None, options: dict[str, Any] | None) -> dict[str, Any]:
    if seed is not None and (type(seed) is not int):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    if options is not None and type(options) is not dict:
        raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
    return {"seed": seed, "options": options}


def _text_arg(value: str, what: str) -> str:
    if type(value) is not str:
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value


def _tool_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if type(args) is not dict:
        raise TypeError(f"tool arguments must be a dict, got {type(args).__name__}")
    return {"name": _text_arg(name, "tool name"), "args": args}
