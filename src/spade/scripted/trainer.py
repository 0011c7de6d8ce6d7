"""The trainer of the scripted backend (:data:`spade.backends.registry.TRAINERS`), with no model to update."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spade.types import TrainSample

if TYPE_CHECKING:
    from spade.config import TrainConfig


class ScriptedTrainer:
    """A Trainer double: counts updates and raises the scripted policy's skill with each one."""

    def __init__(self, base_skill: float = 0.5, gain: float = 0.05) -> None:
        self.updates = 0
        self.lr = 0.0
        self.base_skill = base_skill
        self.gain = gain

    @classmethod
    def from_config(cls, cfg: TrainConfig, *, use_accelerate: bool = False) -> ScriptedTrainer:
        """The trainer of a scripted run (``cfg`` has nothing for it; one process only)."""
        del cfg, use_accelerate
        return cls()

    @property
    def skill(self) -> float:
        """The skill the exported weights carry."""
        return min(0.95, self.base_skill + self.gain * self.updates)

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """Count one update; report sample statistics."""
        self.updates += 1
        tokens = sum(sum(s.mask_T) for s in samples)
        out = {
            "train/tokens": float(tokens),
            "train/sequences": float(len(samples)),
            "train/nll": 1.0 / self.updates,  # falls with every update, like a loss being fitted
        }
        for role in ("agent", "designer"):
            adv = [s.advantage for s in samples if s.role == role]
            if adv:
                out[f"loss/{role}"] = -sum(adv) / len(adv)
        return out

    def set_lr(self, lr: float) -> float:
        """Accept a learning rate (a double has none); returns the previous one."""
        previous, self.lr = self.lr, lr
        return previous

    def export_weights(self, path: Path) -> Path:
        """Write the skill for ScriptedPolicy.load_weights."""
        path.mkdir(parents=True, exist_ok=True)
        (path / "scripted_policy.json").write_text(json.dumps({"skill": self.skill}))
        return path

    def save(self, path: Path) -> None:
        """Checkpoint the update counter."""
        path.mkdir(parents=True, exist_ok=True)
        (path / "scripted_trainer.json").write_text(json.dumps({"updates": self.updates}))

    def load(self, path: Path) -> None:
        """Restore the update counter."""
        self.updates = int(json.loads((path / "scripted_trainer.json").read_text())["updates"])
