"""``spade train --help``: the common options, each with its description and the value the preset (or config
file) gives it; the last line says that ``--help-all`` lists every option (tyro's listing of all of them).

The descriptions are the options' attribute docstrings, read from the config classes' source, so they are
the same text ``--help-all`` shows.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import shutil
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from spade.config import TrainConfig
from spade.config.options import option_values

COMMON: tuple[str, ...] = (
    "preset",
    "config",
    "recipe",
    "steps",
    "seed",
    "name",
    "runs_dir",
    "resume",
    "overwrite",
    "mode",
    "model.backend",
    "model.model",
    "model.threads",
    "eval.every",
    "eval.suites",
    "eval.limit",
    "print_config",
    "verbose",
)
"""The options ``--help`` shows, in this order: the command's own (of ``TrainArgs``, by field name; --config
is its ``config_file``) and config options by dotted name."""

HELP_ALL = "--help-all"

_METAVARS = {"preset": "NAME", "config": "FILE", "recipe": "NAME", "resume": "RUN_DIR"}


def short_help(args_cls: type, cfg: TrainConfig, description: str, own: dict[str, Any]) -> str:
    """The text of ``spade train --help``.

    Args:
        args_cls: the command line's dataclass (``TrainArgs``): the command's own options.
        cfg: the config whose values are shown as the defaults.
        description: the command's description (what ``--help-all`` shows too).
        own: the defaults of the command's own options, by field name.
    """
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns))  # $COLUMNS, else the terminal's
    lines = ["usage: spade train [--preset NAME | --config FILE] [--resume RUN_DIR] [OPTION ...]", ""]
    lines += [*textwrap.wrap(description, width, break_on_hyphens=False), "", "common options:"]
    lines += _entry("-h, --help", "Show these common options and exit.", width)
    for name in COMMON:
        field = "config_file" if name == "config" else name
        if field in own:
            hint, doc, value = _field_of(args_cls, field), _doc(args_cls, field), own[field]
        else:
            hint, doc, value = _config_field(cfg, name)
        lines += _entry(_invocation(name, hint), f"{doc} (default: {_shown(value)})", width)
    more = len(option_values(cfg)) - sum(("config_file" if n == "config" else n) not in own for n in COMMON)
    sections = [f.name for f in dataclasses.fields(cfg) if dataclasses.is_dataclass(getattr(cfg, f.name))]
    lines += [
        "",
        *textwrap.wrap(
            f"{more} more options override the other fields of the config, in the sections "
            f"{', '.join(sections)}.",
            width,
            break_on_hyphens=False,
        ),
        f"`spade train {HELP_ALL}` lists every option with its description and default.",
    ]
    return "\n".join(lines)


def _entry(invocation: str, text: str, width: int) -> list[str]:
    body = textwrap.wrap(" ".join(text.split()), width - 6, break_on_hyphens=False)
    return [f"  {invocation}", *(f"      {line}" for line in body)]


def _config_field(cfg: TrainConfig, dotted: str) -> tuple[Any, str, Any]:
    """The type hint, the description and the value of a config option by dotted name."""
    *path, name = dotted.split(".")
    section: Any = cfg
    for part in path:
        section = getattr(section, part)
    return _field_of(type(section), name), _doc(type(section), name), getattr(section, name)


def _field_of(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls, include_extras=False)[name]


def _doc(cls: type, name: str) -> str:
    """The attribute docstring of field ``name``: the string right after its annotation, in ``cls`` or the
    nearest base class that declares it."""
    for klass in cls.__mro__:
        if name not in getattr(klass, "__annotations__", {}):
            continue
        try:
            body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        except (OSError, TypeError):  # no source shipped: the option is listed without its description
            return ""
        assert isinstance(body, ast.ClassDef)
        for node, after in zip(body.body, body.body[1:], strict=False):
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(target, ast.Name) and target.id == name and isinstance(after, ast.Expr):
                value = after.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return inspect.cleandoc(value.value)
    return ""


def _invocation(name: str, hint: Any) -> str:
    flag = "--" + name.replace("_", "-")
    if hint is bool:
        *head, last = flag[2:].split(".")
        return f"{flag}, --{'.'.join([*head, f'no-{last}'])}"
    return f"{flag} {_METAVARS.get(name) or _metavar(hint)}"


def _metavar(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return "|".join("None" if a is type(None) else _metavar(a) for a in args)
    if origin is typing.Literal:
        return "{" + ",".join(map(str, args)) + "}"
    if origin is tuple:
        return f"[{_metavar(args[0])} ...]"
    if hint is Path:
        return "PATH"
    return getattr(hint, "__name__", str(hint)).upper()


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return " ".join(map(str, value)) or "(none)"
    return repr(value) if value == "" else str(value)
