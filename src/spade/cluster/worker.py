"""The body of one cluster worker: a sandbox of its own, the instances it holds, and whole checks.

:class:`EnvWorker` is plain Python (no Ray) so it can be tested alone; :mod:`spade.cluster.ray_runner` turns
it into a Ray actor. Every call answers with a :class:`Reply` instead of raising, so that the caller gets the
sandbox's :class:`~spade.sandbox.SandboxError` (with its kind) back intact across the process boundary and
can tell it apart from the worker itself dying.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from spade.checker import Checker, CheckReport
from spade.sandbox import EnvInstance, EnvMeta, Limits, Sandbox, SandboxError

Op = Literal["reset", "step", "tools", "call_tool", "solution"]
"""Calls a caller may make on a held instance."""

REPLAYED_OPS: frozenset[str] = frozenset({"reset", "step", "call_tool"})
"""Calls that change an instance's state: rerun in order to rebuild it on another worker."""


@dataclass(frozen=True, slots=True)
class Reply:
    """The outcome of one call on a worker."""

    status: Literal["ok", "error", "no_solution"]
    """'ok': ``value`` holds the result; 'error': ``error`` killed the instance; 'no_solution': the
    environment defines no ``solution()`` (the instance stays usable)."""
    value: Any = None
    error: SandboxError | None = None


_CALLS: dict[str, Callable[..., Any]] = {
    "reset": lambda env, seed, options: env.reset(seed=seed, options=options),
    "step": lambda env, action: env.step(action),
    "tools": lambda env: env.tools(),
    "call_tool": lambda env, name, args: env.call_tool(name, args),
    "solution": lambda env: env.solution(),
}


class EnvWorker:
    """Holds one sandbox (its zygote starts here) and the live instances opened through it.

    Thread-safe: a Ray actor runs several calls at once (``max_concurrency``), each on its own instance.
    """

    def __init__(self, limits: Limits) -> None:
        self._sandbox = Sandbox(limits).start()
        self._instances: dict[int, EnvInstance] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def open(self, source: str, filename: str, max_turns: int | None) -> Reply:
        """Build one instance; ``value`` is ``(instance id, EnvMeta)``."""
        try:
            env = self._sandbox.open(source, filename=filename, max_turns=max_turns)
        except SandboxError as exc:
            return Reply("error", error=exc)
        with self._lock:
            iid = next(self._ids)
            self._instances[iid] = env
        meta: EnvMeta = env.meta
        return Reply("ok", (iid, meta))

    def call(self, iid: int, op: Op, args: tuple[Any, ...]) -> Reply:
        """Run ``op`` on instance ``iid``; an error ends the instance."""
        with self._lock:
            env = self._instances.get(iid)
        if env is None:
            return Reply("error", error=SandboxError("crash", f"instance {iid} is closed", op=op))
        try:
            return Reply("ok", _CALLS[op](env, *args))
        except NotImplementedError:
            return Reply("no_solution")
        except SandboxError as exc:
            self.close(iid)
            return Reply("error", error=exc)

    def close(self, iid: int) -> None:
        """End instance ``iid`` (idempotent)."""
        with self._lock:
            env = self._instances.pop(iid, None)
        if env is not None:
            env.close()

    def check(self, source: str, checker: Checker, seed: int | None, filename: str) -> CheckReport:
        """Run the validation ladder on ``source`` in this worker's sandbox."""
        return checker.check(source, self._sandbox, seed=seed, filename=filename)

    def layers(self) -> dict[str, bool]:
        """The isolation layers of this worker's sandbox."""
        return self._sandbox.layers

    def live_instances(self) -> int:
        """Instances open now."""
        with self._lock:
            return len(self._instances)

    def shutdown(self) -> None:
        """End every instance and the zygote."""
        with self._lock:
            held, self._instances = list(self._instances.values()), {}
        for env in held:
            env.close()
        self._sandbox.close()
