"""The modes by name: :func:`register` one, :func:`make` the one a config asks for (``cfg.mode``).

Adding a baseline is one module: a :class:`spade.modes.Mode` subclass and a ``register`` call (the built-in
modes register themselves when :mod:`spade.modes` is imported).
"""

from __future__ import annotations

from collections.abc import Callable

from spade.config import ConfigError, TrainConfig
from spade.modes.base import Mode

_MODES: dict[str, Callable[[], Mode]] = {}


def register(name: str, factory: Callable[[], Mode]) -> None:
    """Make ``factory`` the mode ``--mode name`` runs (a later registration of ``name`` replaces it)."""
    _MODES[name] = factory


def names() -> list[str]:
    """The registered modes."""
    return sorted(_MODES)


def make(cfg: TrainConfig) -> Mode:
    """The mode ``cfg`` trains in, once it has checked ``cfg`` (:meth:`Mode.check_config`).

    Raises:
        ConfigError: no mode of that name is registered, or a setting the mode cannot train with.
    """
    if cfg.mode not in _MODES:
        raise ConfigError(f"unknown mode {cfg.mode!r}; choose one of: {', '.join(names())}")
    mode = _MODES[cfg.mode]()
    mode.check_config(cfg)
    return mode


def label(cfg: TrainConfig) -> str:
    """The name ``cfg``'s mode is shown by (runs listings, reports)."""
    return cfg.mode


def preflight(cfg: TrainConfig) -> None:
    """Run the checks of ``cfg``'s mode (:meth:`Mode.preflight`) before anything is written."""
    make(cfg).preflight(cfg)
