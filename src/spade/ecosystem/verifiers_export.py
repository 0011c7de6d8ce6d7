"""``spade export RUN --format verifiers``: an installable verifiers taskset package.

Layout under ``OUT/verifiers``: ``pyproject.toml`` (``pip install OUT/verifiers``), ``README.md`` and the
package ``spade_verifiers_<run>/`` — a copy of :mod:`spade.ecosystem.verifiers_pkg` (taskset, env) plus
``envs/`` with the environment sources and ``manifest.jsonl``. Its ``SpadeEnv`` is multi-turn: the
environment plays the user, each reply is one step in spade's sandbox, and the environment's own return is
the reward (``spade_return``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spade.ecosystem import ExportedEnv, copy_package, package_name

TEMPLATE = Path(__file__).resolve().parent / "verifiers_pkg"

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{n} environments of spade run {run} as a verifiers taskset; every episode runs in spade's sandbox"
requires-python = ">=3.11"
dependencies = ["verifiers==0.4.0", "spade"]

[tool.setuptools]
packages = ["{pkg}"]

[tool.setuptools.package-data]
{pkg} = ["envs/*.py", "envs/manifest.jsonl"]
"""

README = """# {pkg}

{n} environments of spade run `{run}` as a verifiers taskset (multi-turn; the reward is each environment's
own return, `spade_return`). Every episode runs in spade's sandbox.

    pip install .       # then, in Python:

    from verifiers.v1.utils.loaders import load_environment, resolve_env_config
    env = load_environment(resolve_env_config({{"taskset": {{"id": "{pkg}", "seeds": 8}}}}))
"""


def write_verifiers(out: Path, run_name: str, envs: Sequence[ExportedEnv]) -> Path:
    """Write the package into ``out`` (created; must not exist) and return it."""
    pkg = package_name(run_name, "spade_verifiers")
    root = Path(out)
    copy_package(TEMPLATE, root / pkg, envs)
    fields = {"pkg": pkg, "dist": pkg.replace("_", "-"), "run": run_name, "n": len(envs)}
    (root / "pyproject.toml").write_text(PYPROJECT.format(**fields), encoding="utf-8")
    (root / "README.md").write_text(README.format(**fields), encoding="utf-8")
    return root
