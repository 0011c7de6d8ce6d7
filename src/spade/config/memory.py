"""What a run keeps: the environment archive, the grounding documents and the episode transcripts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The environment archive."""

    capacity: int = 200
    """Most environments kept; the least useful are evicted beyond it."""
    band_low: float = 0.1
    """Lower end of the learnable win-rate band (see band_high)."""
    band_high: float = 0.9
    """Win-rate band in which an environment counts as learnable."""
    warm_start: bool = True
    """Seed the archive with the seed library of the active setting (the seeds of `designer.skills`)."""
    example_pool: int = 10
    """Prompt examples are drawn from this many top-regret in-band records (0: always the very top)."""
    replay_temperature: float = 0.3
    """PLR replay: rank temperature of the regret-score term (smaller: greedier)."""
    replay_staleness: float = 0.3
    """PLR replay: weight of the staleness term (environments not played for a while)."""
    pool_order: Literal["epochs", "replay"] = "epochs"
    """fixed_pool mode: 'epochs' plays the whole pool without replacement in a new seeded order each epoch
    (as released); 'replay': half of each batch explores unplayed environments, the rest is PLR replay."""
    top_up: bool = True
    """Fill a regeneration's slots that got no valid design with archived environments (PLR replay), so
    every regeneration plays ``designer.envs_per_regen`` environments. False: play only this regeneration's
    valid designs, as released (the seed library fills in only when none is valid)."""
    enabled: bool = True
    """Use the archive to steer the designer. False is the paper's no-memory ablation: no memory examples
    or negatives in the designer prompt and no replay of designed environments (each regeneration plays only
    its own valid designs; the seed library fills in when none is valid). The archive still records every
    environment for the run's audit trail."""

    def validate(self) -> None:
        """Checks of the archive's band, size and replay."""
        require(
            0.0 <= self.band_low <= self.band_high <= 1.0,
            "memory.band_low <= memory.band_high must lie in [0, 1]",
        )
        require(self.capacity >= 1, "memory.capacity must be >= 1")
        require(
            self.replay_temperature > 0 and 0.0 <= self.replay_staleness <= 1.0,
            "memory.replay_temperature must be > 0 and memory.replay_staleness in [0, 1]",
        )


@dataclass(frozen=True, slots=True)
class CorpusConfig:
    """Grounding documents."""

    path: str = ""
    """A JSONL file (a string ``orig_doc`` or ``text`` per line, optional ``title``), Parquet/Arrow with such a
    column, a .txt/.md file or a folder of these; empty for the shipped Wikipedia summaries (docs/running.md,
    The grounding corpus)."""
    enabled: bool = True
    """Ground each design on a corpus document (off: designs from the skill alone)."""


@dataclass(frozen=True, slots=True)
class TranscriptConfig:
    """Readable episode transcripts in ``<run>/transcripts/`` (gzipped JSON lines, one file per step and role)."""

    enabled: bool = True
    """Write transcripts of the agent's plays and the designer's replies."""
    episodes_per_env: int = 2
    """Plays kept per environment, hinted arm and step (0: every play)."""
    keep_last: int = 20
    """Transcripts of the newest this many steps are always kept."""
    keep_every: int = 10
    """Older steps are kept when divisible by this (0: older steps are deleted)."""

    def validate(self) -> None:
        """Checks of the kept counts."""
        require(
            min(self.episodes_per_env, self.keep_last, self.keep_every) >= 0,
            "transcripts.episodes_per_env, keep_last and keep_every must be >= 0",
        )
