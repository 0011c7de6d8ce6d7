"""The model a :class:`~spade.training.trainer.TorchTrainer` updates, made ready for training.

LoRA (``trainer.lora_rank > 0``) wraps the base model in peft adapters; full fine-tuning trains it as is.

Reference model for the KL penalty: only built when ``kl_coef > 0``; with LoRA it is the same base with the
adapters disabled (no copy, :func:`make_reference` returns None), in full fine-tuning a frozen copy of the
initial weights.

Gradient checkpointing (``gradient_checkpointing``) recomputes each decoder layer in the backward pass.
transformers only checkpoints layers in training mode, so the decoder layers alone are flagged as training:
their dropout-bearing submodules stay in eval mode, and the recomputed pass is the forward pass.

Multi-process launches build an ``accelerate.Accelerator`` whose collectives wait up to
:data:`FOLLOWER_WAIT_HOURS`.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Callable
from typing import Any

import torch

from spade.backends.hf import fast_bf16
from spade.config import ModelConfig, TrainerConfig

FOLLOWER_WAIT_HOURS = 24
"""Collective timeout of multi-process launches: how long follower ranks wait for rank 0's next call."""


def wrap_lora(base: Any, cfg: TrainerConfig) -> Any:
    """``base`` with trainable LoRA adapters of rank ``cfg.lora_rank`` on ``cfg.lora_targets``."""
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415 -- only needed with LoRA

    targets: str | list[str] = "all-linear" if cfg.lora_targets == ("all-linear",) else list(cfg.lora_targets)
    config = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        target_modules=targets,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, config)


def make_reference(base: Any, cfg: TrainerConfig) -> Any:
    """A frozen copy of ``base`` for the KL penalty, or None where none is needed (see the module
    docstring)."""
    if cfg.kl_coef <= 0.0 or cfg.lora_rank > 0:
        return None  # LoRA: the reference is the same model with adapters disabled
    ref = copy.deepcopy(base).eval()
    ref.requires_grad_(False)
    return ref


def make_accelerator(*, cpu: bool) -> Any:
    """The ``accelerate.Accelerator`` of a multi-process launch (``cpu``: gloo on CPU)."""
    # accelerate imports deepspeed itself, and only when the launch config asks for it.
    from accelerate import Accelerator, InitProcessGroupKwargs  # noqa: PLC0415 -- multi-process launches

    # Follower ranks wait in a broadcast while rank 0 designs and plays (minutes to hours per step); the
    # default collective timeout (10-30 min) would kill them. A crashed rank still ends the launch at once.
    timeout = InitProcessGroupKwargs(timeout=datetime.timedelta(hours=FOLLOWER_WAIT_HOURS))
    return Accelerator(cpu=cpu, kwargs_handlers=[timeout])


def autocast_dtype(cfg: TrainerConfig, model: ModelConfig, device: torch.device) -> torch.dtype | None:
    """The dtype the trainer's passes compute in under ``trainer.autocast`` (None: the weights' own)."""
    if model.dtype != "float32" or cfg.autocast == "off":
        return None
    if cfg.autocast == "auto" and not fast_bf16(device):
        return None
    return torch.bfloat16


def checkpoint_layers(model: Any) -> None:
    """Recompute every decoder layer in the backward pass (see the module docstring)."""
    from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: PLC0415

    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module.training = True  # the layer's own flag only: what gates checkpointing, not dropout


def stop_between_layers(model: Any, check: Callable[[], None]) -> None:
    """Call ``check`` before every decoder layer's forward: a stop request then ends a pass (and, with
    gradient checkpointing, a backward pass, which runs each layer's forward again) at the next layer."""
    from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: PLC0415

    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module.register_forward_pre_hook(lambda _module, _args: check())
