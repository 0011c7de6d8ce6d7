"""Training modes: the strategy that chooses each regeneration's environments and learns from their plays.

``selfplay`` (SPADE), and the agent-only baselines ``fixed_pool`` and ``procedural``; one module each,
registered by name (:mod:`spade.modes.registry`). The loop (:mod:`spade.run.loop`) reads ``cfg.mode`` only
through :func:`make` (and its shown name through :func:`label`).
"""

from spade.modes import fixed_pool, procedural, selfplay
from spade.modes.base import Mode, Regeneration
from spade.modes.registry import label, make, names, preflight, register

__all__ = [
    "Mode",
    "Regeneration",
    "fixed_pool",
    "label",
    "make",
    "names",
    "preflight",
    "procedural",
    "register",
    "selfplay",
]
