"""Opening a run directory, and the loop state a run starts or resumes from.

:func:`open_run` decides the config to run and whether saved state continues (``--resume``, ``--steps``,
runtime options, ``--overwrite``); :func:`fresh` and :func:`restore` give the first step's
:class:`spade.run.state.LoopState`; :func:`save_checkpoint` writes one atomically after each step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spade import stopping
from spade.config import ConfigError, TrainConfig
from spade.config.options import RUNTIME_OPTIONS, changed_options, with_options
from spade.modes import Mode
from spade.run import preflight
from spade.run.components import Components
from spade.run.state import LoopState
from spade.rundir import RunDir

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a resume changes in the saved config: the step total (None: as saved) and runtime options."""

    steps: int | None = None
    runtime: Mapping[str, Any] = field(default_factory=dict)


def check_start(run: RunDir, cfg: TrainConfig, resume: bool) -> None:
    """Raise before anything (even the lock file) is written when ``run`` has no config to resume, or when
    a fresh ``cfg`` names what no registry holds (the CLI checks names as it parses; a library caller's config
    is checked here)."""
    if resume:
        run.load_config()
    else:
        preflight.check_names(cfg)


def open_run(
    run: RunDir, cfg: TrainConfig, resume: bool, overwrite: bool, resumed: Resumed, *, progress: Progress
) -> tuple[TrainConfig, bool]:
    """The config to run and whether it continues saved state (False: a fresh start).

    Raises:
        ConfigError: a resume that changes an option other than runtime ones, or sets fewer steps than
            the run has done; raised before anything is written.
    """
    if resume:
        cfg = with_runtime(run.load_config(), resumed.runtime, progress)
        if resumed.steps is not None:
            cfg = dataclasses.replace(cfg, steps=resumed.steps)
        if not overwrite:
            run.check_archive()
            run.make_folders()
            done = run.resume_point().step  # raises when there is nothing safe to continue from
            if resumed.steps is not None and resumed.steps < done:
                raise ConfigError(
                    f"--steps {resumed.steps} is below the {done} steps {run.root} has done: pass --steps "
                    f"{done} or more to extend it, or leave --steps out (or add --overwrite to start it over)"
                )
            run.save_config(cfg)
            return cfg, True
    if overwrite:
        run.clear()
    run.create(cfg)
    return cfg, False


def with_runtime(cfg: TrainConfig, runtime: Mapping[str, Any], progress: Progress) -> TrainConfig:
    """The saved ``cfg`` with new values of runtime options; a progress line names each change."""
    refused = sorted(set(runtime) - set(RUNTIME_OPTIONS))
    if refused:
        raise ConfigError(
            f"a resumed run keeps its saved config: {', '.join(refused)} cannot change (only the runtime "
            f"options {', '.join(RUNTIME_OPTIONS)}); start a new run to change them"
        )
    new = with_options(cfg, runtime)
    before = changed_options(new, cfg)
    for name, value in changed_options(cfg, new).items():
        progress(f"resuming with {name}={value!r} (was {before[name]!r})")
    return new


def fresh(cfg: TrainConfig, c: Components, mode: Mode) -> LoopState:
    """The state of a run's first step (the mode archives what it starts from)."""
    return LoopState(corpus=c.corpus_state(), mode=mode.start(cfg, c.memory))


def restore(cfg: TrainConfig, run: RunDir, c: Components, mode: Mode, progress: Progress) -> LoopState:
    """The state saved by the newest complete checkpoint, with the archive, metrics, corpus sampler, trainer
    and policy rolled back to it (no checkpoint yet: the run starts over)."""
    point = run.resume_point()
    for note in point.notes:
        progress(note)
    checkpoint = point.checkpoint
    if checkpoint is None:  # killed before the first checkpoint: start the same run over
        c.memory.rollback_to(-1)
        run.truncate_metrics(0)
        return fresh(cfg, c, mode)
    progress(f"resuming {run.root} at step {point.step} of {cfg.steps} (checkpoint {checkpoint.name})")
    if point.step >= cfg.steps:
        progress(f"the run has done all {cfg.steps} steps; extend it with `--resume {run.root} --steps N`")
    state = LoopState.from_dict(run.read_state(checkpoint))
    c.memory.rollback_to(state.step - 1)
    run.truncate_metrics(state.step)
    c.restore_corpus(state.corpus)
    c.trainer.load(checkpoint / "trainer")
    c.policy.load_weights(c.trainer.export_weights(run.root / "policy"))
    stopping.check()  # the loads hold the event loop: a stop asked for meanwhile is acted on here
    return state


def save_checkpoint(run: RunDir, c: Components, state: LoopState) -> None:
    """Write the trainer and ``state`` as the checkpoint of ``state.step`` (atomically)."""
    tmp = run.begin_checkpoint(state.step)
    c.trainer.save(tmp / "trainer")
    state.corpus = c.corpus_state()
    run.commit_checkpoint(tmp, state.step, state.to_dict())
