"""Endpoint bookkeeping of a generation fleet: several OpenAI-compatible servers behind one Policy.

Pure state, no I/O: :class:`~spade.backends.openai_server.OpenAIPolicy` asks :meth:`Fleet.pick` for the
endpoint with the fewest requests in flight, reports each outcome back, and probes endpoints that
:meth:`Fleet.due` says were down long enough. An endpoint is *up* (takes requests), or *down* since a
failure (left out, re-probed every ``reprobe_s`` seconds; a probe that succeeds brings it to the current
weights first, so a server restarted with its original weights never serves a request at an old version).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True, slots=True)
class Weights:
    """What every endpoint must serve: the base model, a LoRA adapter under a name, or a full model folder."""

    kind: Literal["base", "adapter", "full"]
    path: Path | None = None
    name: str = ""
    """Adapter name requests address (adapter only)."""
    version: int = 0
    """Weight loads so far (0: the weights the servers started with)."""


@dataclass(slots=True)
class Endpoint:
    """One server of the fleet and what is known about it."""

    index: int
    url: str
    """API root ending in /v1."""
    in_flight: int = 0
    served: int = 0
    """Requests answered (any HTTP answer that is not a retryable error)."""
    failures: int = 0
    """Times it was marked down."""
    down_since: float | None = None
    """None: up."""
    next_probe: float = 0.0
    probing: bool = False
    version: int = 0
    """Version of the weights it serves (``Weights.version``)."""
    adapter: str = ""
    """Name of the adapter loaded on it by this policy ("": none)."""
    last_error: str = ""
    """Why its last request or probe failed."""

    @property
    def up(self) -> bool:
        """Whether it takes requests."""
        return self.down_since is None

    @property
    def root(self) -> str:
        """The server root (control endpoints such as /v1/load_lora_adapter hang off it)."""
        return self.url.removesuffix("/v1")


class Fleet:
    """Least-loaded choice among live endpoints, failure marking and re-probe timing (see module docstring).

    Args:
        urls: API roots (``.../v1``); at least one.
        reprobe_s: a down endpoint is probed again this long after its last failure or probe.
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self, urls: Sequence[str], *, reprobe_s: float = 15.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not urls:
            raise ValueError("a fleet needs at least one endpoint URL")
        self.endpoints = [Endpoint(i, url.rstrip("/")) for i, url in enumerate(urls)]
        self.reprobe_s = reprobe_s
        self.clock = clock
        self.failovers = 0
        self.probes = 0

    def pick(self) -> Endpoint | None:
        """The up endpoint with the fewest requests in flight (ties: fewest served, then lowest index)."""
        live = [e for e in self.endpoints if e.up]
        if not live:
            return None
        return min(live, key=lambda e: (e.in_flight, e.served, e.index))

    def due(self, *, all_down: bool = False) -> list[Endpoint]:
        """Down endpoints to probe now: those past their re-probe time, or (``all_down``) every one not being
        probed already, since with no live endpoint each attempt of a request is a probe."""
        now = self.clock()
        return [e for e in self.endpoints if not e.up and not e.probing and (all_down or now >= e.next_probe)]

    def any_up(self) -> bool:
        """Whether some endpoint takes requests."""
        return any(e.up for e in self.endpoints)

    def mark_down(self, endpoint: Endpoint) -> None:
        """Leave ``endpoint`` out until it is probed successfully."""
        now = self.clock()
        if endpoint.up:
            endpoint.failures += 1
            endpoint.down_since = now
        endpoint.next_probe = now + self.reprobe_s

    def mark_up(self, endpoint: Endpoint) -> None:
        """``endpoint`` answered a probe and serves the current weights."""
        endpoint.down_since = None

    def metrics(self) -> dict[str, float]:
        """Counters since the policy was built (``fleet/requests/<i>``, ``fleet/failovers``...) and the
        number of live endpoints."""
        out = {f"fleet/requests/{e.index}": float(e.served) for e in self.endpoints}
        out["fleet/endpoints_up"] = float(sum(e.up for e in self.endpoints))
        out["fleet/failovers"] = float(self.failovers)
        out["fleet/marked_down"] = float(sum(e.failures for e in self.endpoints))
        out["fleet/probes"] = float(self.probes)
        return out
