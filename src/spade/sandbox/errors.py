"""The one exception type of the sandbox boundary, with a machine-readable kind."""

from __future__ import annotations

from typing import Literal, get_args

from spade.errors import SpadeError

ErrorKind = Literal[
    "timeout", "stalled", "memory", "crash", "load_error", "protocol", "invalid_value", "forbidden"
]
"""Why an instance failed.

``timeout``: a call used up its CPU-time limit (``Limits.call_timeout_s`` / ``load_timeout_s``) or the
instance used up its lifetime CPU seconds. Measured in CPU time, so it does not depend on machine load.
``stalled``: a call neither answered nor used up its CPU-time limit within ``Limits.stall_timeout_s`` of
wall-clock time (it blocked, or the machine is starved), or no instance slot came free within
``Limits.slot_wait_s``. The only verdict that depends on wall time, hence reported apart.
``memory``: the instance ran out of its address-space limit.
``crash``: the environment raised, exited (``sys.exit``, ``os._exit``) or died on a signal
(e.g. a C stack overflow).
``load_error``: the source does not define a loadable environment (syntax, no class, ``__init__`` raised).
``protocol``: the instance broke the wire protocol (bad JSON, wrong id, extra or oversized output, EOF).
``invalid_value``: a returned value failed validation (type, NaN/inf/bool reward, range, size, JSON-safety).
``forbidden``: the environment attempted something the sandbox denies (network, processes, threads, writes,
signals).
"""

ERROR_KINDS: frozenset[str] = frozenset(get_args(ErrorKind))


class SandboxError(SpadeError):
    """An environment instance failed; ``kind`` says how and the message says what to change.

    After a SandboxError the instance is dead: every later call on its handle raises again.
    """

    def __init__(self, kind: ErrorKind, message: str, *, op: str = "") -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.op = op
        """The call that failed (``load``, ``reset``, ``step``, ...), empty when not tied to one."""

    def __str__(self) -> str:
        where = f" in {self.op}" if self.op else ""
        return f"{self.kind}{where}: {self.message}"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.kind, self.message, self.op))


def _rebuild(kind: ErrorKind, message: str, op: str) -> SandboxError:
    return SandboxError(kind, message, op=op)
