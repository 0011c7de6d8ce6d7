"""A TOML writer for plain data: tables of strings, numbers, booleans, arrays of these, and nested tables.

Enough for a resolved config (:func:`spade.config.to_toml`) without a dependency; what it writes reads back
with :mod:`tomllib` as the same values. ``None`` has no TOML form: such a key is written as a comment
(``# key: unset``), so :mod:`tomllib` reads the table back without it, and :func:`loads` with it, as None.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_UNSET = re.compile(r"# ([A-Za-z0-9_-]+): unset")
_HEADER = re.compile(r"\[([A-Za-z0-9_.-]+)\]")
_ARRAY_LINE = 80
"""Longest array written on one line, in characters."""
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dumps(table: Mapping[str, Any]) -> str:
    """``table`` as a TOML document: its plain values first, then each nested mapping as a ``[table]``.

    Raises:
        TypeError: a value with no TOML form (an object, ``None`` inside an array, a mapping inside an array).
    """
    return "\n".join(_table(table, ())).lstrip("\n") + "\n"


def loads(text: str) -> dict[str, Any]:
    """``text`` read by :mod:`tomllib`, each ``# key: unset`` line :func:`dumps` wrote read back as None.

    Raises:
        tomllib.TOMLDecodeError: ``text`` is not TOML (the message gives the line and column).
    """
    data = tomllib.loads(text)
    table = data
    for line in text.splitlines():
        if header := _HEADER.fullmatch(line.strip()):
            table = data
            for key in header[1].split("."):
                table = table.setdefault(key, {})
        elif (unset := _UNSET.fullmatch(line.strip())) and unset[1] not in table:
            table[unset[1]] = None
    return data


def _table(table: Mapping[str, Any], path: tuple[str, ...]) -> list[str]:
    lines: list[str] = []
    nested: list[tuple[str, Mapping[str, Any]]] = []
    for key, value in table.items():
        if isinstance(value, Mapping):
            nested.append((key, value))
        elif value is None:
            lines.append(f"# {_key(key)}: unset")
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:  # after the plain values: a key below a [header] belongs to that table
        inner = (*path, key)
        lines += ["", f"[{'.'.join(_key(k) for k in inner)}]", *_table(value, inner)]
    return lines


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        if any(item is None or isinstance(item, Mapping) for item in value):
            raise TypeError(f"no TOML form for an array holding None or a table: {value!r}")
        return _array([_value(item) for item in value])
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


def _array(items: list[str]) -> str:
    """One line, or one item per line when that line would be long (a list of modules, say)."""
    line = "[" + ", ".join(items) + "]"
    return line if len(line) <= _ARRAY_LINE else "[\n" + "".join(f"    {item},\n" for item in items) + "]"


def _float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)  # 0.1, 1e-06, 1e+16: each a TOML float


def _string(text: str) -> str:
    """A basic string: quote, backslash and control characters escaped, everything else as is."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
