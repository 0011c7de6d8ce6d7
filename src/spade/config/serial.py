"""The round trip of a resolved config: ``to_json`` / ``from_json`` (every run directory holds one), ``to_toml``
for people to read, and ``migrate`` for config.json files of older versions."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from spade.config import toml
from spade.config.errors import require
from spade.config.train import TrainConfig


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-safe dict of a config dataclass (paths as strings, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def to_json(cfg: TrainConfig) -> str:
    """The resolved config as indented JSON."""
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True)


def to_toml(cfg: TrainConfig) -> str:
    """The resolved config as TOML, the sections as tables in field order: ``tomllib`` reads it back as
    :func:`to_dict`'s values, less the options that are None (written as comments), so ``from_dict`` rebuilds
    ``cfg`` wherever those options' defaults are None too."""
    return toml.dumps(to_dict(cfg))


T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a config dataclass from ``to_dict`` output; unknown keys are an error."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    require(not unknown, f"unknown {cls.__name__} fields {sorted(unknown)}; valid: {sorted(names)}")
    kwargs = {k: _coerce(hints[k], v) for k, v in data.items()}
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_dict(hint, value)  # type: ignore[arg-type]
    if hint is Path:
        return Path(value)
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, types.UnionType) and value is not None:
        non_none = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(non_none[0], value) if len(non_none) == 1 else value
    return value


_FLAT_MODEL_FIELDS: dict[str, tuple[str, str]] = {
    "base_url": ("openai", "base_urls"),
    "served_model": ("openai", "served_model"),
    "api_key_env": ("openai", "api_key_env"),
    "request_timeout_s": ("openai", "request_timeout_s"),
    "request_retries": ("openai", "request_retries"),
    "outage_s": ("openai", "outage_s"),
    "server_token_ids": ("openai", "token_ids"),
    "max_lora_rank": ("vllm", "max_lora_rank"),
    "kv_cache_gib": ("vllm", "kv_cache_gib"),
    "scripted_behaviour": ("scripted", "behaviour"),
}
"""Fields of the flat ``ModelConfig`` (before per-backend sections) and where they live now."""


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A ``to_dict`` of an older version brought to the current layout (a new dict; ``data`` is unchanged).

    Run directories written before the per-backend sections hold ``model.base_url``,
    ``model.kv_cache_gib``...; they move into ``model.openai`` / ``model.vllm`` / ``model.scripted``, so
    ``spade train --resume`` keeps working on old runs.
    """
    model = data.get("model")
    if not isinstance(model, dict) or not set(model) & set(_FLAT_MODEL_FIELDS):
        return data
    model = dict(model)
    for old, (section, name) in _FLAT_MODEL_FIELDS.items():
        if old not in model:
            continue
        value = model.pop(old)
        if old == "base_url":
            value = [value] if value else []
        model[section] = {**model.get(section, {}), name: value}
    return {**data, "model": model}


def from_json(text: str) -> TrainConfig:
    """Parse JSON written by :func:`to_json` (of this or an older version: see :func:`migrate`)."""
    return from_dict(TrainConfig, migrate(json.loads(text)))
