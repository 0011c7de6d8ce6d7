"""Resource limits and policy of the sandbox (one frozen dataclass, composed into the training config)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

LayerMode = Literal["auto", "on", "off"]
"""``auto``: use the layer when this machine allows it, else run without it and say so in
``Sandbox.layers``; ``on``: require it (starting fails with a message if unavailable); ``off``: never."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one environment instance may use, and how the harness judges what it returns."""

    address_space_mb: int = 1024
    """RLIMIT_AS of an instance process, in MiB (a memory bomb gets MemoryError, reported as ``memory``)."""
    cpu_seconds: int = 60
    """RLIMIT_CPU of an instance over its whole life (load and every call, user plus system time), in seconds."""
    call_timeout_s: float = 10.0
    """CPU-time limit of one call (reset, step, tools, call_tool, solution), in seconds of the instance's own
    user-mode CPU time; past it the instance dies with kind ``timeout``. Measured in CPU time, not wall time,
    so the verdict does not depend on machine load (and page-fault work of a memory bomb, which is system
    time, cannot turn a ``memory`` verdict into a ``timeout``)."""
    load_timeout_s: float = 10.0
    """CPU-time limit (user mode, as ``call_timeout_s``) of loading the source and building the instance."""
    stall_timeout_s: float = 120.0
    """Wall-clock backstop of one call: a call that has neither
    answered nor used up its CPU-time limit after this long (it blocks on a lock or a pipe, or the machine is
    starved) ends the instance with kind ``stalled``, reported apart from ``timeout`` because it depends on
    load. ``time.sleep`` returns at once inside an instance, so sleeping never stalls."""
    open_files: int = 32
    """RLIMIT_NOFILE of an instance."""
    file_size_bytes: int = 0
    """RLIMIT_FSIZE of an instance (writes are also refused by the system-call filter)."""
    max_source_bytes: int = 1 << 20
    """Largest environment source accepted by ``Sandbox.open``."""
    max_reply_bytes: int = 4 << 20
    """Largest reply line read from an instance; a longer one kills the instance (``protocol``)."""
    max_observation_chars: int = 100_000
    """Longest observation, tool result or solution step accepted."""
    max_info_bytes: int = 64 << 10
    """Largest ``info`` dict, measured as compact JSON."""
    max_tools: int = 64
    """Most tool schemas one environment may offer."""
    max_solution_steps: int = 10_000
    """Most actions in a scripted solution."""
    reward_min: float = -10.0
    """Smallest reward accepted from one step."""
    reward_max: float = 10.0
    """Largest reward accepted from one step."""
    max_live_instances: int = 64
    """Most instances alive at once; ``open`` waits up to ``slot_wait_s`` for a free slot."""
    slot_wait_s: float = 120.0
    """Wall-clock wait of ``open`` for a free instance slot; past it ``open`` fails with kind ``stalled``."""
    bubblewrap: LayerMode = "auto"
    """Run the zygote inside bubblewrap (read-only root, private /tmp, hidden home, pid/net/ipc namespace)."""
    seccomp: LayerMode = "auto"
    """System-call deny-list in every instance (no sockets, exec, fork, threads, file writes or signals)."""
    drop_uid: bool = True
    """When the harness is root, run each instance under its own unprivileged UID/GID."""
    uid_base: int = 1_500_000_000
    """First UID/GID used for instances (``uid_base + serial % uid_count``); pick a range no real user has."""
    uid_count: int = 1_000_000
    """Size of the instance UID range."""
    zygote_timeout_s: float = 60.0
    """Wall-clock limit of starting the zygote (interpreter start plus preloading)."""
    preload: tuple[str, ...] = ()
    """Extra modules the zygote imports before the first fork, beside its standard set, so instances can use
    them after the UID drop (e.g. ``reasoning_gym`` for ``--mode procedural``); a missing one is reported in
    ``Sandbox.layers`` notes, not raised."""

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ValueError("invalid sandbox limits: " + "; ".join(problems))

    @property
    def reward_range(self) -> tuple[float, float]:
        """``(reward_min, reward_max)``."""
        return (self.reward_min, self.reward_max)


def _problems(lim: Limits) -> list[str]:
    checks = [
        (lim.address_space_mb >= 64, "address_space_mb must be >= 64 (Python alone needs ~30 MiB)"),
        (lim.cpu_seconds >= 1, "cpu_seconds must be >= 1"),
        (lim.call_timeout_s > 0, "call_timeout_s must be > 0"),
        (lim.load_timeout_s > 0, "load_timeout_s must be > 0"),
        (
            lim.stall_timeout_s >= max(lim.call_timeout_s, lim.load_timeout_s),
            "stall_timeout_s (wall clock) must be >= call_timeout_s and load_timeout_s (CPU time): raise it",
        ),
        (lim.zygote_timeout_s > 0, "zygote_timeout_s must be > 0"),
        (lim.open_files >= 8, "open_files must be >= 8"),
        (lim.file_size_bytes >= 0, "file_size_bytes must be >= 0"),
        (lim.max_source_bytes >= 1, "max_source_bytes must be >= 1"),
        (lim.max_reply_bytes >= 1024, "max_reply_bytes must be >= 1024"),
        (lim.max_observation_chars >= 1, "max_observation_chars must be >= 1"),
        (lim.max_info_bytes >= 2, "max_info_bytes must be >= 2"),
        (lim.max_tools >= 0, "max_tools must be >= 0"),
        (lim.max_solution_steps >= 1, "max_solution_steps must be >= 1"),
        (math.isfinite(lim.reward_min) and math.isfinite(lim.reward_max), "reward_min/max must be finite"),
        (lim.reward_min <= lim.reward_max, "reward_min must be <= reward_max"),
        (lim.max_live_instances >= 1, "max_live_instances must be >= 1"),
        (lim.slot_wait_s > 0, "slot_wait_s must be > 0"),
        (lim.bubblewrap in ("auto", "on", "off"), "bubblewrap must be 'auto', 'on' or 'off'"),
        (lim.seccomp in ("auto", "on", "off"), "seccomp must be 'auto', 'on' or 'off'"),
        (
            lim.uid_base > 0 and lim.uid_base + lim.uid_count < 2**32 - 1,
            "uid_base + uid_count must be < 2**32-1",
        ),
        (lim.uid_count >= 1, "uid_count must be >= 1"),
    ]
    return [message for ok, message in checks if not ok]
