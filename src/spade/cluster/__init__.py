"""Where environments run: this process's sandbox (``cluster.backend='local'``) or Ray workers ('ray').

The loop asks this module for its runner (:func:`open_runner`), runs checks through :func:`check_source`
and reads :func:`runner_metrics` once per step; it never needs to know which backend it has. Ray is
imported only when the config asks for it (:mod:`spade.cluster.ray_runner`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from spade.checker import Checker, CheckReport
from spade.cluster.placement import ClusterError
from spade.config import ClusterConfig, TrainConfig
from spade.sandbox import EnvRunner, Limits

__all__ = ["ClusterError", "check_concurrency", "check_source", "instance_capacity", "open_runner"]

LOCAL_CHECKS = 4
"""Checks run at once in the local sandbox (each ladder waits on its sandbox children)."""


@runtime_checkable
class RemoteChecks(Protocol):
    """A runner that runs whole validation ladders itself and reports its own metrics (the Ray runner)."""

    async def acheck(self, source: str, checker: Checker, *, seed: int | None, filename: str) -> CheckReport:
        """The ladder's report for ``source``."""
        ...

    def metrics(self) -> dict[str, float]:
        """Metrics since the last call."""
        ...


@contextlib.contextmanager
def open_runner(cfg: TrainConfig, limits: Limits) -> Iterator[EnvRunner]:
    """The run's environment runner, whose every sandbox has ``limits`` (the mode's: procedural mode
    preloads reasoning_gym); closes it (and its sandboxes or workers) on exit."""
    if cfg.cluster.backend == "ray":
        from spade.cluster.ray_runner import RayRunner  # noqa: PLC0415 - Ray only when asked for

        with RayRunner(cfg.cluster, limits) as ray_runner:
            yield ray_runner
        return
    from spade.sandbox import Sandbox  # noqa: PLC0415 - starts nothing until entered

    with Sandbox(limits=limits) as sandbox:
        yield sandbox


async def check_source(
    runner: EnvRunner, source: str, checker: Checker, *, seed: int | None, filename: str = "<env>"
) -> CheckReport:
    """Run the validation ladder on ``source``: on a worker (Ray), or in a thread over the local sandbox."""
    if isinstance(runner, RemoteChecks):
        return await runner.acheck(source, checker, seed=seed, filename=filename)
    return await asyncio.to_thread(checker.check, source, runner, seed=seed, filename=filename)


def check_concurrency(cluster: ClusterConfig) -> int:
    """Checks to run at once: a few locally, two per Ray worker (one ladder waits on its children)."""
    return 2 * cluster.workers if cluster.backend == "ray" else LOCAL_CHECKS


def instance_capacity(cluster: ClusterConfig, limits: Limits) -> int:
    """Environment instances that can be alive at once (``sandbox.max_live_instances`` per sandbox)."""
    sandboxes = cluster.workers if cluster.backend == "ray" else 1
    return limits.max_live_instances * sandboxes


def runner_metrics(runner: EnvRunner) -> dict[str, float]:
    """The runner's own metrics since the last call (``cluster/*`` on Ray; none locally)."""
    return runner.metrics() if isinstance(runner, RemoteChecks) else {}
