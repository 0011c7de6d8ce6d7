"""What a training mode decides, and the defaults of a mode that trains the agent alone.

A mode is the strategy the loop (:mod:`spade.run.loop`) asks at each regeneration which environments to play
(:meth:`Mode.regenerate`), and after each step's plays what they change in its own state
(:meth:`Mode.observe`) and which designer samples are due for credit (:meth:`Mode.credit`). Everything else
in a step is the same for every mode. :class:`Mode`'s defaults are those of an agent-only mode: the pool of
environments is archived when the run starts, nothing is designed, no designer sample is trained.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from spade.config import TrainConfig
from spade.config.skills import skills_for
from spade.design import DesignOutcome
from spade.design.seed_files import designer_seed_sources
from spade.ecosystem import remote as ecosystem_remote
from spade.memory.archive import FILENAME as MEMORY_FILE
from spade.memory.archive import EnvStatus, Memory, archive_sources
from spade.run import preflight
from spade.run.components import Components
from spade.run.state import LoopState
from spade.sandbox import Limits
from spade.scoring.stats import EnvStats
from spade.seeds import derive_rng, derive_seed
from spade.types import EnvSource, TrainSample, Trajectory


@dataclass(frozen=True, slots=True)
class Regeneration:
    """What one regeneration chose: the environments played until the next one, and what it designed."""

    current: list[str]
    """Environment ids played at every step until the next regeneration."""
    designed: tuple[DesignOutcome, ...] = ()
    """This regeneration's designer samples after checking (selfplay only); the valid ones get hinted plays."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """The design phase's metrics (selfplay only)."""

    def hints(self, n: int) -> dict[str, list[str | None]]:
        """Per valid new environment, the hint of each of its first ``n`` hinted seeds (its hinted arm)."""
        return {d.env_id: d.hints_for(n) for d in self.designed if d.valid}


class Mode(ABC):
    """A training mode: the environments of each regeneration and what the mode learns from their plays."""

    name: ClassVar[str]
    """The ``--mode`` value."""
    regen_line: ClassVar[str] = "next batch of the pool (agent only: nothing is designed)"
    """What a regeneration does (the progress line)."""
    designs: ClassVar[bool] = False
    """Whether the mode designs environments: the run then builds a design phase (``Components.design``)."""

    def check_config(self, cfg: TrainConfig) -> None:
        """Raise :class:`~spade.config.ConfigError` for a setting this mode cannot train with (the registry
        calls it whenever it makes the mode)."""
        del cfg  # no check of its own: a mode that needs one overrides this

    def preflight(self, cfg: TrainConfig) -> None:
        """Raise :class:`spade.errors.SetupError` for a problem with what this mode reads from disk."""
        if cfg.memory.warm_start:
            preflight.check_pool(cfg.pool)

    def run_name(self, name: str) -> str:
        """The run name when ``--name`` is not given (``name``: the preset's): its own, beside self-play's."""
        return f"{name}-{self.name}"

    def sandbox_limits(self, cfg: TrainConfig) -> Limits:
        """The limits of every sandbox that plays the run's environments."""
        return cfg.sandbox

    def grounded(self, cfg: TrainConfig) -> bool:
        """Whether designs draw documents from the corpus."""
        del cfg
        return False

    def sources(self, cfg: TrainConfig) -> list[EnvSource]:
        """The environments archived when the run starts (the pool)."""
        return pool_sources(cfg)

    def start(self, cfg: TrainConfig, memory: Memory) -> dict[str, Any]:
        """Prepare a fresh run: archive the pool; returns the mode's initial state (JSON-safe)."""
        memory.warm_start(self.sources(cfg))
        return {}

    @abstractmethod
    async def regenerate(self, cfg: TrainConfig, c: Components, state: LoopState, step: int) -> Regeneration:
        """The environments to play from ``step`` until the next regeneration."""

    def difficulty(self, state: LoopState) -> Mapping[str, int]:
        """The difficulty level each environment id is played at (those absent: their default)."""
        del state
        return {}

    def observe(
        self, cfg: TrainConfig, state: LoopState, trajectories: Sequence[Trajectory]
    ) -> dict[str, float]:
        """Update the mode's state (``state.mode``) with a step's plays; returns its metrics."""
        del cfg, state, trajectories
        return {}

    def credit(
        self,
        cfg: TrainConfig,
        c: Components,
        state: LoopState,
        regen: Regeneration | None,
        per_env: Mapping[str, EnvStats],
        *,
        step: int,
        n_agent: int,
        final: bool,
    ) -> tuple[list[TrainSample], dict[str, Any]]:
        """The designer samples to train on at ``step`` with their advantages, and the designer's metrics.

        Args:
            cfg: the run's config.
            c: the run's components (stored designer samples).
            state: the loop state (its delayed-credit buffer).
            regen: this step's regeneration, None when the step played the current environments again.
            per_env: what each environment's plays measured this step.
            step: the step.
            n_agent: the step's agent plays (before constant groups are dropped).
            final: the run's last step: every design still waiting is credited.
        """
        del cfg, c, state, regen, per_env, step, n_agent, final
        return [], {}

    def metrics(self, cfg: TrainConfig, memory: Memory) -> dict[str, float]:
        """The mode's metrics after a step: the fraction of the pool played at least once."""
        del cfg
        pool = memory.records(status=EnvStatus.VALID)
        return {"pool/covered": sum(r.last_step is not None for r in pool) / max(len(pool), 1)}


def pool_sources(cfg: TrainConfig) -> list[EnvSource]:
    """The warm-start / fixed-pool environments: the seeds (``designer.seeds``, library names and files:
    :func:`spade.design.seed_files.designer_seed_sources`), a run's archive, a folder of files, or a remote pool
    (``openenv:URL``, ``verifiers:MODULE``)."""
    if not cfg.pool:
        d = cfg.designer
        return designer_seed_sources(d)
    if ecosystem_remote.is_remote(cfg.pool):
        return ecosystem_remote.pool_sources(cfg.pool)
    folder = Path(cfg.pool)
    if (folder / MEMORY_FILE).exists():
        return archive_sources(folder)
    files = sorted((folder / "games").glob("*.py")) or sorted(folder.glob("*.py"))
    if not files:
        raise FileNotFoundError(f"no environment files (*.py or games/*.py) in pool folder {folder}")
    known = {**skills_for("games"), **skills_for("tool_use")}
    out = []
    for f in files:
        skill = next((s for s in known if f.stem.endswith(s)), "")
        out.append(EnvSource(code=f.read_text(), skill=skill, env_id=f"pool_{f.stem}"))
    return out


def top_up(cfg: TrainConfig, memory: Memory, current: list[str], step: int) -> list[str]:
    """``current`` plus PLR replay of played environments, then any archived ones, up to envs_per_regen."""
    want = cfg.designer.envs_per_regen
    if len(current) < want:
        replay = memory.replay(want - len(current), step, seed=derive_seed(cfg.seed, "replay", step))
        current = [*current, *(r.env_id for r in replay if r.env_id not in current)]
    if len(current) < want:  # nothing played yet to replay: draw from every archived environment
        rest = sorted(r.env_id for r in memory.records(status=EnvStatus.VALID) if r.env_id not in current)
        derive_rng(cfg.seed, "fill", step).shuffle(rest)
        current = [*current, *rest[: want - len(current)]]
    return current
