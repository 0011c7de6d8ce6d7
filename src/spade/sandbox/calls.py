"""The child's side of the protocol: one environment instance answering requests.

Each request runs under a CPU-time limit of the instance's own user-mode time (``ITIMER_VIRTUAL``; its
SIGVTALRM keeps the default action, so the process ends and the harness reports ``timeout``). User time is
what the environment computes; it does not grow with machine load, and the kernel's page-fault work of a
memory bomb (system time) does not count, so which limit a design hits first does not depend on the machine's
state.

Request: ``{"id": n, "op": name, "args": {...}}``. Reply: ``{"id": n, "ok": true, "value": v}`` or
``{"id": n, "ok": false, "kind": k, "error": message}``. Values are checked here with the harness's own
validators only to give precise messages early; the harness validates again and trusts nothing from here.
"""

from __future__ import annotations

import errno
import json
import traceback
from collections.abc import Callable
from signal import ITIMER_VIRTUAL, setitimer  # bound before guard.install() replaces signal.setitimer
from typing import Any

from spade.config.sandbox import Limits
from spade.env import TextEnv, ToolEnv
from spade.envs.loader import EnvLoadError, load_env_factory
from spade.errors import SpadeError
from spade.sandbox import guard, validate
from spade.sandbox.errors import ErrorKind

_MAX_MESSAGE = 2000


