"""``spade export RUN --format openenv``: an OpenEnv environment package (server and client).

Layout under ``OUT/openenv``: ``pyproject.toml`` (``pip install OUT/openenv``), ``openenv.yaml`` (OpenEnv's
manifest), ``README.md`` and the package ``spade_openenv_<run>/`` — a copy of
:mod:`spade.ecosystem.openenv_pkg` (models, client, server) plus ``envs/`` with the environment sources and
``manifest.jsonl``. The server needs ``spade`` (its sandbox runs every episode) and ``openenv-core``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spade.ecosystem import ExportedEnv, copy_package, package_name

TEMPLATE = Path(__file__).resolve().parent / "openenv_pkg"

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{n} environments of spade run {run}, served with OpenEnv; every episode runs in spade's sandbox"
requires-python = ">=3.11"
dependencies = ["openenv-core==0.3.0", "spade"]

[project.scripts]
{dist}-server = "{pkg}.server.app:main"

[tool.setuptools]
packages = ["{pkg}", "{pkg}.server"]

[tool.setuptools.package-data]
{pkg} = ["envs/*.py", "envs/manifest.jsonl"]
"""

MANIFEST = """spec_version: 1
name: {pkg}
type: space
runtime: fastapi
app: {pkg}.server.app:app
port: 8000
"""

README = """# {pkg}

{n} environments of spade run `{run}` as an OpenEnv environment. Every episode runs in spade's sandbox.

    pip install .            # or run from this folder
    python -m {pkg}.server.app --port 8000

    from {pkg} import SpadeAction, SpadeEnvClient
    with SpadeEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(seed=0, env_id="{first}")
        while not result.done:
            result = env.step(SpadeAction(message=input(result.observation.text + "\\n> ")))

`reset(seed=s)` without `env_id` plays the environment at `s` modulo their number ({ids}).
"""


def write_openenv(out: Path, run_name: str, envs: Sequence[ExportedEnv]) -> Path:
    """Write the package into ``out`` (created; must not exist) and return it."""
    pkg = package_name(run_name, "spade_openenv")
    root = Path(out)
    copy_package(TEMPLATE, root / pkg, envs)
    rows = [{"env_id": e.env_id} for e in envs]
    fields = {"pkg": pkg, "dist": pkg.replace("_", "-"), "run": run_name, "n": len(rows)}
    (root / "pyproject.toml").write_text(PYPROJECT.format(**fields), encoding="utf-8")
    (root / "openenv.yaml").write_text(MANIFEST.format(**fields), encoding="utf-8")
    ids = ", ".join(r["env_id"] for r in rows)
    (root / "README.md").write_text(
        README.format(**fields, first=rows[0]["env_id"], ids=ids), encoding="utf-8"
    )
    return root
