"""Policy implementations (hf, vllm, openai-compatible, scripted): the sampling side of the method.

Heavy engines are imported lazily inside :func:`make_policy`, so importing ``spade.backends`` stays cheap and
an engine that is not installed only matters when it is selected.
"""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from spade.backends.registry import BACKENDS
from spade.backends.template import TurnTemplate
from spade.backends.threads import ThreadChoice, set_threads
from spade.config import ConfigError, ModelConfig
from spade.types import Policy

__all__ = [
    "BACKENDS",
    "ReportsMetrics",
    "ThreadChoice",
    "make_policy",
    "policy_metrics",
    "prefix_cache_hit_rate",
    "set_threads",
]


TORCH_ENGINES = ("hf", "vllm")
"""Backends that compute with torch in this process: they get torch's thread count (:mod:`~spade.backends.threads`)."""


def make_policy(cfg: ModelConfig, *, seed: int = 0) -> Policy:
    """The Policy selected by ``cfg.backend`` (its options: the backend's section of ``cfg``).

    Args:
        cfg: model and engine configuration.
        seed: seed of the policy's own sampling stream (used for calls whose params carry no seed).

    Raises:
        ConfigError: an unknown backend name (the message lists the known ones).
        ModuleNotFoundError: the backend's engine is not installed.
    """
    path = BACKENDS.get(cfg.backend)
    if path is None:
        raise ConfigError(f"unknown model.backend {cfg.backend!r}; choose one of: {', '.join(BACKENDS)}")
    if cfg.backend in TORCH_ENGINES or cfg.threads > 0:
        set_threads(cfg.threads)
    module, _, name = path.partition(":")
    policy_cls = getattr(importlib.import_module(module), name)
    policy: Policy = policy_cls.from_config(cfg, seed=seed)
    if isinstance(policy.template, TurnTemplate):
        policy.template.thinking = cfg.thinking
    return policy


@runtime_checkable
class ReportsMetrics(Protocol):
    """A policy that keeps counters of its own (the openai backend's ``fleet/...``)."""

    def metrics(self) -> dict[str, float]:
        """Current counter values, slash-namespaced."""
        ...


def policy_metrics(policy: Policy) -> dict[str, float]:
    """The policy's own metrics, or none when it keeps no counters."""
    return policy.metrics() if isinstance(policy, ReportsMetrics) else {}


def prefix_cache_hit_rate(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """``speed/prefix_cache_hit_rate``: of the prompt tokens the engine took between two readings of
    :func:`policy_metrics`, the share its prefix cache supplied; none where the engine does not count them
    (only the vllm backend does) or took no prompt."""
    sent = after.get("engine/prompt_tokens", 0.0) - before.get("engine/prompt_tokens", 0.0)
    if sent <= 0:
        return {}
    cached = after.get("engine/prompt_tokens_cached", 0.0) - before.get("engine/prompt_tokens_cached", 0.0)
    return {"speed/prefix_cache_hit_rate": cached / sent}


@runtime_checkable
class ReleasesMemory(Protocol):
    """A policy that can give back memory it keeps between calls (an in-process engine's KV cache)."""

    def release_memory(self) -> None:
        """Return what the next ``sample`` can rebuild; the loop calls it once a step, before the update."""
        ...


def release_memory(policy: Policy) -> None:
    """Let the policy give back what it keeps between calls, if it keeps anything."""
    if isinstance(policy, ReleasesMemory):
        policy.release_memory()
