"""Plays and checks on Ray: worker actors across nodes, each with its own sandbox; the policy stays here.

:class:`RayRunner` is an :class:`~spade.sandbox.EnvRunner`: ``aopen`` places a new instance on the least
loaded live worker and returns a :class:`RemoteInstance` whose calls go to that worker. The loop's process
keeps sampling from the policy; only environment calls cross to the workers. ``acheck`` runs a whole
validation ladder on one worker.

Fault tolerance: a worker (actor) or its node lost mid-episode is detected by Ray (``RayActorError``); the
instance is rebuilt on another worker by replaying its calls so far (``reset(seed)`` then the same actions:
environments are deterministic under a seed, and the replayed results must match what the agent saw), and
the episode goes on; a check is rerun from the start. Each rerun counts in ``cluster/retries``, each dead
worker in ``cluster/actors_lost``. Only this module imports Ray, and only when the config asks for it.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from spade.checker import Checker, CheckReport
from spade.cluster.placement import ClusterError, ClusterLedger, node_label, parse_resources, pick_worker
from spade.cluster.worker import REPLAYED_OPS, EnvWorker, Op, Reply
from spade.config import ClusterConfig
from spade.env import StepResult
from spade.sandbox import LAYER_NAMES, EnvMeta, Limits, SandboxError

T = TypeVar("T")


class _RayEnvWorker(EnvWorker):
    def node_id(self) -> str:
        """The Ray node this worker runs on."""
        return str(ray.get_runtime_context().get_node_id())


@dataclass
class _Worker:
    handle: Any
    node: str
    alive: bool = True
    load: int = 0
    assigned: int = 0


class RayRunner:
    """Environment instances and checks on Ray worker actors (see the module docstring)."""

    def __init__(self, cfg: ClusterConfig, limits: Limits) -> None:
        self.cfg = cfg
        self.ledger = ClusterLedger()
        self._lock = threading.Lock()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            _connect(cfg)
        try:
            self._workers, self._layers = _start_workers(cfg, limits)
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
            raise

    # -- EnvRunner ------------------------------------------------------------------------------------------
    @property
    def layers(self) -> dict[str, bool]:
        """Isolation layers active in every worker's sandbox (one worker without a layer turns it off)."""
        return dict(self._layers)

    def open(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> RemoteInstance:
        """Sync :meth:`aopen` (for threads without a running event loop)."""
        return _run(self.aopen(source, filename=filename, max_turns=max_turns))

    async def aopen(
        self, source: str, *, filename: str = "<env>", max_turns: int | None = None
    ) -> RemoteInstance:
        """Build one instance on the least loaded live worker (raises SandboxError, or ClusterError)."""
        env = RemoteInstance(self, source, filename, max_turns)
        await env.start()
        return env

    async def acheck(self, source: str, checker: Checker, *, seed: int | None, filename: str) -> CheckReport:
        """Run the validation ladder on one worker; rerun elsewhere when that worker is lost."""
        lost = 0
        while True:
            w = self.acquire()
            try:
                report: CheckReport = await w.handle.check.remote(source, checker, seed, filename)
            except RayActorError:
                self.lose(w)
                lost += 1
                self.retry_or_fail(lost, "check")
                continue
            finally:
                self.release(w)
            self.ledger.checks[w.node] += 1
            return report

    def metrics(self) -> dict[str, float]:
        """The cluster's metrics since the last call (``cluster/*``)."""
        with self._lock:
            live = [w for w in self._workers if w.alive]
            return self.ledger.take(len(live), Counter(w.node for w in live))

    @property
    def nodes(self) -> list[str]:
        """Node label of each worker, in worker order."""
        return [w.node for w in self._workers]

    def close(self) -> None:
        """Stop every worker (their sandboxes end with them) and leave Ray if this runner joined it."""
        workers, self._workers = self._workers, []
        stops = [w.handle.shutdown.remote() for w in workers if w.alive]
        try:
            if stops:
                ray.wait(stops, num_returns=len(stops), timeout=10.0)
        finally:
            for w in workers:
                ray.kill(w.handle)
            if self._owns_ray:
                ray.shutdown()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- placement and accounting (used by RemoteInstance) --------------------------------------------------
    def acquire(self) -> _Worker:
        """Reserve a slot on the least loaded live worker (raises ClusterError when none is left)."""
        with self._lock:
            ws = self._workers
            i = pick_worker([w.load for w in ws], [w.assigned for w in ws], [w.alive for w in ws])
            ws[i].load += 1
            ws[i].assigned += 1
            return ws[i]

    def release(self, w: _Worker) -> None:
        """Give back a slot taken by :meth:`acquire`."""
        with self._lock:
            w.load -= 1

    def lose(self, w: _Worker) -> None:
        """Mark a worker dead (counted once)."""
        with self._lock:
            if w.alive:
                w.alive = False
                self.ledger.actors_lost += 1

    def retry_or_fail(self, lost: int, what: str) -> None:
        """Count one rerun, or raise once a job has lost ``max_retries + 1`` workers."""
        with self._lock:
            if lost > self.cfg.max_retries:
                self.ledger.failed += 1
                raise SandboxError(
                    "crash",
                    f"the {what} lost its Ray worker {lost} times (cluster.max_retries={self.cfg.max_retries})",
                )
            self.ledger.retries += 1


class RemoteInstance:
    """One environment instance held by a worker; rebuilt on another worker if that one is lost."""

    def __init__(self, runner: RayRunner, source: str, filename: str, max_turns: int | None) -> None:
        self._runner = runner
        self._source, self._filename, self._max_turns = source, filename, max_turns
        self._log: list[tuple[Op, tuple[Any, ...], Any]] = []
        self._worker: _Worker | None = None
        self._iid = -1
        self._lost = 0
        self.meta = EnvMeta("", 0, False, "", 0)

    @property
    def node(self) -> str:
        """Label of the node holding the instance now."""
        return self._worker.node if self._worker is not None else ""

    @property
    def actor(self) -> Any:
        """The Ray actor handle of the worker holding the instance now (None once closed)."""
        return self._worker.handle if self._worker is not None else None

    async def start(self) -> None:
        """Open the instance on the least loaded live worker, moving on when a worker is lost."""
        while True:
            w = self._runner.acquire()
            try:
                reply: Reply = await w.handle.open.remote(self._source, self._filename, self._max_turns)
            except RayActorError:
                self._runner.release(w)
                self._runner.lose(w)
                self._lost += 1
                self._runner.retry_or_fail(self._lost, "play")
                continue
            if reply.error is not None:
                self._runner.release(w)
                raise reply.error
            self._worker = w
            self._iid, self.meta = reply.value
            self._runner.ledger.instances[w.node] += 1
            return

    async def _call(self, op: Op, *args: Any) -> Any:
        while True:
            w = self._worker
            if w is None:
                raise SandboxError("crash", "the instance is closed", op=op)
            try:
                reply: Reply = await w.handle.call.remote(self._iid, op, args)
            except RayActorError:
                await self._move(w)
                continue
            if reply.status == "no_solution":
                raise NotImplementedError("the environment defines no solution()")
            if reply.error is not None:
                self._drop()
                raise reply.error
            if op in REPLAYED_OPS:
                self._log.append((op, args, reply.value))
            return reply.value

    async def _move(self, dead: _Worker) -> None:
        """Rebuild the instance on another worker and replay its state-changing calls."""
        self._runner.lose(dead)
        self._drop()
        self._lost += 1
        self._runner.retry_or_fail(self._lost, "play")
        await self.start()
        log, self._log = self._log, []
        for op, args, seen in log:
            if await self._call(op, *args) != seen:
                await self.aclose()
                raise SandboxError(
                    "crash", "replaying the episode on another worker gave different results: the environment "
                    "is not deterministic under reset(seed=...)", op=op,
                )  # fmt: skip

    def _drop(self) -> None:
        if self._worker is not None:
            self._runner.release(self._worker)
            self._worker = None

    # -- EnvInstance ----------------------------------------------------------------------------------------
    async def areset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the worker."""
        obs, info = await self._call("reset", seed, options)
        return obs, info

    async def astep(self, action: str) -> StepResult:
        """Apply one action on the worker."""
        result: StepResult = tuple(await self._call("step", action))
        return result

    async def atools(self) -> list[dict[str, Any]]:
        """Tool schemas."""
        tools: list[dict[str, Any]] = await self._call("tools")
        return tools

    async def acall_tool(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool on the worker."""
        return str(await self._call("call_tool", name, args))

    async def asolution(self) -> list[str] | str:
        """The scripted winning actions (NotImplementedError when the environment has none)."""
        solution: list[str] | str = await self._call("solution")
        return solution

    async def aclose(self) -> None:
        """End the instance on its worker (idempotent; a lost worker took it already)."""
        w, iid = self._worker, self._iid
        self._drop()
        if w is not None and w.alive:
            try:
                await w.handle.close.remote(iid)
            except RayActorError:
                self._runner.lose(w)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Sync :meth:`areset`."""
        return _run(self.areset(seed, options))

    def step(self, action: str) -> StepResult:
        """Sync :meth:`astep`."""
        return _run(self.astep(action))

    def tools(self) -> list[dict[str, Any]]:
        """Sync :meth:`atools`."""
        return _run(self.atools())

    def call_tool(self, name: str, args: dict[str, Any]) -> str:
        """Sync :meth:`acall_tool`."""
        return _run(self.acall_tool(name, args))

    def solution(self) -> list[str] | str:
        """Sync :meth:`asolution`."""
        return _run(self.asolution())

    def close(self) -> None:
        """Sync :meth:`aclose`."""
        _run(self.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from synchronous code (a thread without a running event loop)."""
    return asyncio.run(coro)


def _connect(cfg: ClusterConfig) -> None:
    """Join the Ray cluster at ``cfg.address`` ('' starts a private one); ClusterError when none answers.

    An address whose port is open but whose cluster does not accept the driver yet (a head still starting
    on a loaded machine) is tried again until ``cfg.start_timeout_s`` has passed.
    """
    if cfg.address:
        _probe(resolve_address(cfg.address))  # ray.init retries an unreachable address for ever
    deadline = time.monotonic() + cfg.start_timeout_s
    while True:
        try:
            ray.init(
                address=cfg.address or None,
                namespace=cfg.namespace,
                log_to_driver=False,
                configure_logging=False,
                include_dashboard=False if not cfg.address else None,
            )
            return
        except ConnectionError as exc:
            ray.shutdown()
            if not cfg.address or time.monotonic() >= deadline:
                raise ClusterError(
                    f"no Ray cluster at cluster.address={cfg.address!r} ({exc}); {_HOW}"
                ) from None
            time.sleep(1.0)


_HOW = "start one with `ray start --head` or pass --cluster.address '' for a private one-node Ray"

CURRENT_CLUSTER = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
"""Where `ray start --head` records its address on this machine (what Ray's 'auto' reads)."""


def resolve_address(address: str) -> str:
    """HOST:PORT of the cluster's head: ``address`` itself, or for 'auto' $RAY_ADDRESS or this machine's."""
    if address != "auto":
        return address
    found = os.environ.get("RAY_ADDRESS", "")
    if not found and CURRENT_CLUSTER.is_file():
        found = CURRENT_CLUSTER.read_text().strip()
    if not found:
        raise ClusterError(f"cluster.address='auto' but no Ray cluster runs on this machine; {_HOW}")
    return found


def _probe(address: str, timeout_s: float = 5.0) -> None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as exc:
        raise ClusterError(f"no Ray cluster answers at {address!r} ({exc}); {_HOW}") from None


def _start_workers(cfg: ClusterConfig, limits: Limits) -> tuple[list[_Worker], dict[str, bool]]:
    """Start ``cfg.workers`` actors; their nodes and the layers all their sandboxes have.

    Raises ClusterError when Ray cannot place them within ``cfg.start_timeout_s``.
    """
    actor: Any = ray.remote(_RayEnvWorker)  # ActorClass: its .options() is untyped
    token = secrets.token_hex(3)
    handles: list[Any] = [
        actor.options(
            name=f"spade-worker-{token}-{i}",
            num_cpus=cfg.cpus_per_worker,
            resources=parse_resources(cfg.worker_resources),
            max_concurrency=cfg.slots_per_worker,
            max_restarts=0,
            scheduling_strategy="SPREAD" if cfg.placement == "spread" else "DEFAULT",
        ).remote(limits)
        for i in range(cfg.workers)
    ]
    try:
        nodes = ray.get([h.node_id.remote() for h in handles], timeout=cfg.start_timeout_s)
        layers: list[dict[str, bool]] = ray.get(
            [h.layers.remote() for h in handles], timeout=cfg.start_timeout_s
        )
    except (GetTimeoutError, RayActorError) as exc:
        for h in handles:
            ray.kill(h)
        raise ClusterError(
            f"could not start {cfg.workers} Ray workers of {cfg.cpus_per_worker} CPU each "
            f"{'and ' + ' '.join(cfg.worker_resources) + ' ' if cfg.worker_resources else ''}"
            f"within {cfg.start_timeout_s:.0f}s ({type(exc).__name__}); `ray status` shows what is free: "
            "lower cluster.workers or cluster.cpus_per_worker, or add nodes"
        ) from None
    common = {name: all(each.get(name, False) for each in layers) for name in LAYER_NAMES}
    return [_Worker(h, node_label(n)) for h, n in zip(handles, nodes, strict=True)], common
