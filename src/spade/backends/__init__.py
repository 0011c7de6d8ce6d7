"""Policy implementations (hf, vllm, openai-compatible, scripted) and the torch Trainer.

Heavy engines are imported lazily inside :func:`make_policy`, so importing ``spade.backends`` stays cheap and
an engine that is not installed only matters when it is selected.
"""

from __future__ import annotations

from spade.config import ModelConfig
from spade.types import Policy


def make_policy(cfg: ModelConfig, *, seed: int = 0) -> Policy:
    """The Policy selected by ``cfg.backend``.

    Args:
        cfg: model and engine configuration.
        seed: seed of the policy's own sampling stream (used for calls whose params carry no seed).

    Raises:
        ValueError: an unknown backend name.
    """
    if cfg.backend == "hf":
        from spade.backends.hf import HFPolicy  # noqa: PLC0415 -- lazy: torch/transformers only when selected

        return HFPolicy.from_config(cfg, seed=seed)
    raise ValueError(f"unknown or unavailable model.backend {cfg.backend!r}; choose one of: hf, vllm, openai, scripted")
