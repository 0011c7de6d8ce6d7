"""Checks a run's setup before anything is written: paths, pool, corpus, model and model server.

:func:`check_setup` runs before ``spade train`` creates (or touches) a run directory, so a typo costs one
line of output and leaves nothing behind. Each problem raises :class:`SetupError` whose one-line message
names the value and the fix. What cannot be checked cheaply here (a corpus file's every record, a model's
weights) is checked when the run starts; a failure there removes the fresh run directory again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import httpx

from spade.config import TrainConfig
from spade.ecosystem import remote as ecosystem_remote
from spade.errors import SpadeError

SERVER_CHECK_TIMEOUT_S = 5.0


class SetupError(SpadeError):
    """A run cannot start as configured; the message says what to change."""


def check_setup(cfg: TrainConfig, *, fresh: bool) -> None:
    """Raise :class:`SetupError` for the first problem found in ``cfg``'s paths, model and server.

    Args:
        cfg: the resolved config.
        fresh: a new run (its run directory must be creatable); False when resuming one.
    """
    if fresh:
        check_runs_dir(cfg.run_dir)
    if cfg.mode == "fixed_pool" or cfg.memory.warm_start:
        check_pool(cfg.pool)
    if cfg.mode == "procedural":
        check_procedural(cfg.procedural.tasks)
    if cfg.mode == "selfplay" and cfg.corpus.enabled and cfg.corpus.path:
        check_corpus(cfg.corpus.path)
    if cfg.model.backend != "scripted":
        check_model(cfg.model.model)
    if cfg.model.backend == "openai":
        check_servers(cfg.model.openai.base_urls)


def check_runs_dir(run_dir: Path) -> None:
    """The run directory (or its nearest existing parent) is a folder this process can write in."""
    for path in (run_dir, *run_dir.parents):
        if not path.exists():
            continue
        if not path.is_dir():
            raise SetupError(f"{path} is a file, not a folder: choose another --runs-dir or --name")
        if not os.access(path, os.W_OK | os.X_OK):
            raise SetupError(f"cannot write in {path} (read-only or not yours): choose a writable --runs-dir")
        return


def check_pool(pool: str) -> None:
    """A pool folder (when one is given) exists and holds environment files."""
    if not pool:
        return
    if ecosystem_remote.is_remote(pool):
        try:
            ecosystem_remote.check_pool(pool)
        except ecosystem_remote.RemoteEnvError as exc:
            raise SetupError(str(exc)) from exc
        return
    folder = Path(pool).expanduser()
    if not folder.is_dir():
        raise SetupError(
            f"pool folder {folder} does not exist: fix --pool (or leave it empty for the seed library)"
        )
    if not any(folder.glob("*.py")) and not any(folder.glob("games/*.py")):
        raise SetupError(f"pool folder {folder} holds no environment files (*.py or games/*.py): fix --pool")


def check_procedural(tasks: tuple[str, ...]) -> None:
    """Every difficulty level of every procedural task builds an item (names were checked by the config)."""
    from spade.procedural import ProceduralError, task_levels  # noqa: PLC0415 - imports reasoning_gym

    for task in tasks:
        try:
            task_levels(task)
        except ProceduralError as exc:
            raise SetupError(f"--procedural.tasks: {exc}; leave the task out") from None


def check_corpus(path: str) -> None:
    """A corpus path exists and reads as a corpus (read again when the run starts)."""
    from spade.corpus import CorpusError, load_corpus  # noqa: PLC0415

    p = Path(path).expanduser()
    if not p.exists():
        raise SetupError(
            f"corpus path {p} does not exist: fix --corpus.path (a JSONL/Parquet file or a folder), "
            "or leave it empty for the shipped corpus"
        )
    try:
        load_corpus(p)
    except (CorpusError, OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"--corpus.path: {exc}") from None


def check_model(model: str) -> None:
    """The model resolves to a local folder (no download ever happens)."""
    from spade.backends.embedded import ModelNotFoundError, resolve_model  # noqa: PLC0415 - heavy on import

    try:
        resolve_model(model)
    except ModelNotFoundError as exc:
        raise SetupError(f"--model.model: {exc}") from None


def check_servers(base_urls: Sequence[str]) -> None:
    """Every endpoint of a generation fleet answers (see :func:`check_server`); at least one is given."""
    if not base_urls:
        raise SetupError(
            "model.backend 'openai' needs a server URL: --model.openai.base-urls http://HOST:PORT/v1"
        )
    for url in base_urls:
        check_server(url)


def check_server(base_url: str) -> None:
    """An OpenAI-compatible server answers ``GET {base_url}/models``."""
    if not base_url.startswith(("http://", "https://")):
        raise SetupError(
            f"--model.openai.base-urls: {base_url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1"
        )
    url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, timeout=SERVER_CHECK_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise SetupError(
            f"no model server answers at {base_url} ({type(exc).__name__}): start the server first "
            "(see docs/running.md) or fix --model.openai.base-urls"
        ) from None
    if response.status_code >= 400:
        raise SetupError(
            f"the model server at {base_url} answered GET /models with HTTP {response.status_code}: "
            "check --model.openai.base-urls (each ends in /v1) and the server's log"
        )
