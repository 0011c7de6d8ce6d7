"""The trainer's checkpoint: one ``trainer_state.pt`` beside the exported weights, world-size independent.

The state file holds plain tensors, numbers and lists only (``torch.load(weights_only=True)`` reads it):
the trainable tensors in full keyed by parameter name, the optimiser state keyed by parameter name
(``torch.distributed.checkpoint.state_dict``), the RNG states and the step, so a checkpoint written by N
processes loads in M. Under DeepSpeed the gathered weights are kept but not the optimiser moments (a resume
restarts them), and loading into a DeepSpeed run is refused. Format 1 (optimiser state keyed by index,
written by older versions) is still read.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_FILE = "trainer_state.pt"
WEIGHTS_DIR = "weights"
STATE_FORMAT = 2
"""2: optimiser state keyed by parameter name (world-size independent); 1 (still read): keyed by index."""


def full_state(
    model: Any, optimizer: Any, names: set[str], accelerator: Any, deepspeed: bool
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The tensors ``names`` in full and the optimiser state keyed by parameter name, on rank 0.

    Collective (every rank calls it; the others get partial dicts). Works on a plain module, DDP and FSDP
    through ``torch.distributed.checkpoint.state_dict``; under DeepSpeed only the gathered weights (the
    optimiser state is ``None``).
    """
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions,
        get_state_dict,
    )

    if deepspeed:
        weights = accelerator.get_state_dict(model)
        return {n: t.detach().cpu().float() for n, t in weights.items() if n in names}, None
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    states: tuple[dict[str, Any], dict[str, Any]] = get_state_dict(model, optimizer, options=options)
    model_sd, optim_sd = states
    return {n: t.detach().cpu().clone() for n, t in model_sd.items() if n in names}, dict(optim_sd)


def load_full_state(
    model: Any, optimizer: Any, trainable: dict[str, Any], optimizer_state: dict[str, Any] | None
) -> None:
    """Load what :func:`full_state` returned into this rank's (possibly wrapped) model and optimiser."""
    from torch.distributed.checkpoint.state_dict import (  # noqa: PLC0415
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, strict=False)
    set_model_state_dict(model, trainable, options=options)
    if optimizer_state is not None:  # None: written under DeepSpeed, the moments restart
        set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)


def write_state(
    file: Path, *, step: int, trainable: dict[str, Any], optimizer: dict[str, Any] | None
) -> None:
    """Write the state file: ``trainable`` and ``optimizer`` from :func:`full_state`, this process's RNG
    states and ``step``."""
    state = {
        "format": STATE_FORMAT,
        "step": step,
        "trainable": trainable,
        "optimizer": optimizer,
        "rng": rng_state(),
    }
    torch.save(state, file)


def read_state(path: Path, shapes: dict[str, torch.Size], *, deepspeed: bool) -> dict[str, Any]:
    """The state file in ``path``, checked against the trainable tensors' ``shapes`` before anything loads.

    Raises:
        FileNotFoundError: ``path`` holds no state file.
        ValueError: another format, tensors that differ from ``shapes``, or a DeepSpeed run (not built).
    """
    file = Path(path) / STATE_FILE
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found: pass a folder written by TorchTrainer.save")
    state: dict[str, Any] = torch.load(file, map_location="cpu", weights_only=True)
    if state.get("format") not in (1, STATE_FORMAT):
        raise ValueError(f"{file} has checkpoint format {state.get('format')}, expected {STATE_FORMAT}")
    saved = state["trainable"]
    differ = set(shapes) ^ set(saved)
    differ |= {n for n in set(shapes) & set(saved) if shapes[n] != saved[n].shape}
    if differ:
        raise ValueError(
            f"checkpoint {file} does not match this model/LoRA setup (differing tensors, e.g. "
            f"{sorted(differ)[:3]}); load it with the configuration it was saved with"
        )
    if deepspeed:
        raise ValueError(
            f"resuming {file} under DeepSpeed is not built; resume with configs/accelerate/fsdp.yaml, "
            "ddp.yaml or one process (the checkpoint is world-size independent)"
        )
    return state


def rng_state() -> dict[str, Any]:
    """This process's torch, CUDA, numpy and ``random`` states, as tensors and lists only."""
    np_state: Any = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
        "python": list(random.getstate()),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    name, keys, *rest = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), *rest))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
