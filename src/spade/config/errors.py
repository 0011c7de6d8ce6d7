"""The error of an invalid configuration value, and the one-line check that raises it."""

from __future__ import annotations

from spade.errors import SpadeError


class ConfigError(SpadeError, ValueError):
    """An invalid configuration value; the message names the field and the fix."""


def require(ok: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``ok``."""
    if not ok:
        raise ConfigError(message)
