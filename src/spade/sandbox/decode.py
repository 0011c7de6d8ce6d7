"""What comes back from an instance, interpreted: reply lines, the instance description, exit statuses.

Pure functions. Nothing from a child is trusted: a reply is parsed with ``json.loads`` (no NaN/Infinity
tokens), must answer the request id exactly and have exactly the fields of a result or an error.
"""

from __future__ import annotations

import json
import signal
from typing import Any, cast, get_args

from spade.config.sandbox import Limits
from spade.sandbox import validate
from spade.sandbox.api import EnvMeta
from spade.sandbox.errors import ERROR_KINDS, ErrorKind, SandboxError

_CRASH_SIGNALS = {
    signal.SIGSEGV: "a C stack overflow (deep recursion past sys.setrecursionlimit) or a native crash",
    signal.SIGBUS: "a native crash",
    signal.SIGABRT: "an abort in native code",
    signal.SIGILL: "a native crash",
    signal.SIGFPE: "a native arithmetic error",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def parse(line: bytes, rid: int, op: str) -> Any:
    """The value of a result reply to request ``rid``; an error reply (or junk) raises its SandboxError."""
    try:
        reply = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise SandboxError(
            "protocol", f"the instance sent a malformed reply: {str(exc)[:200]}", op=op
        ) from None
    if type(reply) is not dict or type(reply.get("id")) is not int or reply["id"] != rid:
        raise SandboxError("protocol", "the reply does not answer this request (wrong or missing id)", op=op)
    if reply.get("ok") is True and len(reply) == 3 and "value" in reply:
        return reply["value"]
    kind, error = reply.get("kind"), reply.get("error")
    if reply.get("ok") is False and len(reply) in (4, 6) and kind in ERROR_KINDS and type(error) is str:
        field, problem = reply.get("field"), reply.get("problem")
        if kind == "invalid_value" and field in _FIELDS and problem in _PROBLEMS:
            detail = (cast(validate.ValueField, field), cast(validate.ValueProblem, problem))
            raise validate.InvalidValueError(*detail, error[:4000], op=op)
        if len(reply) == 4:
            raise SandboxError(cast(ErrorKind, kind), error[:4000], op=op)
    raise SandboxError("protocol", "the reply is not a well-formed result or error", op=op)


_FIELDS = frozenset(get_args(validate.ValueField))
_PROBLEMS = frozenset(get_args(validate.ValueProblem))
_MAX_NAME = 200


def meta(value: Any) -> EnvMeta:
    """The instance description sent after loading, validated field by field."""

    def bad(message: str) -> validate.InvalidValueError:
        return validate.InvalidValueError("result", "type", message, op="load")

    if type(value) is not dict:
        raise bad(f"the instance description must be a dict, got {type(value).__name__}")
    name, skill = value.get("class_name"), value.get("skill")
    turns, levels, tools = value.get("max_turns"), value.get("difficulty_levels"), value.get("is_tool_env")
    if type(name) is not str or not 0 < len(name) <= _MAX_NAME:
        raise bad("the environment class name must be a non-empty str")
    if type(skill) is not str or len(skill) > _MAX_NAME:
        raise bad("skill must be a str of at most 200 characters")
    if type(turns) is not int or not 1 <= turns <= 1_000_000:
        raise bad(f"max_turns must be an int in [1, 1000000], got {turns!r:.40}")
    if type(levels) is not int or not 1 <= levels <= 1000:
        raise bad(f"difficulty_levels must be an int in [1, 1000], got {levels!r:.40}")
    if type(tools) is not bool:
        raise bad("is_tool_env must be a bool")
    return EnvMeta(class_name=name, max_turns=turns, is_tool_env=tools, skill=skill, difficulty_levels=levels)


def explain_exit(ended: dict[str, Any], op: str, limits: Limits) -> tuple[ErrorKind, str]:
    """Kind and message for an instance that hung up during ``op``, from what the zygote saw (Terminate)."""
    status = ended.get("status")
    if not status:
        return "crash", f"the instance process ended during {op} and its exit status is unknown"
    sig = status.get("signal")
    if ended.get("killed"):
        return "crash", (
            f"the instance closed its connection during {op} but kept running (it was killed); environments "
            "must not touch the sandbox's file descriptors"
        )
    if sig == signal.SIGVTALRM:
        limit, name = (
            (limits.load_timeout_s, "load_timeout_s")
            if op == "load"
            else (limits.call_timeout_s, "call_timeout_s")
        )
        return "timeout", (
            f"{op} used more than {limit:g} s of CPU time (Limits.{name}); look for loops that never end or an "
            "exponential search"
        )
    if sig in (signal.SIGXCPU, signal.SIGKILL):
        return "timeout", (
            f"the instance used up its CPU time (Limits.cpu_seconds={limits.cpu_seconds}) or was killed by "
            "the kernel; look for loops that never end"
        )
    if sig == signal.SIGSYS:
        return (
            "forbidden",
            "the instance made a system call the sandbox does not allow (foreign architecture)",
        )
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
        why = _CRASH_SIGNALS.get(sig, "a fatal signal")
        return "crash", f"the instance process died on {name} during {op}: {why}"
    code = status.get("exited")
    if code == 90:
        return "crash", "the instance process could not apply the sandbox layers (see Sandbox.layers)"
    return "crash", (
        f"the instance process exited with status {code} during {op}: environments must not call os._exit, "
        "close the sandbox socket or exit the interpreter"
    )
