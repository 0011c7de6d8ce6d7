"""The backend registry: names and lazy import paths only (no engine is imported here).

Kept apart from :mod:`spade.backends` so that :mod:`spade.config` can check a backend name without a
circular import.
"""

from __future__ import annotations

BACKENDS: dict[str, str] = {
    "hf": "spade.backends.hf:HFPolicy",
    "vllm": "spade.backends.vllm_engine:VLLMPolicy",
    "openai": "spade.backends.openai_server:OpenAIPolicy",
    "scripted": "spade.backends.scripted:ScriptedPolicy",
}
"""Backend name -> ``module:Class`` of its Policy, whose ``from_config(cfg, *, seed)`` builds it from a
:class:`~spade.config.ModelConfig`. The module is imported only when the backend is selected; a new backend
is one entry here (its options: a section of ``ModelConfig``)."""
