"""A throwaway Ray cluster of several nodes on this machine, for tests and benchmarks.

Each node is a real ``ray start --block`` (the head, then ``ray start --address HEAD``) with its own temp
folder, free ports and resources, in its own process group, so that several clusters can run side by side
(``pytest -n 2``) and :meth:`LocalRayCluster.stop` ends exactly the processes it started (never ``ray stop``,
which ends every Ray on the machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from spade.cluster.placement import ClusterError


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node of a local cluster."""

    cpus: int = 1
    """CPUs the node offers to Ray."""
    resources: Mapping[str, float] = field(default_factory=dict)
    """Custom resources (e.g. ``{"node_b": 1}``)."""


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalRayCluster:
    """Starts the nodes on entry, stops them (by process group) on exit; ``address`` is the head's."""

    def __init__(
        self, nodes: Sequence[NodeSpec], *, object_store_mb: int = 100, ready_s: float = 120.0
    ) -> None:
        self._nodes = list(nodes)
        self._store = object_store_mb * 1024 * 1024
        self._ready_s = ready_s
        self._procs: list[subprocess.Popen[bytes]] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="spade-ray-")
        self.root = Path(self._tmp.name)
        self.address = ""

    def start(self) -> Self:
        """Start every node and wait until the cluster lists them all (ClusterError when it does not)."""
        try:
            gcs, client = _free_ports(2)
            self.address = f"127.0.0.1:{gcs}"
            for i, node in enumerate(self._nodes):
                head = [
                    "--head",
                    f"--port={gcs}",
                    f"--ray-client-server-port={client}",
                    "--include-dashboard=false",
                ]
                args = head if i == 0 else [f"--address={self.address}"]
                self._launch(i, node, args)
                if i == 0:
                    self._wait_port(gcs)
            self._wait_nodes(len(self._nodes))
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, i: int, node: NodeSpec, args: list[str]) -> None:
        agent, metrics, env_agent, grpc = _free_ports(4)
        ray_cli = str(Path(sys.executable).parent / "ray")
        cmd = [
            ray_cli, "start", "--block", *args, f"--num-cpus={node.cpus}", "--num-gpus=0",
            f"--resources={json.dumps(dict(node.resources))}", f"--object-store-memory={self._store}",
            f"--temp-dir={self.root / f'node{i}'}", f"--dashboard-agent-listen-port={agent}",
            f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={env_agent}",
            f"--dashboard-agent-grpc-port={grpc}", "--min-worker-port=0", "--max-worker-port=0",
            "--disable-usage-stats",
        ]  # fmt: skip
        log = (self.root / f"node{i}.log").open("wb")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self._procs.append(
            subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        )

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + self._ready_s
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return
            time.sleep(0.5)
        raise ClusterError(
            f"the Ray head did not listen on port {port} within {self._ready_s:.0f}s: {self.log()}"
        )

    def _wait_nodes(self, n: int) -> None:
        """Wait until ``n`` raylets have registered (their sockets appear in the session folders)."""
        deadline = time.monotonic() + self._ready_s
        while time.monotonic() < deadline:
            self._check_alive()
            if len(list(self.root.glob("node*/session_*/sockets/raylet*"))) >= n:
                return
            time.sleep(0.5)
        raise ClusterError(
            f"the local Ray cluster did not bring up {n} nodes in {self._ready_s:.0f}s: {self.log()}"
        )

    def _check_alive(self) -> None:
        for p in self._procs:
            if p.poll() is not None:
                raise ClusterError(f"`ray start` exited with {p.returncode}: {self.log()}")

    def log(self) -> str:
        """The nodes' `ray start` output (the last lines of each)."""
        parts = []
        for path in sorted(self.root.glob("node*.log")):
            lines = path.read_text(errors="replace").splitlines()[-5:]
            parts.append(f"{path.name}: " + " | ".join(lines))
        return "; ".join(parts)

    def stop(self) -> None:
        """End every process this cluster started (SIGTERM, then SIGKILL after a grace period)."""
        procs, self._procs = self._procs, []
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:  # the nodes' children (raylet, gcs, workers) share each node's process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
