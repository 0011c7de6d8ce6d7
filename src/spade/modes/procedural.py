"""``--mode procedural``: the agent alone on Reasoning-Gym tasks whose difficulty follows its win rate.

The tasks are native environments (:mod:`spade.envs.rg_tasks`, the task-environment library); every sandbox
preloads ``reasoning_gym``. Each regeneration plays the next batch of the task environments, as
``fixed_pool`` plays its pool, each task at its current level.

A controller per task (:class:`TaskLevel`, :func:`update`) moves its level in the style of RLVE (Zeng et
al., 2025): a sliding window of the last ``window`` episodes played at the current level; once full, a win
rate of at least ``upper`` raises the level, at most ``lower`` lowers it, and either change clears the
window. Levels stay within the curriculum's range. The states live in the checkpointed loop state
(``LoopState.mode``: task -> :meth:`TaskLevel.to_dict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spade.config import ConfigError, ProceduralConfig, TrainConfig
from spade.envs.rg_tasks import env_id, sandbox_limits, sources, task_levels, task_of, task_problem
from spade.memory.archive import Memory
from spade.modes.base import Mode, Regeneration
from spade.modes.fixed_pool import next_batch
from spade.modes.registry import register
from spade.run import preflight
from spade.run.components import Components
from spade.run.state import LoopState
from spade.sandbox import Limits
from spade.types import EnvSource, PlayStatus, Trajectory


class Procedural(Mode):
    """Train the agent on batches of Reasoning-Gym tasks, each at a level its win rate moves."""

    name = "procedural"
    regen_line = "next batch of Reasoning-Gym tasks at their current levels (agent only: nothing is designed)"

    def check_config(self, cfg: TrainConfig) -> None:
        """The controller's settings, and Reasoning-Gym knows every task."""
        cfg.procedural.validate()
        problem = task_problem(cfg.procedural.tasks)
        if problem:
            raise ConfigError(problem)

    def preflight(self, cfg: TrainConfig) -> None:
        """The warm-start pool (with ``memory.warm_start``) and every level of every task can be built."""
        super().preflight(cfg)
        preflight.check_procedural(cfg.procedural.tasks)

    def sandbox_limits(self, cfg: TrainConfig) -> Limits:
        """``cfg.sandbox`` with ``reasoning_gym`` preloaded (instances cannot import it after the UID drop)."""
        return sandbox_limits(cfg.sandbox)

    def sources(self, cfg: TrainConfig) -> list[EnvSource]:
        """The task environments."""
        return sources(cfg.procedural)

    def start(self, cfg: TrainConfig, memory: Memory) -> dict[str, Any]:
        """Archive the task environments; every task starts at ``procedural.start_level``."""
        super().start(cfg, memory)
        return _saved(initial_levels(cfg.procedural))

    async def regenerate(self, cfg: TrainConfig, c: Components, state: LoopState, step: int) -> Regeneration:
        """The next batch of the task environments."""
        del state
        return Regeneration(next_batch(cfg, c.memory, step))

    def difficulty(self, state: LoopState) -> Mapping[str, int]:
        """Each task environment's current level."""
        return {env_id(k): v.level for k, v in _levels(state).items()}

    def observe(
        self, cfg: TrainConfig, state: LoopState, trajectories: Sequence[Trajectory]
    ) -> dict[str, float]:
        """Move each played task's difficulty by its win rate (RLVE-style)."""
        levels, metrics = observe(_levels(state), outcomes(trajectories), cfg.procedural)
        state.mode = _saved(levels)
        return metrics


def _levels(state: LoopState) -> dict[str, TaskLevel]:
    return {str(k): TaskLevel.from_dict(v) for k, v in state.mode.items()}


def _saved(levels: Mapping[str, TaskLevel]) -> dict[str, Any]:
    return {k: v.to_dict() for k, v in levels.items()}


@dataclass(frozen=True, slots=True)
class TaskLevel:
    """One task's controller state: its level and the outcomes of the episodes played at that level."""

    level: int
    top: int
    """The highest level (the curriculum's level count minus one)."""
    window: tuple[bool, ...] = ()
    """Outcomes (won or not) of the newest episodes at ``level``, oldest first."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (in the checkpoint's loop state)."""
        return {"level": self.level, "top": self.top, "window": [int(w) for w in self.window]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskLevel:
        """Rebuild a state written by :meth:`to_dict`."""
        return cls(int(data["level"]), int(data["top"]), tuple(bool(w) for w in data["window"]))


def update(state: TaskLevel, wins: Sequence[bool], *, window: int, upper: float, lower: float) -> TaskLevel:
    """The state after ``wins`` (outcomes of episodes played at ``state.level``, in play order).

    The newest ``window`` outcomes are kept. Once there are ``window`` of them, a win rate ``>= upper``
    moves one level up and ``<= lower`` one level down (within ``[0, top]``); a move clears the window, so
    the next decision is taken on episodes of the new level only. At the top (bottom) a high (low) rate
    changes nothing and the window keeps sliding.
    """
    recent = (*state.window, *wins)[-window:]
    level = state.level
    if len(recent) >= window:
        rate = sum(recent) / len(recent)
        if rate >= upper and level < state.top:
            level += 1
        elif rate <= lower and level > 0:
            level -= 1
    if level != state.level:
        return TaskLevel(level, state.top, ())
    return TaskLevel(level, state.top, tuple(recent))


def initial_levels(cfg: ProceduralConfig) -> dict[str, TaskLevel]:
    """Every task at ``cfg.start_level`` (clamped to its range), with an empty window."""
    out = {}
    for task in cfg.tasks:
        top = len(task_levels(task)) - 1
        out[task] = TaskLevel(min(cfg.start_level, top), top)
    return out


def observe(
    levels: Mapping[str, TaskLevel], outcomes: Mapping[str, Sequence[bool]], cfg: ProceduralConfig
) -> tuple[dict[str, TaskLevel], dict[str, float]]:
    """Update the played tasks' controllers with this step's outcomes; returns the new states and metrics.

    ``outcomes`` maps an environment id (``rg:<task>``) to the outcomes of its finished episodes (crashed
    ones left out: a sandbox failure says nothing about difficulty).
    """
    new = dict(levels)
    metrics: dict[str, float] = {}
    ups = downs = 0
    for env, wins in outcomes.items():
        task = task_of(env)
        if task not in new or not wins:
            continue
        before = new[task]
        new[task] = update(before, wins, window=cfg.window, upper=cfg.upper, lower=cfg.lower)
        ups += new[task].level > before.level
        downs += new[task].level < before.level
        metrics[f"procedural/win_rate/{task}"] = sum(wins) / len(wins)
    for task, state in new.items():
        metrics[f"procedural/level/{task}"] = float(state.level)
    metrics["procedural/level_mean"] = sum(s.level for s in new.values()) / max(len(new), 1)
    metrics["procedural/level_ups"] = float(ups)
    metrics["procedural/level_downs"] = float(downs)
    return new, metrics


def outcomes(trajectories: Sequence[Trajectory]) -> dict[str, list[bool]]:
    """Per environment id, whether each unhinted play that finished was won (in play order)."""
    out: dict[str, list[bool]] = {}
    for t in trajectories:
        if not t.hinted and t.status is not PlayStatus.ENV_ERROR:
            out.setdefault(t.env_id, []).append(t.success)
    return out


register(Procedural.name, Procedural)
