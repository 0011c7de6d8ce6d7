"""The torch Trainer: GRPO updates of a transformers model, LoRA (peft) or full fine-tuning.

One ``train_step`` is one optimiser step: the samples are packed into micro-batches of at most
``micro_batch_tokens`` padded tokens (:mod:`spade.training.micro_batches`), each micro-batch's loss is its
token sum divided by the step's total loss-token count (token-mean aggregation, see
:mod:`spade.training.grpo`), gradients accumulate over micro-batches, then they are clipped and AdamW steps
once.

Log-probabilities are those of the raw model at temperature 1, matching what the samplers record. Because
a step is a single optimiser step, the "old" policy of the PPO ratio is the trainer's own forward pass
(detached): the ratio is 1 in value and only its gradient acts. The truncated IS weight
``min(exp(old - sample), cap)`` corrects stale samples (``TrainSample.staleness > 0``; every sample with
``tis_fresh``).

Stopping: in a single process a stop request (:mod:`spade.stopping`) ends an update between micro-batches
and, inside a pass, at the next decoder layer (a forward pre-hook; with gradient checkpointing the backward
pass runs each layer's forward again, so it stops there too). The step's gradients are dropped, the weights
and the optimiser stay as they were, and :class:`~spade.stopping.Interrupted` is raised. The ranks of a
multi-process launch finish their step: they must all make the same collectives.

Mixed precision (``autocast``): the passes run under ``torch.autocast`` in bfloat16 while the weights,
gradients and AdamW stay float32 and log-softmax is taken in float32
(``spade.training.grpo.token_logprobs``), the usual mixed-precision split (a step of 8 × 512 tokens on a
2-core AVX512-BF16 CPU: 1.9× faster).

LoRA or full fine-tuning, the KL reference model, gradient checkpointing and the accelerator: see
:mod:`spade.training.model`.

Multi-process (``accelerate launch``, see :mod:`spade.training.distributed` and docs/scaling.md): with
``use_accelerate=True`` the model and optimiser go through ``accelerate.Accelerator.prepare`` (DDP / FSDP /
DeepSpeed as set up by the launch config; ``device="cpu"`` gives gloo on CPU);
each process takes every ``world``-th sample, the loss-token count is all-reduced so the token mean is
global (losses are scaled by ``world`` because DDP averages gradients), backward runs through
``accelerator.backward`` under ``no_sync`` for all but the last micro-batch, and clipping uses
``accelerator.clip_grad_norm_``. Export and checkpoints are collective (every rank calls them; rank 0
writes); a checkpoint holds full tensors keyed by parameter name, so one written by N processes loads in M
(:mod:`spade.training.checkpoint`).

The trainer shares nothing mutable with a Policy: it writes weights with ``export_weights`` and the Policy
loads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import resource
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from spade import stopping
from spade.backends.embedded import resolve_model
from spade.backends.hf import DTYPES, pick_device
from spade.backends.threads import set_threads
from spade.config import ModelConfig, TrainConfig, TrainerConfig
from spade.resources import compact_heap, release_free_memory
from spade.training.checkpoint import (
    STATE_FILE,
    WEIGHTS_DIR,
    full_state,
    load_full_state,
    read_state,
    set_rng_state,
    write_state,
)
from spade.training.grpo import ClipConfig, LossParts, grpo_loss_parts, token_logprobs
from spade.training.micro_batches import (
    logprobs_at,
    loss_positions,
    loss_tokens,
    pad,
    role_micro_batches,
    summarise,
)
from spade.training.model import (
    autocast_dtype,
    checkpoint_layers,
    make_accelerator,
    make_reference,
    stop_between_layers,
    wrap_lora,
)
from spade.types import TrainSample


class TorchTrainer:
    """:class:`~spade.types.Trainer` on torch (see module docstring).

    Args:
        cfg: the update's hyper-parameters.
        model: which model to train (``model.model`` resolved with :func:`resolve_model`), device and dtype.
        seed: seeds torch for the trainer's initialisation (LoRA weights).
        use_accelerate: route the update through ``accelerate`` (multi-GPU launches).
    """

    def __init__(
        self, cfg: TrainerConfig, model: ModelConfig, *, seed: int = 0, use_accelerate: bool = False
    ) -> None:
        self.cfg = cfg
        self.clip = ClipConfig(cfg.clip_low, cfg.clip_high)
        self.model_dir = resolve_model(model.model)
        self.accelerator = make_accelerator(cpu=model.device == "cpu") if use_accelerate else None
        self.device = self.accelerator.device if self.accelerator is not None else pick_device(model.device)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.autocast = autocast_dtype(cfg, model, self.device)
        base: Any = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=DTYPES[model.dtype])
        base = base.to(self.device)
        self.lora = cfg.lora_rank > 0
        with torch.random.fork_rng(devices=[]):  # seeds the LoRA init without touching the global stream
            torch.manual_seed(seed)
            self.model = wrap_lora(base, cfg) if self.lora else base
        self.reference = make_reference(base, cfg)
        # Names and full shapes before any wrapping: checkpoints are keyed by these on every world size.
        self.trainable_shapes = {n: p.shape for n, p in self.model.named_parameters() if p.requires_grad}
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay, foreach=False
        )
        if self.accelerator is not None:
            self.model, self.optimizer = self.accelerator.prepare(self.model, self.optimizer)
        # Dropout stays off (eval mode) while training too, so the trainer's log-probs are the sampler's.
        self.model.eval()
        if cfg.gradient_checkpointing:
            checkpoint_layers(self._unwrapped())
        if self.accelerator is None:
            stop_between_layers(self._unwrapped(), self._check_stop)
        self.step = 0

    @classmethod
    def from_config(cls, cfg: TrainConfig, *, use_accelerate: bool = False) -> TorchTrainer:
        """The trainer of a run: ``cfg.trainer`` on ``cfg.model``, seeded with ``cfg.seed``, with the run's torch
        threads."""
        set_threads(cfg.model.threads)
        return cls(cfg.trainer, cfg.model, seed=cfg.seed, use_accelerate=use_accelerate)

    # -- Trainer ---------------------------------------------------------------------------------------------

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One optimiser step over ``samples``; returns ``train/*``, ``loss/<role>`` and ``time/*`` metrics.

        Raises:
            spade.stopping.Interrupted: a stop was requested during the step, which is then not taken.
        """
        start = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        world, rank = self._world()
        mine = list(samples)[rank::world]
        tokens = self._global_tokens(sum(loss_tokens(s) for s in mine))
        if tokens == 0:
            return {
                "train/tokens": 0.0,
                "train/skipped": 1.0,
                "time/train_step_s": time.perf_counter() - start,
            }
        # Micro-batches never mix roles, so the loss of each role can be reported on its own.
        batches = role_micro_batches(mine, self.cfg.micro_batch_tokens)
        # the loss's denominator: the step's loss tokens, or its samples with each one's own token mean
        per_sample = self.cfg.loss_aggregation == "sample_mean"
        denominator = self._global_tokens(sum(loss_tokens(s) > 0 for s in mine)) if per_sample else tokens
        with compact_heap() if self.cfg.compact_heap else contextlib.nullcontext():
            parts, role_loss = self._accumulate(batches, scale=world / denominator)
            grad_norm = self._clip_and_step()
        self.step += 1
        metrics = summarise(parts, tokens)
        metrics["train/loss"] = sum(float(p.loss_sum) for p in parts) / denominator
        for role, loss_sum in role_loss.items():
            role_samples = [s for s in mine if s.role == role and loss_tokens(s) > 0]
            role_size = len(role_samples) if per_sample else sum(loss_tokens(s) for s in role_samples)
            metrics[f"loss/{role}"] = loss_sum / max(role_size, 1)
        metrics.update(
            {
                "train/grad_norm": grad_norm,
                "train/sequences": float(len(samples)),
                "train/micro_batches": float(len(batches)),
                "train/peak_mem_mb": self._peak_memory_mb(),
                "time/train_step_s": time.perf_counter() - start,
            }
        )
        release_free_memory()  # the activations' heap pages, before sampling takes its turn
        return metrics

    def set_lr(self, lr: float) -> float:
        """Set the optimiser's learning rate (e.g. for the warm start); returns the previous one."""
        groups = self._inner_optimizer().param_groups
        previous = float(groups[0]["lr"])
        for group in groups:
            group["lr"] = lr
        return previous

    def export_weights(self, path: Path) -> Path:
        """Write the adapter (LoRA) or the full model + tokenizer (full fine-tuning) to ``path``.

        Collective in a multi-process launch (sharded weights are gathered); only rank 0 writes.
        """
        path = Path(path)
        model = self._unwrapped()
        if self.accelerator is None:
            path.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(path)
        else:
            state = self.accelerator.get_state_dict(self.model)  # gathers FSDP / ZeRO-3 shards
            if self.accelerator.is_main_process:
                path.mkdir(parents=True, exist_ok=True)
                model.save_pretrained(path, state_dict=state)
        if not self.lora and self._is_main():
            self.tokenizer.save_pretrained(path)
        self._barrier()
        return path

    def save(self, path: Path) -> None:
        """Checkpoint: exported weights (``weights/``), trainable tensors, optimiser, RNG states, step.

        Tensors are full and keyed by parameter name whatever the world size; collective like export.
        """
        path = Path(path)
        self.export_weights(path / WEIGHTS_DIR)
        trainable, optimizer = full_state(
            self.model,
            self._inner_optimizer(),
            set(self.trainable_shapes),
            self.accelerator,
            self._deepspeed(),
        )
        if self._is_main():
            write_state(path / STATE_FILE, step=self.step, trainable=trainable, optimizer=optimizer)
        self._barrier()

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by :meth:`save` (same model and trainer configuration, any world size)."""
        state = read_state(path, self.trainable_shapes, deepspeed=self._deepspeed())
        if state["format"] == 1:
            self._load_v1(state["trainable"], state["optimizer"])
        else:
            load_full_state(self.model, self._inner_optimizer(), state["trainable"], state["optimizer"])
        set_rng_state(state["rng"])
        self.step = int(state["step"])

    # -- the update ------------------------------------------------------------------------------------------

    def logprobs(self, samples: Sequence[TrainSample]) -> list[list[float]]:
        """Per-token log-probabilities (aligned with ``tokens_T[1:]``) under the current weights."""
        out: list[list[float]] = []
        with torch.no_grad():
            for sample in samples:
                ids = torch.tensor([sample.tokens_T], device=self.device)
                with self._autocast():
                    logits = self.model(input_ids=ids).logits
                out.append(token_logprobs(logits[:, :-1], ids[:, 1:])[0].tolist())
        return out

    def _accumulate(
        self, batches: Sequence[tuple[str, Sequence[TrainSample]]], *, scale: float
    ) -> tuple[list[LossParts], dict[str, float]]:
        """Gradients of every micro-batch; the loss parts and each role's loss sum.

        Raises:
            spade.stopping.Interrupted: a stop was requested (single process only, see the module docstring);
                the gradients gathered so far are dropped, so the weights and the optimiser are untouched.
        """
        parts: list[LossParts] = []
        role_loss: dict[str, float] = {}
        try:
            for k, (role, batch) in enumerate(batches):
                self._check_stop()
                with self._no_sync(last=k == len(batches) - 1):
                    part = self._micro_step(batch, scale=scale)
                parts.append(part)
                role_loss[role] = role_loss.get(role, 0.0) + float(part.loss_sum)
        except stopping.Interrupted:
            self.optimizer.zero_grad(set_to_none=True)
            raise
        return parts, role_loss

    def _check_stop(self) -> None:
        # Ranks of a multi-process launch must make the same collectives: only a lone process stops mid-step.
        if self.accelerator is None:
            stopping.check()

    def _micro_step(self, batch: Sequence[TrainSample], scale: float) -> LossParts:
        ids, attention, mask, sample_lp = pad(batch, self.device)
        advantages = torch.tensor([s.advantage for s in batch], dtype=torch.float32, device=self.device)
        tis_on = torch.tensor(
            [1.0 if (s.staleness > 0 or self.cfg.tis_fresh) else 0.0 for s in batch], device=self.device
        )
        keep = loss_positions(mask)
        with self._autocast():  # the backward pass then runs each product in the dtype of its forward
            new = logprobs_at(self.model, ids, attention, keep)
            ref = self._reference_logprobs(ids, attention, keep) if self.cfg.kl_coef > 0.0 else None
        part = grpo_loss_parts(
            new,
            new.detach(),
            sample_lp[:, 1:],
            advantages,
            mask[:, 1:],
            clip=self.clip,
            tis_cap=self.cfg.tis_cap,
            tis_on_B=tis_on,
            ref_BT=ref,
            kl_coef=self.cfg.kl_coef,
            weights_B=self._sample_weights(batch),
        )
        loss = part.loss_sum * scale
        if self.accelerator is not None:
            self.accelerator.backward(loss)
        else:
            loss.backward()  # type: ignore[no-untyped-call]
        return dataclasses.replace(part, loss_sum=part.loss_sum.detach())

    def _sample_weights(self, batch: Sequence[TrainSample]) -> torch.Tensor | None:
        """Each sample's weight in the loss sum: 1 / its loss tokens under ``sample_mean`` (None: 1 each)."""
        if self.cfg.loss_aggregation != "sample_mean":
            return None
        return torch.tensor([1.0 / max(loss_tokens(s), 1) for s in batch], device=self.device)

    def _reference_logprobs(
        self, ids: torch.Tensor, attention: torch.Tensor, keep: torch.Tensor
    ) -> torch.Tensor:
        with torch.no_grad():
            if self.lora:
                with self._unwrapped().disable_adapter():
                    return logprobs_at(self.model, ids, attention, keep)
            return logprobs_at(self.reference, ids, attention, keep)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def _clip_and_step(self) -> float:
        params = [p for p in self.model.parameters() if p.requires_grad]
        if self.accelerator is not None:
            norm = self.accelerator.clip_grad_norm_(params, self.cfg.max_grad_norm)
        else:
            norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    # -- helpers ---------------------------------------------------------------------------------------------

    def _unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model) if self.accelerator is not None else self.model

    def _trainable(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        return ((n, p) for n, p in self._unwrapped().named_parameters() if p.requires_grad)

    def _is_main(self) -> bool:
        return self.accelerator is None or bool(self.accelerator.is_main_process)

    def _barrier(self) -> None:
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()

    def _deepspeed(self) -> bool:
        return self.accelerator is not None and self.accelerator.distributed_type == "DEEPSPEED"

    def _inner_optimizer(self) -> torch.optim.Optimizer:
        inner: torch.optim.Optimizer = getattr(
            self.optimizer, "optimizer", self.optimizer
        )  # AcceleratedOptimizer
        return inner

    def _load_v1(self, trainable: dict[str, torch.Tensor], optimizer: dict[str, Any]) -> None:
        params = dict(self._trainable())
        with torch.no_grad():
            for name, tensor in trainable.items():
                params[name].copy_(tensor)
        self.optimizer.load_state_dict(optimizer)

    def _world(self) -> tuple[int, int]:
        if self.accelerator is None:
            return 1, 0
        return int(self.accelerator.num_processes), int(self.accelerator.process_index)

    def _global_tokens(self, local: int) -> int:
        if self.accelerator is None or self.accelerator.num_processes == 1:
            return local
        total = self.accelerator.reduce(torch.tensor(float(local), device=self.device), reduction="sum")
        return int(total.item())

    def _no_sync(self, *, last: bool) -> contextlib.AbstractContextManager[Any]:
        if self.accelerator is None or last:
            return contextlib.nullcontext()
        return self.accelerator.no_sync(self.model)  # type: ignore[no-any-return]

    def _peak_memory_mb(self) -> float:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) / 2**20
        return (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        )  # Linux: KiB; the process peak so far
