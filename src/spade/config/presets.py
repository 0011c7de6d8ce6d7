"""Named presets: full :class:`TrainConfig` values that command-line flags override, and config files.

Each preset is a TOML file in ``presets/`` holding only the fields that differ from the defaults, read with
:func:`spade.config.from_dict` when this package is imported. A config file of one's own
(:func:`load_file`, ``spade train --config FILE``) is read the same way.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

from spade.config import toml
from spade.config.errors import ConfigError
from spade.config.serial import from_dict, from_json
from spade.config.train import TrainConfig


def load(name: str) -> TrainConfig:
    """The preset in ``presets/<name>.toml``."""
    text = resources.files(__package__).joinpath("presets", f"{name}.toml").read_text(encoding="utf-8")
    return from_dict(TrainConfig, tomllib.loads(text))


PAPER = load("paper")
"""The released games recipe (8 GPUs, 30B): 24 environments every 4 steps over a 3-of-6 skill rotation, 8 plays + 16
hinted plays each, a rejected design retried up to 5 times, 25 turns, 32k context (play and design), designer 16k
new tokens, hints 4k, 6,000-word documents, top-p 0.95 / top-k 20, blend reward credited after 4 steps with the
plateau term on the window's mean return, weight decay 0.1, TIS on every sample. The regret estimator uses every
hinted play (``--reward.regret-estimator difference_of_means`` is the authors'). Paper ablations are single
switches on top: ``--designer.no-train``, ``--memory.no-enabled``, ``--corpus.no-enabled``, ``--designer.skills
mathematical_reasoning pattern_recognition``."""

PAPER_TOOL = load("paper-tool")
"""The released tool-use recipe (30B): 24 environments every 8 steps over all 6 tool skills, credited after
8 steps, KL 0.005, the model's own solvability review, the multi-turn instruction contract in ten realistic
domains (documents as optional flavour, 4,000 words), hints 2k tokens; otherwise as ``paper``."""

PAPER_8B = load("paper-8b")
"""The released 8B games recipe (Qwen3-8B): as ``paper``, with thinking on (``model.thinking``), KL 0.005,
designer 20,000 new tokens and bfloat16 weights."""

CPU_TINY = load("cpu-tiny")
"""Embedded SmolLM2-135M on 2 CPU cores: a complete run in well under 30 minutes."""

PRESETS: dict[str, TrainConfig] = {
    "paper": PAPER,
    "paper-tool": PAPER_TOOL,
    "paper-8b": PAPER_8B,
    "cpu-tiny": CPU_TINY,
}


def preset(name: str) -> TrainConfig:
    """A named preset; unknown names raise ConfigError listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}") from None


def load_file(path: Path) -> TrainConfig:
    """The config in a file: TOML as ``spade config`` prints it (``# key: unset`` read as None), or JSON
    (``.json``: a run's config.json, of this or an older version); options it leaves out take their defaults,
    as in a preset's file.

    Raises:
        ConfigError: the file cannot be read, is not TOML/JSON, or holds an unknown option or a bad value
            (the message names the file, and the option by its dotted name).
    """
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return from_json(text)
        return from_dict(TrainConfig, toml.loads(text))
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:  # TOML/JSON syntax, or ConfigError: a key and its bad value
        kind = "JSON" if path.suffix == ".json" else "TOML"
        problem = str(exc) if isinstance(exc, ConfigError) else f"not valid {kind}: {exc}"
        raise ConfigError(f"config file {path}: {problem}") from None
