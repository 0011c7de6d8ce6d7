"""``--mode procedural``: Reasoning-Gym tasks as environments with an adaptive difficulty level."""

from __future__ import annotations

from dataclasses import dataclass

from spade.config.errors import require


@dataclass(frozen=True, slots=True)
class ProceduralConfig:
    """``--mode procedural``: Reasoning-Gym tasks as environments, each with an adaptive difficulty level
    (RLVE-style controller, see spade.envs.rg_tasks and docs/eval.md)."""

    tasks: tuple[str, ...] = ("basic_arithmetic", "chain_sum", "products", "leg_counting", "gcd")
    """Reasoning-Gym tasks to train on (`spade eval --list-tasks` lists them); designer.envs_per_regen of
    them are played per regeneration, every task once per epoch."""
    window: int = 16
    """Episodes at a task's current level the win rate is measured over before its level may move."""
    upper: float = 0.8
    """A full window won at least this often moves the task one level up (harder)."""
    lower: float = 0.2
    """A full window won at most this often moves the task one level down (easier)."""
    start_level: int = 0
    """Every task's first level (0: the curriculum's easiest; clamped to the task's top level)."""
    tries: int = 2
    """Answers per episode: after a wrong one the agent is told so and tries again (as the eval suite)."""

    def validate(self) -> None:
        """Checks of the controller (``--mode procedural`` only); the task names are checked against
        Reasoning-Gym by :func:`spade.run.preflight.check_names`."""
        require(bool(self.tasks), "procedural.tasks is empty: name at least one Reasoning-Gym task")
        require(self.window >= 1, f"procedural.window must be >= 1 (got {self.window})")
        require(
            0.0 <= self.lower < self.upper <= 1.0,
            f"procedural.lower < procedural.upper must lie in [0, 1] (got {self.lower}, {self.upper})",
        )
        require(
            self.start_level >= 0 and self.tries >= 1,
            "procedural.start_level must be >= 0 and procedural.tries >= 1",
        )
