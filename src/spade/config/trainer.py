"""The GRPO update and the supervised warm start before it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require


@dataclass(frozen=True, slots=True)
class TrainerConfig:
    """The GRPO update."""

    lr: float = 1e-6
    """Learning rate (AdamW)."""
    clip_low: float = 0.2
    """PPO clip below 1 of the importance ratio."""
    clip_high: float = 0.28
    """PPO clip above 1 of the importance ratio (asymmetric, as in DAPO)."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the initial policy (0: none, the released recipe)."""
    tis_cap: float = 2.0
    """Truncated importance-sampling cap for stale samples."""
    lora_rank: int = 0
    """0: full fine-tuning; > 0: LoRA of that rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator (the adapter's update is scaled by alpha / rank)."""
    lora_targets: tuple[str, ...] = ("all-linear",)
    """Module names LoRA adapts; ("all-linear",) adapts every linear layer except the output head."""
    micro_batch_tokens: int = 8192
    """Padded tokens per forward/backward micro-batch; one step accumulates all micro-batches."""
    gradient_checkpointing: bool = False
    """Keep only each decoder layer's input for the backward pass and recompute the rest: activation memory
    of a long episode drops from ≈2 GB to ≈0.1 GB (embedded model, 900 tokens) for ≈1 extra forward pass."""
    compact_heap: bool = False
    """During a step, give every allocation of 1 MiB or more its own memory mapping (Linux/glibc): the
    step's peak stays near its live tensors instead of ≈0.9 GB above them (heap fragmentation), for ≈1.5×
    the step time on CPU. For machines where memory, not time, is short."""
    loss_aggregation: Literal["token_mean", "sample_mean"] = "token_mean"
    """How the step's loss averages its tokens: 'token_mean', over every loss token of the step (a long
    sample weighs more); 'sample_mean', each sample's own token mean, averaged over the step's samples
    (Slime's default, as released)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    tis_fresh: bool = False
    """Also importance-correct fresh samples (engine/trainer mismatch), not only stale ones."""
    autocast: Literal["off", "auto", "bfloat16"] = "off"
    """Compute the forward and backward passes' matrix products in bfloat16 (torch.autocast) while the weights,
    gradients, optimiser and log-softmax stay in ``model.dtype``: 'auto' is bfloat16 on a CPU with bf16
    instructions (AVX512-BF16 or AMX) and off elsewhere. Used only when ``model.dtype`` is float32."""

    def validate(self) -> None:
        """Checks of the optimiser settings."""
        require(
            0 < self.clip_low < 1 and 0 < self.clip_high < 1, "trainer.clip_low/clip_high must be in (0, 1)"
        )
        require(self.lr > 0, "trainer.lr must be > 0")
        require(
            self.weight_decay >= 0.0 and self.tis_cap > 0.0,
            "trainer.weight_decay must be >= 0 and tis_cap > 0",
        )


@dataclass(frozen=True, slots=True)
class SFTConfig:
    """Supervised warm start of the agent before RL, the same for every mode (see spade.run.warm_start).

    The agent is trained to imitate the scripted solutions (``solution()``) of seed games at the level it
    will play (``play.difficulty``), on seeds it is never scored on; only its own replies carry the loss.
    """

    episodes: int = 0
    """Scripted episodes to imitate (0: no warm start)."""
    envs: tuple[str, ...] = ()
    """Seed games to take them from (empty: the seeds of ``designer.skills``)."""
    epochs: int = 3
    """Passes over the episodes."""
    batch: int = 16
    """Episodes per optimiser step."""
    lr: float = 0.0
    """Learning rate of the warm start (0: ``trainer.lr``); RL then continues at ``trainer.lr``."""
    designs: int = 0
    """Designer line edits to imitate besides the episodes (needs ``designer.edit_format='lines'``): the
    designer's own prompt for a seed game of ``designer.skills``, answered with a mechanical one-number edit
    of its shown lines that changes the game at ``play.difficulty`` and that the checker accepts."""
    hinted_episodes: int = 0
    """Of the scripted episodes, how many (at most all) show the game's strategy note (the docstring of its
    ``solution()``) as the hint in the first observation, as a hinted play does: the agent then meets a hint
    with the same good play instead of first seeing one in RL, where a small model follows it literally."""
    hints: int = 0
    """Hint requests to imitate besides: the hint prompt for a seed game of ``designer.skills`` (code only, as
    the loop asks it), answered after ``designer.hint_prefix`` with the game's strategy note, the docstring of
    its ``solution()``. A small model otherwise answers a hint request with code, and no hinted play is made."""

    def validate(self) -> None:
        """Checks of the warm start's counts; its game names are checked by :func:`spade.run.preflight.check_names`."""
        require(self.episodes >= 0, f"sft.episodes must be >= 0 (got {self.episodes})")
        require(self.designs >= 0, f"sft.designs must be >= 0 (got {self.designs})")
        require(self.hinted_episodes >= 0, f"sft.hinted_episodes must be >= 0 (got {self.hinted_episodes})")
        require(self.hints >= 0, f"sft.hints must be >= 0 (got {self.hints})")
        require(self.epochs >= 1 and self.batch >= 1, "sft.epochs and sft.batch must be >= 1")
        require(self.lr >= 0.0, f"sft.lr must be >= 0 (0: trainer.lr; got {self.lr})")
