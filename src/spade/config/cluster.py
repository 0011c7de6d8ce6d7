"""Where plays and checks run: in this process's sandbox, or on Ray worker actors across nodes."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Where plays and checks run: in this process's sandbox, or on Ray worker actors across nodes."""

    backend: Literal["local", "ray"] = "local"
    """'local': one sandbox in the training process (no Ray needed); 'ray': worker actors, each with its own
    sandbox, play the environments and run the checks; the policy stays in the training process."""
    address: str = "auto"
    """Ray address: 'auto' joins the cluster this machine belongs to (started by `ray start`), 'HOST:PORT'
    names its head node, '' starts a private one-node Ray inside the run."""
    workers: int = 2
    """Ray worker actors (each owns one sandbox zygote); lost ones are not replaced during a run."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves per worker actor (the sandbox's children run on them)."""
    worker_resources: tuple[str, ...] = ()
    """Extra Ray resources each worker needs, as NAME=AMOUNT (e.g. 'cpu_node=1' to keep them off GPU nodes)."""
    slots_per_worker: int = 32
    """Calls one worker serves at once (its thread pool); more queue on the worker."""
    placement: Literal["spread", "pack"] = "spread"
    """'spread': Ray's SPREAD strategy puts workers on as many nodes as it can; 'pack': Ray's default."""
    max_retries: int = 3
    """Times one play or check is rerun on another worker after its worker is lost; past that it fails
    (a play: an env_error trajectory)."""
    namespace: str = "spade"
    """Ray namespace of the run's named worker actors (`ray list actors` shows spade-worker-*)."""
    start_timeout_s: float = 120.0
    """Wall-clock wait for every worker to start; past it the run stops saying what the cluster lacks."""

    def validate(self) -> None:
        """Checks of the worker counts, limits and resources."""
        require(self.workers >= 1, f"cluster.workers must be >= 1 (got {self.workers})")
        require(self.cpus_per_worker > 0, f"cluster.cpus_per_worker must be > 0 (got {self.cpus_per_worker})")
        require(
            self.slots_per_worker >= 1, f"cluster.slots_per_worker must be >= 1 (got {self.slots_per_worker})"
        )
        require(self.max_retries >= 0, f"cluster.max_retries must be >= 0 (got {self.max_retries})")
        require(self.start_timeout_s > 0, f"cluster.start_timeout_s must be > 0 (got {self.start_timeout_s})")
        require(
            self.backend != "ray" or importlib.util.find_spec("ray") is not None,
            "cluster.backend='ray' needs Ray, which is not installed: pip install 'spade[ray]'",
        )
        for item in self.worker_resources:
            name, eq, amount = item.partition("=")
            require(
                bool(name) and eq == "=" and _is_positive(amount),
                f"cluster.worker_resources item {item!r} must be NAME=AMOUNT with AMOUNT > 0 (e.g. node_b=1)",
            )


def _is_positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False
