"""Pure parts of the cluster runner: which worker takes the next job, and what the cluster did this step.

No Ray here: :func:`pick_worker` chooses among live workers by load, and :class:`ClusterLedger` counts
instances and checks per node, lost workers and retries, and hands them out as one step's metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spade.errors import SpadeError


class ClusterError(SpadeError):
    """The cluster cannot take work (no live worker, Ray unreachable); the message says what to do."""


NODE_LABEL_CHARS = 12
"""Characters of a Ray node id kept in metric names (``cluster/instances/<node>``)."""


def node_label(node_id: str) -> str:
    """The short label of a Ray node id used in metric names (its first 12 hex digits)."""
    return node_id[:NODE_LABEL_CHARS]


def pick_worker(loads: Sequence[int], assigned: Sequence[int], alive: Sequence[bool]) -> int:
    """The live worker with the fewest jobs in flight; ties go to the one given fewest jobs so far.

    Args:
        loads: jobs in flight per worker (open instances plus running checks).
        assigned: jobs ever given to each worker (spreads work across equally idle workers).
        alive: whether each worker is still usable.

    Raises:
        ClusterError: no worker is alive.
    """
    live = [i for i, ok in enumerate(alive) if ok]
    if not live:
        raise ClusterError(
            f"all {len(alive)} Ray workers are lost; restart the lost nodes (or `ray start` new ones) "
            "and continue the run with `spade train --resume RUN_DIR`"
        )
    return min(live, key=lambda i: (loads[i], assigned[i], i))


def parse_resources(items: Sequence[str]) -> dict[str, float]:
    """``('node_b=1', 'x=0.5')`` -> ``{'node_b': 1.0, 'x': 0.5}`` (items already checked by the config)."""
    out: dict[str, float] = {}
    for item in items:
        name, _, amount = item.partition("=")
        out[name.strip()] = float(amount)
    return out


@dataclass
class ClusterLedger:
    """What the workers did since the last :meth:`take`: per-node counts, lost workers, retries."""

    instances: Counter[str] = field(default_factory=Counter)
    """Environment instances opened, per node label (plays, demonstrations and hint looks)."""
    checks: Counter[str] = field(default_factory=Counter)
    """Validation ladders run, per node label."""
    retries: int = 0
    """Plays or checks rerun on another worker after theirs was lost."""
    actors_lost: int = 0
    """Workers found dead."""
    failed: int = 0
    """Plays or checks given up after ``max_retries`` reruns (or with no live worker left)."""

    def take(self, live_workers: int, nodes: Mapping[str, int]) -> dict[str, float]:
        """This period's metrics, then start a new period.

        Args:
            live_workers: workers still usable now.
            nodes: live workers per node label.
        """
        row: dict[str, float] = {
            "cluster/workers_live": float(live_workers),
            "cluster/nodes_live": float(sum(1 for n in nodes.values() if n > 0)),
            "cluster/retries": float(self.retries),
            "cluster/actors_lost": float(self.actors_lost),
            "cluster/failed": float(self.failed),
        }
        row.update({f"cluster/instances/{k}": float(v) for k, v in sorted(self.instances.items())})
        row.update({f"cluster/checks/{k}": float(v) for k, v in sorted(self.checks.items())})
        self.instances.clear()
        self.checks.clear()
        self.retries = self.actors_lost = self.failed = 0
        return row