class _CallError(SpadeError):
    def __init__(self, kind: ErrorKind, message: str, detail: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.detail = detail or {}


def _plain(value: Any) -> Any:
    """numpy scalars (common in official-format files) become the Python values they hold."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


class Session:
    """One instance: ``load`` builds it, later requests call it."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.env: TextEnv | None = None
        self.filename = "<env>"
        self.source_lines: list[str] = []
        self._ops: dict[str, Callable[[dict[str, Any]], Any]] = {
            "load": self._load,
            "reset": self._reset,
            "step": self._step,
            "tools": self._tools,
            "call_tool": self._call_tool,
            "solution": self._solution,
        }

    def answer(self, request: dict[str, Any]) -> bytes:
        """Run one request under its CPU-time limit and encode its reply line."""
        name = request.get("op", "")
        limit = self.limits.load_timeout_s if name == "load" else self.limits.call_timeout_s
        setitimer(ITIMER_VIRTUAL, limit)  # SIGVTALRM (default action: terminate) past the limit
        try:
            return self._answer(request)
        finally:
            setitimer(ITIMER_VIRTUAL, 0)

    def _answer(self, request: dict[str, Any]) -> bytes:
        rid = request.get("id")
        op = self._ops.get(request.get("op", ""))
        try:
            if op is None:
                raise _CallError("protocol", f"unknown request {request.get('op')!r}")
            value = op(request.get("args") or {})
            found = guard.take()
            if found:
                raise _CallError("forbidden", _forbidden_message(found))
            reply: dict[str, Any] = {"id": rid, "ok": True, "value": value}
            data = json.dumps(reply, allow_nan=False).encode()
        except _CallError as exc:
            return _error(rid, exc.kind, str(exc), exc.detail)
        except (TypeError, ValueError, RecursionError) as exc:
            return _error(rid, "invalid_value", f"the result cannot be sent as JSON: {exc}")
        except MemoryError:
            return _error(rid, "memory", "the result is too large to encode within the address-space limit")
        if len(data) >= self.limits.max_reply_bytes:
            return _error(rid, "invalid_value", f"the result is {len(data)} bytes, over max_reply_bytes")
        return data + b"\n"

    # -- operations -------------------------------------------------------------------------------------
    def _load(self, args: dict[str, Any]) -> dict[str, Any]:
        source, self.filename = args["source"], args.get("filename") or "<env>"
        self.source_lines = source.splitlines()
        env = self._guarded("load", lambda: _build(source, self.filename, args.get("max_turns")))
        self.env = env
        tools = getattr(env, "is_tool_env", isinstance(env, ToolEnv))
        return {
            "class_name": type(getattr(env, "inner", env)).__name__,
            "max_turns": _plain(env.max_turns),
            "is_tool_env": tools is True,
            "skill": str(getattr(env, "skill", "") or ""),
            "difficulty_levels": _plain(getattr(env, "difficulty_levels", 1)),
        }

    def _instance(self) -> TextEnv:
        if self.env is None:
            raise _CallError("protocol", "no environment loaded")
        return self.env

    def _reset(self, args: dict[str, Any]) -> Any:
        env = self._instance()
        result = self._guarded("reset", lambda: env.reset(seed=args.get("seed"), options=args.get("options")))
        return self._check(lambda: validate.reset_result(result, self.limits))

    def _step(self, args: dict[str, Any]) -> Any:
        env = self._instance()
        result = self._guarded("step", lambda: env.step(args["action"]))
        return self._check(lambda: validate.step_result(result, self.limits))

    def _tools(self, args: dict[str, Any]) -> Any:
        env = self._instance()
        schemas = getattr(env, "tool_schemas", None)
        result = self._guarded("tools", schemas) if callable(schemas) else []
        return self._check(lambda: validate.tool_schemas(result, self.limits))

    def _call_tool(self, args: dict[str, Any]) -> Any:
        env = self._instance()
        call = getattr(env, "call_tool", None)
        if not callable(call):
            return "Error: this environment has no tools."
        result = self._guarded("call_tool", lambda: call(args["name"], args["args"]))
        return self._check(lambda: validate.tool_output(result, self.limits))

    def _solution(self, args: dict[str, Any]) -> Any:
        env = self._instance()
        try:
            result = env.solution()
        except NotImplementedError:
            return None  # no scripted solution: not a failure
        except BaseException as exc:
            raise self._classify("solution", exc) from None
        return self._check(lambda: validate.solution(result, self.limits))

    # -- helpers ----------------------------------------------------------------------------------------
    def _guarded(self, op: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except BaseException as exc:
            raise self._classify(op, exc) from None

    def _check(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except validate.InvalidValueError as exc:
            detail: dict[str, str] = {"field": exc.field, "problem": exc.problem}
            raise _CallError("invalid_value", exc.message, detail) from None

    def _classify(self, op: str, exc: BaseException) -> _CallError:
        found = guard.take()
        where = self._where(exc)
        if found:
            return _CallError("forbidden", _forbidden_message(found))
        if isinstance(exc, MemoryError):
            return _CallError("memory", f"{op} ran out of memory (the address-space limit){where}")
        if isinstance(exc, OSError) and exc.errno == errno.EPERM:
            return _CallError("forbidden", f"{op} attempted an operation the sandbox denies: {exc}{where}")
        if isinstance(exc, SystemExit):
            return _CallError(
                "crash", f"{op} called sys.exit({exc.code!r}){where}; environments must not exit"
            )
        described = f"{type(exc).__name__}: {_short(str(exc))}"
        if op == "load" and not isinstance(exc, RecursionError):
            if isinstance(exc, EnvLoadError):
                return _CallError("load_error", str(exc))
            return _CallError("load_error", f"building the environment raised {described}{where}")
        return _CallError("crash", f"{op} raised {described}{where}")

    def _where(self, exc: BaseException) -> str:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == self.filename]
        if not frames:
            return ""
        line = frames[-1].lineno or 0
        code = self.source_lines[line - 1].strip() if 0 < line <= len(self.source_lines) else ""
        return f" (at {self.filename} line {line}: {_short(code, 120)})"


def _build(source: str, filename: str, max_turns: int | None) -> TextEnv:
    return load_env_factory(source, filename, max_turns)()


def _short(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _forbidden_message(found: list[str]) -> str:
    return (
        f"the environment attempted {', '.join(dict.fromkeys(found))}; environments may not use the network, "
        "processes, threads, file writes, signals or native code"
    )


def _error(rid: Any, kind: ErrorKind, message: str, detail: dict[str, str] | None = None) -> bytes:
    reply = {"id": rid, "ok": False, "kind": kind, "error": _short(message, _MAX_MESSAGE), **(detail or {})}
    return json.dumps(reply, ensure_ascii=True).encode() + b"\n"
