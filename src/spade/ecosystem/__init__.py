"""spade and the RL-environment ecosystems: OpenEnv and verifiers, both ways.

Out (``spade export RUN --format openenv|verifiers``): a run's valid environments as an installable package of
that ecosystem whose every episode runs in spade's sandbox (:mod:`spade.ecosystem.openenv_export`).
In (``--mode fixed_pool --pool openenv:URL``): spade's agent trains on a remote environment server
(:mod:`spade.ecosystem.remote`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ExportFormat = Literal["pool", "openenv"]
"""``pool``: the released-pool folder and the Parquet dataset; ``openenv``: an OpenEnv server + client package."""


@dataclass(frozen=True, slots=True)
class ExportedEnv:
    """One environment going into an ecosystem package."""

    env_id: str
    file: str
    """File name inside the package's ``envs/`` folder."""
    skill: str
    code: str


def package_name(run_name: str, prefix: str) -> str:
    """A Python package name for a run's export, e.g. ``spade_openenv_my_run``."""
    return f"{prefix}_{re.sub(r'[^0-9a-zA-Z]+', '_', run_name).strip('_').lower() or 'run'}"
