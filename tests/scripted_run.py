"""A tiny finished self-play run with the scripted backend (report, export and runs tests read it)."""

from __future__ import annotations

from pathlib import Path

from spade.config import (
    CheckerConfig,
    CorpusConfig,
    DesignerConfig,
    ModelConfig,
    PlayConfig,
    RewardConfig,
    RolloutConfig,
    ScriptedConfig,
    TrainConfig,
)
from spade.run.loop import train
from spade.rundir import RunDir
from spade.sandbox import Limits


def tiny_config(runs_dir: Path, name: str = "run", steps: int = 4, **over: object) -> TrainConfig:
    """A few seconds of scripted self-play: 3 designs every 2 steps (mixed valid/broken/hostile), delay 1."""
    cfg = TrainConfig(
        name=name,
        runs_dir=runs_dir,
        steps=steps,
        model=ModelConfig(backend="scripted", scripted=ScriptedConfig(behaviour="mixed")),
        play=PlayConfig(action_mode="boxed", max_turns=6, turn_tokens=256, context_tokens=16384),
        designer=DesignerConfig(envs_per_regen=3, regen_interval=2, skills_per_regen=2, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=4, hint_plays_per_env=4),
        reward=RewardConfig(variant="regret", delay=1 if steps > 1 else 0),
        checker=CheckerConfig(probe_episodes=2, exploit_episodes=3),
        sandbox=Limits(call_timeout_s=1.0, load_timeout_s=2.0),
        corpus=CorpusConfig(enabled=False),
    )
    return TrainConfig(**{**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}, **over})  # type: ignore[arg-type]


def tiny_run(runs_dir: Path, name: str = "run", steps: int = 4, **over: object) -> RunDir:
    """Train :func:`tiny_config` to the end and return its run directory."""
    return train(tiny_config(runs_dir, name, steps, **over))
