"""Build an environment factory from source text (native or official format).

This executes the source: call it only inside the sandbox, or on code you trust (the seed library, your
own files). Imported inside the sandbox: standard library only (numpy when a source uses it).
"""

from __future__ import annotations

import collections
import copy
import functools
import heapq
import inspect
import itertools
import json
import math
import operator
import random
import re
import statistics
import string
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from spade.env import TextEnv, ToolEnv
from spade.envs import official
from spade.envs.official import OfficialEnv, ToolUseBaseEnv
from spade.errors import SpadeError

EnvFactory = Callable[[], TextEnv]
_NUMPY_NAME = re.compile(r"\b(?:np|numpy)\b")


class EnvLoadError(SpadeError):
    """The source does not define a loadable environment; the message says what to change."""


# Names the authors' loader pre-injects, so official files that forgot an import still load unchanged.
_INJECTED: dict[str, Any] = {
    "collections": collections, "copy": copy, "functools": functools, "heapq": heapq,
    "itertools": itertools, "json": json, "math": math, "operator": operator, "random": random,
    "re": re, "statistics": statistics, "string": string,
    "deque": collections.deque, "defaultdict": collections.defaultdict, "Counter": collections.Counter,
    "combinations": itertools.combinations, "permutations": itertools.permutations,
    "product": itertools.product, "reduce": functools.reduce, "lru_cache": functools.lru_cache,
    "Any": typing.Any, "Dict": typing.Dict, "List": typing.List, "Optional": typing.Optional,  # noqa: UP006
    "Tuple": typing.Tuple, "Set": typing.Set, "Union": typing.Union,  # noqa: UP006
    "ToolUseBaseEnv": ToolUseBaseEnv, "TextEnv": TextEnv, "ToolEnv": ToolEnv,
}  # fmt: skip


def exec_module(source: str, filename: str = "<env>") -> types.ModuleType:
    """Execute ``source`` as a fresh module (never registered in ``sys.modules``)."""
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        raise EnvLoadError(f"syntax error at line {exc.lineno}: {exc.msg}") from exc
    module = types.ModuleType("spade_env_source")
    module.__file__ = filename
    module.__dict__.update(_INJECTED)
    if _NUMPY_NAME.search(source):  # the authors also inject np/numpy; import it only for files that use it
        import numpy  # noqa: PLC0415 - heavy and rarely needed; the sandbox zygote preloads it

        module.__dict__.update(np=numpy, numpy=numpy)
    sys.modules.setdefault("tool_use_base_env", official)
    exec(code, module.__dict__)  # this is the loader: callers run it in the sandbox
    return module


def find_env_class(module: types.ModuleType) -> type:
    """The environment class: ``ENV`` when set (native), else the official ``*Env`` class defined here."""
    declared = module.__dict__.get("ENV")
    if declared is not None:
        if not (inspect.isclass(declared) and issubclass(declared, TextEnv)):
            raise EnvLoadError("ENV must be a subclass of spade.env.TextEnv (set `ENV = YourEnvClass`).")
        return declared
    candidates = [
        obj
        for name, obj in module.__dict__.items()
        if inspect.isclass(obj)
        and name.endswith("Env")
        and obj.__module__ == module.__name__
        and callable(getattr(obj, "reset", None))
        and callable(getattr(obj, "step", None))
    ]
    # Helper classes that the environment derives from are not the environment itself.
    leaves = [c for c in candidates if not any(o is not c and issubclass(o, c) for o in candidates)]
    if len(leaves) == 1:
        return leaves[0]
    if not leaves:
        raise EnvLoadError(
            "no environment class found: define a TextEnv subclass and set `ENV = ClassName` "
            "(or, in the official format, one class whose name ends in 'Env' with reset() and step())."
        )
    names = ", ".join(c.__name__ for c in leaves)
    raise EnvLoadError(
        f"several candidate environment classes ({names}): set `ENV = ClassName` to choose one."
    )


def load_env_factory(source: str, filename: str = "<env>", max_turns: int | None = None) -> EnvFactory:
    """Execute ``source`` and return a zero-argument factory of environment instances."""
    cls = find_env_class(exec_module(source, filename))
    if issubclass(cls, TextEnv):
        native: type[TextEnv] = cls
        return lambda: native(max_turns=max_turns)

    official_cls: Callable[..., Any] = cls  # an arbitrary class in the authors' format

    def make_official() -> TextEnv:
        try:
            inner = official_cls(max_turns=max_turns) if max_turns is not None else official_cls()
        except TypeError:
            inner = official_cls()
        return OfficialEnv(inner, max_turns=max_turns)

    return make_official
