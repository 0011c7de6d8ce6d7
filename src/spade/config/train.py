"""The training config: one section per component composed into :class:`TrainConfig`, and its checks.

:func:`validate` runs every section's own checks and the checks across sections; the checks that depend on
``mode`` belong to each mode (:meth:`spade.modes.Mode.check_config`). Names checked against a registry (the
backend, skills, seed games, eval suites, Reasoning-Gym tasks) are checked outside this package
(:func:`spade.run.preflight.check_names` and the modes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from spade.config.checker import CheckerConfig
from spade.config.cluster import ClusterConfig
from spade.config.designer import DesignerConfig
from spade.config.errors import require
from spade.config.eval import EvalConfig
from spade.config.memory import CorpusConfig, MemoryConfig, TranscriptConfig
from spade.config.model import ModelConfig
from spade.config.play import PlayConfig
from spade.config.procedural import ProceduralConfig
from spade.config.rollout import RewardConfig, RolloutConfig
from spade.config.sandbox import Limits
from spade.config.trainer import SFTConfig, TrainerConfig
from spade.config.types import ModeName


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """A SPADE training run."""

    name: str = "spade"
    """Run name: the run directory is <runs-dir>/<name> (`spade train` without --name: the preset's name,
    plus -<mode> for fixed_pool and procedural, e.g. cpu-tiny-fixed_pool)."""
    runs_dir: Path = Path("runs")
    """Parent folder of run directories."""
    steps: int = 400
    """Training steps (one update each); a checkpoint is written after every step."""
    seed: int = 0
    """Seed of every random choice in the run (designs, seeds of episodes, corpus order, probes)."""
    mode: ModeName = "selfplay"
    """'selfplay': designer and agent (SPADE); 'fixed_pool': agent only, on a fixed pool (the baseline);
    'procedural': agent only, on Reasoning-Gym tasks with adaptive difficulty (see the procedural section)."""
    pool: str = ""
    """fixed_pool mode: an official-format pool folder, a run directory (the valid environments of its
    memory.sqlite), or empty for the seed library."""
    sampled_token_budget: int = 0
    """End the run after the step at which the tokens the model has sampled in it (agent replies, designs
    and hints: every completion token) reach this many, even before ``steps`` (0: no budget). Equal budgets
    make modes comparable: self-play pays for its designer out of the same budget."""
    model: ModelConfig = field(default_factory=ModelConfig)
    play: PlayConfig = field(default_factory=PlayConfig)
    sandbox: Limits = field(default_factory=Limits)
    checker: CheckerConfig = field(default_factory=CheckerConfig)
    designer: DesignerConfig = field(default_factory=DesignerConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    transcripts: TranscriptConfig = field(default_factory=TranscriptConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    procedural: ProceduralConfig = field(default_factory=ProceduralConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)

    def __post_init__(self) -> None:
        validate(self)

    @property
    def run_dir(self) -> Path:
        """Where this run writes everything."""
        return self.runs_dir / self.name


def validate(cfg: TrainConfig) -> None:
    """Cross-field checks; raises ConfigError saying how to fix the first problem found."""
    require(cfg.steps >= 1, f"steps must be >= 1 (got {cfg.steps})")
    require(cfg.sampled_token_budget >= 0, "sampled_token_budget must be >= 0 (0: no budget)")
    cfg.play.validate()
    cfg.rollout.validate()
    cfg.sft.validate()
    cfg.designer.validate()
    cfg.trainer.validate()
    cfg.reward.validate()
    cfg.memory.validate()
    cfg.checker.validate()
    _across_sections(cfg)
    cfg.model.validate()
    cfg.transcripts.validate()
    cfg.eval.validate()
    cfg.cluster.validate()


def _across_sections(cfg: TrainConfig) -> None:
    """The checks that tie one section's value to another's."""
    d = cfg.designer
    require(
        cfg.sft.designs == 0 or d.edit_format == "lines",
        "sft.designs imitates line edits: set designer.edit_format=lines (or sft.designs 0)",
    )
    require(
        cfg.sft.hints == 0 or d.setting == "games",
        "sft.hints answers hint requests with the seed games' strategy notes: it needs designer.setting=games",
    )
    require(
        cfg.memory.enabled or d.edit_fraction == 0.0,
        "memory.enabled=False leaves edit mode without parents: set designer.edit_fraction=0",
    )
    require(
        cfg.rollout.hint_seeds == "shared" or d.hint_mode == "code",
        "rollout.hint_seeds=own plays the hinted arm on instances no instance hint was written for: set "
        "designer.hint_mode=code",
    )
