"""The trainer side of the method: the update of the policy's weights.

- :mod:`~spade.training.grpo`: the GRPO loss (pure math);
- :mod:`~spade.training.trainer`: the torch Trainer (one optimiser step per training step), with
  :mod:`~spade.training.micro_batches` (packing and per-token loss pieces), :mod:`~spade.training.model`
  (LoRA, reference model, accelerator) and :mod:`~spade.training.checkpoint` (its state file);
- :mod:`~spade.run.warm_start`: the supervised warm start before RL;
- :mod:`~spade.training.distributed`: multi-process training under ``accelerate launch``.

A run's trainer is the one its backend names (:data:`spade.backends.registry.TRAINERS`), imported only when
built, so importing this package stays cheap and a scripted run never loads torch, as
:func:`spade.backends.make_policy` does for engines.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from spade.backends import set_threads
from spade.backends.registry import TRAINERS
from spade.config import TrainConfig
from spade.rundir import RunDir
from spade.training.distributed import (
    LeaderTrainer,
    check_backend,
    check_world,
    follow,
    launched,
    rank,
    world_size,
)
from spade.types import Trainer

__all__ = ["follow_run", "make_trainer"]


def make_trainer(cfg: TrainConfig) -> Trainer:
    """The Trainer the policy backend names (:data:`~spade.backends.registry.TRAINERS`); under ``accelerate
    launch`` (rank 0), the torch trainer wrapped so that the other ranks follow its calls."""
    if launched():
        check_backend(cfg)
        inner = _trainer(cfg, use_accelerate=True)
        check_world(inner)
        return LeaderTrainer(inner)
    return _trainer(cfg, use_accelerate=False)


def follow_run(cfg: TrainConfig, *, resume: bool, progress: Callable[[str], None] | None = None) -> RunDir:
    """A follower rank's whole run: build the run's trainer (with the run's torch threads), then
    :func:`~spade.training.distributed.follow` rank 0 until it stops; ``progress`` hears what this rank
    does (rank 0's console shows the run)."""
    say = progress or (lambda _: None)
    run = RunDir(cfg.run_dir)
    if resume:
        cfg = run.load_config()
    check_backend(cfg)
    say(set_threads(cfg.model.threads).line())
    trainer = _trainer(cfg, use_accelerate=True)
    check_world(trainer)
    say(f"rank {rank()} of {world_size()}: training as rank 0 asks (rank 0 shows the run's progress)")
    updates = follow(trainer)
    say(f"rank {rank()} of {world_size()}: rank 0 ended the run after {updates} update{'s' * (updates != 1)}")
    return run


def _trainer(cfg: TrainConfig, *, use_accelerate: bool) -> Trainer:
    """The backend's trainer class, its module (torch, transformers for the torch trainer) imported on first use."""
    module, _, name = TRAINERS[cfg.model.backend].partition(":")
    trainer_cls: Any = getattr(importlib.import_module(module), name)
    trainer: Trainer = trainer_cls.from_config(cfg, use_accelerate=use_accelerate)
    return trainer
