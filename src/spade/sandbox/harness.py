"""``Sandbox``: the zygote, a cap on live instances, and ``open`` of fresh single-use instances."""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import socket
import threading
from types import TracebackType
from typing import Any, Self

from spade.config.sandbox import Limits
from spade.sandbox.api import LAYER_NAMES
from spade.sandbox.control import Zygote
from spade.sandbox.errors import SandboxError
from spade.sandbox.handle import EnvHandle


class Sandbox:
    """Runs untrusted environment sources, each instance in its own hardened, single-use process.

    Use it as a context manager (``with Sandbox(Limits(...)) as sb:``); ``open`` is thread-safe and
    ``aopen`` serves asyncio code. Closing the sandbox ends every instance it started.
    """

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._zygote: Zygote | None = None
        self._start_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.limits.max_live_instances)
        self._serials = itertools.count()
        self._closed = False
        self._abandoned: queue.SimpleQueue[int] = queue.SimpleQueue()  # reentrant: safe from finalizers

    # -- life cycle ---------------------------------------------------------------------------------------
    def start(self) -> Self:
        """Start the zygote now (``open`` does it on first use); raises SandboxError if it cannot start."""
        self._ready()
        return self

    def _ready(self) -> Zygote:
        zygote = self._zygote
        if zygote is not None and zygote.alive:
            return zygote
        with self._start_lock:
            if self._closed:
                raise SandboxError("crash", "the sandbox is closed; create a new Sandbox")
            if self._zygote is None or not self._zygote.alive:
                if self._zygote is not None:
                    self._zygote.close()
                self._zygote = Zygote(self.limits)
            return self._zygote

    def close(self) -> None:
        """End every instance and the zygote (idempotent)."""
        with self._start_lock:
            self._closed = True
            zygote, self._zygote = self._zygote, None
        if zygote is not None:
            zygote.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def layers(self) -> dict[str, bool]:
        """Which isolation layers are active on this machine (keys: ``spade.sandbox.LAYER_NAMES``)."""
        zygote = self._ready()
        found = dict.fromkeys(LAYER_NAMES, False)
        found.update(process=True, rlimits=True, no_new_privs=True)
        found.update({k: v for k, v in zygote.layers.items() if k in found})
        found.update(bubblewrap=zygote.bubblewrap, hidden_filesystem=zygote.bubblewrap)
        return found

    @property
    def notes(self) -> list[str]:
        """Why optional layers are off (e.g. 'bwrap is not installed'), and preload modules not installed."""
        zygote = self._ready()
        return [*zygote.notes, *(f"module {m} is not installed" for m in zygote.missing)]

    # -- instances ------------------------------------------------------------------------------------------
    def open(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> EnvHandle:
        """Load ``source`` in a fresh instance and return its handle (SandboxError on any failure)."""
        _check_source(source, filename, max_turns, self.limits.max_source_bytes)
        handle = self._spawn(self.limits.slot_wait_s)
        handle.load(source, filename, max_turns)
        return handle

    async def aopen(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> EnvHandle:
        """Async :meth:`open` (waiting for a slot and forking happen off the event loop)."""
        _check_source(source, filename, max_turns, self.limits.max_source_bytes)
        handle = await asyncio.to_thread(self._spawn, self.limits.slot_wait_s)
        await handle.aload(source, filename, max_turns)
        return handle

    def _reap_abandoned(self) -> None:
        """Free the slots of handles garbage-collected without close().

        Their sockets closed with them, so their children saw EOF, exited and are reaped by the zygote.
        """
        while True:
            try:
                self._abandoned.get_nowait()
            except queue.Empty:
                return
            self._slots.release()

    def _spawn(self, wait_s: float) -> EnvHandle:
        self._reap_abandoned()
        if not self._slots.acquire(timeout=wait_s):
            raise SandboxError(
                "stalled",
                f"no free instance slot within {wait_s:g} s: {self.limits.max_live_instances} instances are "
                "alive (Limits.max_live_instances, Limits.slot_wait_s); close handles you no longer need",
                op="open",
            )
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                self._slots.release()

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            zygote = self._ready()
            pid = zygote.spawn(theirs.fileno(), next(self._serials))
        except BaseException:
            ours.close()
            release()
            raise
        finally:
            theirs.close()
        return EnvHandle(
            ours, pid, self.limits, terminate=zygote.kill, release=release, abandon=self._abandoned.put
        )

    def live_instances(self) -> int:
        """Instance processes the zygote has not reaped yet."""
        return len(self._ready().children())

    def instance_pids(self) -> list[int]:
        """Host pids of every live process under the zygote (for leak checks; empty when none)."""
        zygote = self._zygote
        return zygote.host_pids() if zygote is not None else []

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self._zygote else "not started")
        return f"Sandbox({state}, pid={os.getpid()})"


def _check_source(source: Any, filename: Any, max_turns: Any, max_bytes: int) -> None:
    if type(source) is not str:
        raise TypeError(f"source must be a str, got {type(source).__name__}")
    if type(filename) is not str:
        raise TypeError(f"filename must be a str, got {type(filename).__name__}")
    if max_turns is not None and (type(max_turns) is not int or max_turns < 1):
        raise ValueError(f"max_turns must be a positive int or None, got {max_turns!r}")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise SandboxError(
            "load_error",
            f"the source is {size} bytes, over Limits.max_source_bytes ({max_bytes})",
            op="open",
        )
