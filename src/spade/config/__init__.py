"""Configuration: one frozen dataclass per component, composed into :class:`TrainConfig`.

Parsed once by the CLI with tyro (attribute docstrings become ``--help``). Named presets (``cpu-tiny``,
``paper``) are full ``TrainConfig`` values that command-line flags override. Cross-field checks raise
:class:`ConfigError` with a message that says how to fix the value. ``to_json`` / ``from_json`` round-trip
a resolved config (it is written to every run directory); ``to_toml`` prints it for people to read, and
``load_file`` reads either back (``spade train --config FILE``).

The package is the bottom layer: it imports nothing from ``spade`` but :mod:`spade.errors`. One module per
section (``model``, ``play``, ``designer``, ...), each section checking its own values; :mod:`.train`
composes them and holds the checks across sections; names checked against a registry (the backend, skills,
seed games, eval suites, Reasoning-Gym tasks) are checked by :func:`spade.run.preflight.check_names`.
"""

from spade.config.checker import CheckerConfig
from spade.config.cluster import ClusterConfig
from spade.config.designer import DesignerConfig
from spade.config.errors import ConfigError
from spade.config.eval import EvalConfig, EvalOptions, EvalSettings
from spade.config.memory import CorpusConfig, MemoryConfig, TranscriptConfig
from spade.config.model import ModelConfig, OpenAIConfig, ScriptedConfig, VLLMConfig
from spade.config.play import PlayConfig, WinRule
from spade.config.presets import CPU_TINY, PAPER, PAPER_TOOL, PRESETS, load_file, preset
from spade.config.procedural import ProceduralConfig
from spade.config.rollout import RewardConfig, RolloutConfig
from spade.config.sandbox import LayerMode, Limits
from spade.config.serial import from_dict, from_json, migrate, to_dict, to_json, to_toml
from spade.config.train import TrainConfig, validate
from spade.config.trainer import SFTConfig, TrainerConfig
from spade.config.types import ActionMode, Difficulty, ModeName, RateMeasure, RegretMethod, Setting

__all__ = [
    "CPU_TINY",
    "PAPER",
    "PAPER_TOOL",
    "PRESETS",
    "ActionMode",
    "CheckerConfig",
    "ClusterConfig",
    "ConfigError",
    "CorpusConfig",
    "DesignerConfig",
    "Difficulty",
    "EvalConfig",
    "EvalOptions",
    "EvalSettings",
    "LayerMode",
    "Limits",
    "MemoryConfig",
    "ModeName",
    "ModelConfig",
    "OpenAIConfig",
    "PlayConfig",
    "ProceduralConfig",
    "RateMeasure",
    "RegretMethod",
    "RewardConfig",
    "RolloutConfig",
    "SFTConfig",
    "ScriptedConfig",
    "Setting",
    "TrainConfig",
    "TrainerConfig",
    "TranscriptConfig",
    "VLLMConfig",
    "WinRule",
    "from_dict",
    "from_json",
    "load_file",
    "migrate",
    "preset",
    "to_dict",
    "to_json",
    "to_toml",
    "validate",
]
