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
    """Rebuild a config dataclass from ``to_dict`` output (or a preset's or a hand-written subset of it).

    Raises:
        ConfigError: an unknown key, or a value of the wrong type; the message names the key by its dotted
            name and the value (``model.threads = 'two': expected an integer``).
    """
    return _build(cls, data, "")


def _build(cls: type[T], data: Any, prefix: str) -> T:
    where = f"[{prefix.rstrip('.')}]" if prefix else "the top level"
    require(isinstance(data, dict), f"{where} is {data!r}: expected a table of {cls.__name__} options")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(f"{prefix}{k}" for k in set(data) - names)
    require(not unknown, f"unknown options {unknown}; {cls.__name__} has {sorted(names)}")
    kwargs = {k: _coerce(hints[k], v, f"{prefix}{k}") for k, v in data.items()}
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, key: str) -> Any:
    """``value`` as the type ``hint`` asks for (lists become tuples, strings paths), checked."""
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, f"{key}.")  # type: ignore[arg-type]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        return _coerce(options[0], value, key) if len(options) == 1 else value
    if origin is typing.Literal:
        _expect(value in args, key, value, f"one of {', '.join(map(repr, args))}")
        return value
    if origin is tuple:
        _expect(isinstance(value, list | tuple), key, value, "an array")
        items = [args[0]] * len(value) if args[-1:] == (...,) else list(args)
        _expect(len(items) == len(value), key, value, f"an array of {len(items)} values")
        return tuple(_coerce(h, v, f"{key}[{i}]") for i, (h, v) in enumerate(zip(items, value, strict=True)))
    if origin is dict:
        _expect(isinstance(value, dict), key, value, "a table")
        return value
    if hint is Path:
        _expect(isinstance(value, str | Path), key, value, "a path (a string)")
        return Path(value)
    if hint is bool:
        _expect(isinstance(value, bool), key, value, "true or false")
    elif hint in _LEAVES:
        kinds, what = _LEAVES[hint]
        _expect(isinstance(value, kinds) and not isinstance(value, bool), key, value, what)
    return value


_LEAVES: dict[Any, tuple[type | tuple[type, ...], str]] = {
    int: (int, "an integer"),
    float: ((int, float), "a number"),
    str: (str, "a string"),
}
"""Leaf types other than bool: what a value must be an instance of (a bool never is one), and its name."""


def _expect(ok: bool, key: str, value: Any, what: str) -> None:
    require(ok, f"{key} = {value!r}: expected {what}")


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
    data = json.loads(text)
    return from_dict(TrainConfig, migrate(data) if isinstance(data, dict) else data)
