"""Multi-process training under ``accelerate launch``: rank 0 runs the loop, every other rank only trains.

``accelerate launch --config_file configs/accelerate/ddp.yaml -m spade.cli train ...`` starts one process
per device. Rank 0 runs :func:`spade.run.loop.train` as in a single-process run (design, play, archive, run
directory, policy); its trainer is a :class:`LeaderTrainer`, which broadcasts each trainer call (update,
export, save, load) to the other ranks before making it itself. The other ranks run :func:`follow`: they
build the same trainer and execute the calls they receive, so every collective (gradient all-reduce,
FSDP/ZeRO gathers for export and checkpoints) has all ranks present. Each rank trains on every
``world``-th sample of the step (see :mod:`spade.training.trainer`). :func:`spade.training.follow_run` is a
follower rank's whole run.

Nothing here runs unless the process was started by a distributed launcher (``WORLD_SIZE`` > 1).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from spade.errors import SpadeError
from spade.types import Trainer, TrainSample

if TYPE_CHECKING:
    from spade.config import TrainConfig

Op = Literal["step", "export", "save", "load", "stop"]


class DistributedError(SpadeError):
    """A multi-process launch that cannot work as configured."""


def world_size() -> int:
    """Processes in this launch (``WORLD_SIZE`` set by ``accelerate launch`` / ``torchrun``; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's global rank (0 when not launched distributed)."""
    return int(os.environ.get("RANK", "0"))


def launched() -> bool:
    """True inside a multi-process launch."""
    return world_size() > 1


def is_follower() -> bool:
    """True on ranks other than 0 of a multi-process launch: they only train."""
    return launched() and rank() != 0


def _broadcast(op: Op | None, arg: Any = None) -> tuple[Op, Any]:
    """Rank 0 sends ``(op, arg)``; every rank returns it (followers pass ``None``)."""
    import torch.distributed as dist  # noqa: PLC0415 -- only in multi-process launches

    box: list[Any] = [(op, arg)]
    dist.broadcast_object_list(box, src=0)
    sent: tuple[Op, Any] = box[0]
    return sent


class LeaderTrainer:
    """Rank 0's :class:`~spade.types.Trainer`: each call is first broadcast to the follower ranks.

    Args:
        inner: this rank's trainer, built with ``use_accelerate=True``.
    """

    def __init__(self, inner: Trainer) -> None:
        self.inner = inner
        self.stopped = False

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One synchronous update on all ranks (each takes its share of ``samples``)."""
        _broadcast("step", list(samples))
        return self.inner.train_step(samples)

    def export_weights(self, path: Path) -> Path:
        """Gathered weights written by rank 0 (the other ranks join the gather)."""
        _broadcast("export", str(path))
        return self.inner.export_weights(path)

    def save(self, path: Path) -> None:
        """A world-size-independent checkpoint (see :meth:`spade.training.trainer.TorchTrainer.save`)."""
        _broadcast("save", str(path))
        self.inner.save(path)

    def load(self, path: Path) -> None:
        """Every rank restores the checkpoint, whatever world size wrote it."""
        _broadcast("load", str(path))
        self.inner.load(path)

    def stop(self) -> None:
        """Release the followers (their :func:`follow` returns); idempotent."""
        if not self.stopped:
            _broadcast("stop")
            self.stopped = True


def follow(trainer: Trainer) -> int:
    """A follower rank's loop: execute rank 0's trainer calls until it stops; returns the updates made."""
    updates = 0
    while True:
        op, arg = _broadcast(None)
        if op == "stop":
            return updates
        if op == "step":
            trainer.train_step(arg)
            updates += 1
        elif op == "export":
            trainer.export_weights(Path(arg))
        elif op == "save":
            trainer.save(Path(arg))
        elif op == "load":
            trainer.load(Path(arg))
        else:
            raise DistributedError(f"rank {rank()} received unknown trainer call {op!r} from rank 0")


def check_launch(cfg: TrainConfig) -> None:
    """Raise unless this launch can train ``cfg`` (nothing to check outside a multi-process launch); every
    rank runs it before anything starts, so a launch that cannot work ends at once on all of them.

    Raises:
        DistributedError: the scripted backend, or an in-process vllm engine (the message says what to use).
    """
    if not launched():
        return
    check_backend(cfg)
    if cfg.model.backend == "vllm" and cfg.model.vllm.in_process:
        raise DistributedError(
            f"an in-process vllm engine (model.vllm.in_process, as --preset cpu-tiny sets it) takes this "
            f"process's torch.distributed group, which the {world_size()} processes of this launch need for "
            "the update; add --model.backend hf, or serve the model with vLLM and use --model.backend openai "
            "(docs/scaling.md)"
        )


def check_world(trainer: Any) -> None:
    """Raise unless ``trainer``'s accelerator spans every process of this launch (rank 0 would otherwise
    train alone while the other ranks wait for it for ever)."""
    accelerator = getattr(trainer, "accelerator", None)
    joined = accelerator.num_processes if accelerator is not None else 1
    if joined != world_size():
        raise DistributedError(
            f"the trainer of rank {rank()} joined a process group of {joined} process(es), not the "
            f"{world_size()} of this launch: something in this process set up torch.distributed first (an "
            "in-process engine); use --model.backend hf or openai in a multi-process launch"
        )


def check_backend(cfg: TrainConfig) -> None:
    """Raise unless ``cfg`` trains a torch model (the only trainer that runs on several ranks)."""
    if cfg.model.backend == "scripted":
        raise DistributedError(
            f"the scripted backend has no multi-process trainer (this launch has {world_size()} processes); "
            "run it with plain `spade train`, or pick a real model backend (--model.backend hf)"
        )
