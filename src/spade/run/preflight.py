"""Checks a run's setup before anything is written: names, paths, pool, corpus, model and model server.

:func:`check_names` checks the names a config gives against the registries that hold them (the backend,
skills, seed games, eval suites, Reasoning-Gym tasks), which :mod:`spade.config` cannot import; ``spade
train`` and ``spade config`` run it as they parse the command line. :func:`check_setup` runs it again, and
the rest, before ``spade train`` creates (or touches) a run directory, so a typo costs one line of output
and leaves nothing behind. A name raises :class:`~spade.config.ConfigError`, any other problem
:class:`SetupError`; either one-line message names the value and the fix. What cannot be checked cheaply
here (a corpus file's every record, a model's weights) is checked when the run starts; a failure there
removes the fresh run directory again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from spade.backends.server_check import check_servers
from spade.config import ConfigError, DesignerConfig, EvalConfig, ModelConfig, TrainConfig
from spade.config.skills import skills_for
from spade.design.seed_files import is_file_entry, seed_files
from spade.ecosystem import remote as ecosystem_remote
from spade.errors import SetupError
from spade.training import distributed


def check_setup(cfg: TrainConfig, *, fresh: bool, mode_checks: Callable[[TrainConfig], None]) -> None:
    """Raise for the first problem found in ``cfg``'s names (:func:`check_names`), paths, model and server.

    Args:
        cfg: the resolved config.
        fresh: a new run (its run directory must be creatable); False when resuming one.
        mode_checks: the mode's checks of what it reads (pool, corpus, tasks: :meth:`spade.modes.Mode.preflight`).

    Raises:
        ConfigError: a name no registry holds.
        spade.training.distributed.DistributedError: a multi-process launch that cannot train ``cfg``.
        SetupError: any other problem.
    """
    check_names(cfg)
    distributed.check_launch(cfg)
    if fresh:
        check_runs_dir(cfg.run_dir)
    mode_checks(cfg)
    if cfg.model.backend != "scripted":
        check_model(cfg.model.model)
    if cfg.model.backend == "openai":
        check_servers(cfg.model.openai.base_urls)


def check_names(cfg: TrainConfig) -> None:
    """Every name ``cfg`` gives is in its registry: seed games and seeds, skills, the backend and eval suites
    (a mode checks its own names, e.g. procedural mode's Reasoning-Gym tasks: :meth:`spade.modes.Mode.check_config`).

    Raises:
        ConfigError: the first unknown name, with the known ones.
    """
    _check_seed_names(cfg)
    _check_skills(cfg.designer)
    _check_backend(cfg.model)
    _check_suites(cfg.eval)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _check_seed_names(cfg: TrainConfig) -> None:
    """``sft.envs`` are seed games, ``designer.seeds`` seeds of ``designer.skills`` or environment files
    (:func:`spade.design.seed_files.seed_files` checks these)."""
    d = cfg.designer
    if not (cfg.sft.episodes and cfg.sft.envs) and not d.seeds:
        return
    from spade import envs  # noqa: PLC0415 - imports the seed library; only to check these names

    games = envs.names("games")
    bad = [n for n in cfg.sft.envs if n not in games] if cfg.sft.episodes else []
    _require(not bad, f"sft.envs {bad} are not seed games; choose from {', '.join(games)}")
    ours = [n for n in envs.names(d.setting) if not d.skills or envs.spec(n).skill in d.skills]
    files = [n for n in d.seeds if n not in envs.names(d.setting) and is_file_entry(n)]
    bad = [n for n in d.seeds if n not in ours and n not in files]
    _require(
        not bad,
        f"designer.seeds {bad} are not seeds of designer.skills; choose from {', '.join(ours)}, or give an "
        "environment file or folder (PATH.py, or PATH.py:SKILL where the file declares no skill)",
    )
    clash = sorted({f.path.stem for f in seed_files(files, d)} & (set(d.seeds) - set(files)))
    _require(
        not clash, f"designer.seeds: files named as the library seeds {clash} given too: rename the files"
    )


def _check_skills(d: DesignerConfig) -> None:
    known = skills_for(d.setting)
    bad = [s for s in d.skills if s not in known]
    _require(not bad, f"designer.skills {bad} are not {d.setting} skills; choose from {', '.join(known)}")


def _check_backend(m: ModelConfig) -> None:
    from spade.backends.registry import BACKENDS  # noqa: PLC0415 - names only; engines import on use

    _require(
        m.backend in BACKENDS, f"unknown model.backend {m.backend!r}; choose one of: {', '.join(BACKENDS)}"
    )


def _check_suites(e: EvalConfig) -> None:
    from spade.evals.registry import DATA_SUITES, SUITES  # noqa: PLC0415 - names only; suites import on use

    bad = [s for s in e.suites if s.partition(":")[0] not in SUITES]
    _require(not bad, f"eval.suites {bad} are unknown; choose from: {', '.join(SUITES)}")
    data = e.data_paths()
    bad = [s for s in data if s not in DATA_SUITES]
    _require(
        not bad, f"eval.data names {bad}, which read no local copy; those that do: {sorted(DATA_SUITES)}"
    )
    missing = [
        s for s in dict.fromkeys(x.partition(":")[0] for x in e.suites) if s in DATA_SUITES - data.keys()
    ]
    _require(not missing, f"eval.suites {missing} read a local copy: give it as --eval.data SUITE=PATH")
    gone = [f"{s}={p}" for s, p in data.items() if e.every and not Path(p).exists()]
    _require(not gone, f"eval.data paths do not exist: {gone}")


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
    """Every difficulty level of every procedural task builds an item (:func:`check_names` checked the names)."""
    from spade.envs.rg_tasks import ProceduralError, task_levels  # noqa: PLC0415 - imports reasoning_gym

    for task in tasks:
        try:
            task_levels(task)
        except ProceduralError as exc:
            raise SetupError(f"--procedural.tasks: {exc}; leave the task out") from None


def check_corpus(path: str) -> None:
    """A corpus path exists and reads as a corpus (read again when the run starts)."""
    from spade.design.corpus import CorpusError, load_corpus  # noqa: PLC0415

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
