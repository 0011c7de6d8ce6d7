"""spade and the RL-environment ecosystems: OpenEnv and verifiers, both ways.

Out (``spade export RUN --format openenv|verifiers``): a run's valid environments as an installable package of
that ecosystem whose every episode runs in spade's sandbox (:mod:`spade.ecosystem.openenv_export`,
:mod:`spade.ecosystem.verifiers_export`).
In (``--mode fixed_pool --pool openenv:URL``): spade's agent trains on a remote environment server
(:mod:`spade.ecosystem.remote`).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ExportFormat = Literal["pool", "openenv", "verifiers"]
"""``pool``: the released-pool folder and the Parquet dataset; ``openenv``: an OpenEnv server + client package;
``verifiers``: a verifiers taskset package."""


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


def copy_package(template: Path, dest: Path, envs: Sequence[ExportedEnv]) -> None:
    """Copy a package template to ``dest`` (created with its parents) and add ``envs/`` with a manifest."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    folder = dest / "envs"
    folder.mkdir()
    rows = []
    for env in envs:
        (folder / env.file).write_text(env.code, encoding="utf-8")
        rows.append({"env_id": env.env_id, "file": env.file, "skill": env.skill})
    (folder / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
