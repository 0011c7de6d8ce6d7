"""What the loop carries from one step to the next: :class:`LoopState`, checkpointed as ``state.json``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spade.scoring.credit import PendingCredit


@dataclass
class LoopState:
    """Everything the loop carries from one step to the next (checkpointed as JSON)."""

    step: int = 0
    current: list[str] = field(default_factory=list)
    """Environment ids played at every step until the next regeneration."""
    credit: list[PendingCredit] = field(default_factory=list)
    """Designer samples awaiting delayed credit, each with its window of plays so far."""
    lp_ema: dict[str, float] = field(default_factory=dict)
    """learning_potential variant: per-skill slow EMA of window win rates."""
    corpus: dict[str, Any] = field(default_factory=dict)
    """The corpus sampler's resumable state."""
    mode: dict[str, Any] = field(default_factory=dict)
    """The mode's own JSON-safe state (procedural: each Reasoning-Gym task's difficulty controller)."""
    sampled_tokens: int = 0
    """Completion tokens the model has sampled in the run so far (``sampled_token_budget``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the checkpoint's ``state.json``)."""
        return {"step": self.step, "current": list(self.current), "credit": [e.to_dict() for e in self.credit],
                "lp_ema": dict(self.lp_ema), "corpus": self.corpus, "mode": dict(self.mode),
                "sampled_tokens": self.sampled_tokens}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        """Rebuild a state written by :meth:`to_dict`, or by a version before modes had a state of their own
        (the procedural mode's controllers were saved as ``levels`` then)."""
        return cls(
            step=int(data["step"]),
            current=[str(e) for e in data["current"]],
            credit=[PendingCredit.from_dict(e) for e in data["credit"]],
            lp_ema={str(k): float(v) for k, v in data["lp_ema"].items()},
            corpus=dict(data["corpus"]),
            mode=dict(data["mode"] if "mode" in data else data.get("levels", {})),
            sampled_tokens=int(data.get("sampled_tokens", 0)),  # absent in checkpoints of older runs
        )
