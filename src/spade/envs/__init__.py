"""Environment registry: the hand-written seed library and anything registered at run time.

``make(name, **kw)`` builds an instance, ``names()`` lists them, ``spec(name)`` describes one (skill,
setting, description, strategy and the source text that the designer sees as a worked example). Every file in
``spade/envs/library/`` that sets ``ENV`` is registered under its module name.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.config.skills import setting_of
from spade.config.types import Setting
from spade.env import TextEnv, ToolEnv


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """One registered environment."""

    name: str
    skill: str
    setting: Setting
    description: str
    factory: Callable[..., TextEnv]
    source_path: Path | None = None
    strategy: str = ""
    """How to play it, in its author's words: the docstring of the class's own ``solution()`` (empty when it
    has none). The warm start answers hint requests with it (``sft.hints``)."""

    def source(self) -> str:
        """The environment's source code (a self-contained file)."""
        if self.source_path is None:
            raise ValueError(f"environment {self.name!r} was registered without a source file")
        return self.source_path.read_text()


_REGISTRY: dict[str, EnvSpec] = {}


def register(name: str, cls: type[TextEnv], source_path: Path | None = None) -> EnvSpec:
    """Register an environment class under ``name``; its ``skill`` must be a known skill slug."""
    if name in _REGISTRY:
        raise ValueError(f"environment {name!r} is already registered")
    doc = inspect.getdoc(cls) or ""
    spec = EnvSpec(
        name=name,
        skill=cls.skill,
        setting=setting_of(cls.skill),
        description=doc.splitlines()[0] if doc else "",
        factory=cls,
        source_path=source_path,
        strategy=_strategy(cls),
    )
    _REGISTRY[name] = spec
    return spec


def _strategy(cls: type[TextEnv]) -> str:
    """The first paragraph of the docstring of ``cls``'s own ``solution()``, on one line (not inherited)."""
    own = cls.__dict__.get("solution")
    doc = inspect.cleandoc(own.__doc__) if own is not None and own.__doc__ else ""
    return " ".join(doc.split("\n\n")[0].split())


def _load_library() -> None:
    from spade.envs import library  # noqa: PLC0415 - imported on first use to keep import light

    for info in sorted(pkgutil.iter_modules(library.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{library.__name__}.{info.name}")
        cls = getattr(module, "ENV", None)
        if cls is not None and info.name not in _REGISTRY:
            register(info.name, cls, Path(inspect.getfile(module)))


def _registry() -> dict[str, EnvSpec]:
    if not _REGISTRY:
        _load_library()
    return _REGISTRY


def names(setting: Setting | None = None) -> list[str]:
    """Registered environment names, optionally of one setting."""
    return [n for n, s in _registry().items() if setting is None or s.setting == setting]


def spec(name: str) -> EnvSpec:
    """The spec of a registered environment; unknown names raise KeyError listing the known ones."""
    try:
        return _registry()[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: {', '.join(names())}") from None


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build a registered environment (keyword arguments go to its constructor, e.g. ``max_turns``)."""
    return spec(name).factory(**kwargs)


def env_files(path: Path) -> list[Path]:
    """The environment files ``path`` names: itself when it is not a folder; in a folder, the official pool
    layout (``games/*.py`` then ``tools/*.py``) or else its own ``*.py`` files, those starting with ``_``
    aside. Raises ValueError for a folder that holds none."""
    if not path.is_dir():
        return [path]
    files = sorted((path / "games").glob("*.py")) + sorted((path / "tools").glob("*.py"))
    files = files or sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ValueError(f"no environment files (*.py, games/*.py or tools/*.py) in folder {path}")
    return files


__all__ = ["EnvSpec", "TextEnv", "ToolEnv", "env_files", "make", "names", "register", "spec"]
