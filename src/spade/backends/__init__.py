"""Policy implementations (hf, vllm, openai-compatible, scripted) and the torch Trainer.

Heavy engines are imported lazily inside :func:`make_policy`, so importing ``spade.backends`` stays cheap and
an engine that is not installed only matters when it is selected.
"""

from __future__ import annotations

from spade.config import ModelConfig, TrainConfig
from spade.types import Policy, Trainer


def make_policy(cfg: ModelConfig, *, seed: int = 0) -> Policy:
    """The Policy selected by ``cfg.backend``.

    Args:
        cfg: model and engine configuration.
        seed: seed of the policy's own sampling stream (used for calls whose params carry no seed).

    Raises:
        ValueError: an unknown backend name.
    """
    set_threads(cfg.threads)
    if cfg.backend == "scripted":
        from spade.backends.scripted import ScriptedPolicy  # noqa: PLC0415

        return ScriptedPolicy(behaviour=cfg.scripted_behaviour)  # type: ignore[arg-type]
    if cfg.backend == "hf":
        from spade.backends.hf import HFPolicy  # noqa: PLC0415 -- lazy: torch/transformers only when selected

        return HFPolicy.from_config(cfg, seed=seed)
    if cfg.backend == "vllm":
        from spade.backends.vllm_engine import VLLMPolicy  # noqa: PLC0415 -- lazy: vllm only when selected

        return VLLMPolicy.from_config(cfg, seed=seed)
    if cfg.backend == "openai":
        from spade.backends.openai_server import OpenAIPolicy  # noqa: PLC0415 -- lazy: like the others

        return OpenAIPolicy.from_config(cfg, seed=seed)
    raise ValueError(
        f"unknown or unavailable model.backend {cfg.backend!r}; choose one of: hf, vllm, openai, scripted"
    )


def set_threads(threads: int) -> None:
    """Give torch ``threads`` CPU threads in this process (0: leave torch's default); torch is not imported for 0."""
    if threads > 0:
        import torch  # noqa: PLC0415

        torch.set_num_threads(threads)


def make_trainer(cfg: TrainConfig) -> Trainer:
    """The Trainer matching the policy backend: the scripted double for ``scripted``, else the torch trainer."""
    if cfg.model.backend == "scripted":
        from spade.backends.scripted import ScriptedTrainer  # noqa: PLC0415
        from spade.distributed import check_backend, launched  # noqa: PLC0415

        if launched():
            check_backend(cfg)
        return ScriptedTrainer()
    from spade.backends.trainer import TorchTrainer  # noqa: PLC0415 -- lazy: torch only when selected
    from spade.distributed import LeaderTrainer, check_backend, launched  # noqa: PLC0415

    set_threads(cfg.model.threads)
    if launched():  # rank 0 of `accelerate launch`: the other ranks follow this trainer's calls
        check_backend(cfg)
        return LeaderTrainer(TorchTrainer.from_config(cfg, use_accelerate=True))
    return TorchTrainer.from_config(cfg)
