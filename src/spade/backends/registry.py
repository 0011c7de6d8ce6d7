"""The backend registry: names and lazy import paths only (no engine is imported here).

Kept apart from :mod:`spade.backends` so that :mod:`spade.config` can check a backend name without a
circular import.
"""

from __future__ import annotations

BACKENDS: dict[str, str] = {
    "hf": "spade.backends.hf:HFPolicy",
    "vllm": "spade.backends.vllm_engine:VLLMPolicy",
    "openai": "spade.backends.openai_server:OpenAIPolicy",
    "scripted": "spade.scripted.policy:ScriptedPolicy",
}
"""Backend name -> ``module:Class`` of its Policy, whose ``from_config(cfg, *, seed)`` builds it from a
:class:`~spade.config.ModelConfig`. The module is imported only when the backend is selected; a new backend
is one entry here (its options: a section of ``ModelConfig``)."""

TORCH_TRAINER = "spade.training.trainer:TorchTrainer"
TRAINERS: dict[str, str] = {
    "hf": TORCH_TRAINER,
    "vllm": TORCH_TRAINER,
    "openai": TORCH_TRAINER,
    "scripted": "spade.scripted.trainer:ScriptedTrainer",
}
"""Backend name -> ``module:Class`` of the Trainer that updates its policy, whose ``from_config(cfg, *,
use_accelerate)`` builds it from a :class:`~spade.config.TrainConfig`; imported when first built. A backend is
its two rows: the policy that samples and the trainer that updates it."""
