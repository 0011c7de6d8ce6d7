"""Pulling environment code out of a model reply (shared by the checker and the designer)."""

from __future__ import annotations

import re

from spade.pyast import parse_module
from spade.replies import strip_reasoning

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*$", re.MULTILINE)
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_CLASS = re.compile(r"^class\s+\w+", re.MULTILINE)


def _blocks(text: str) -> tuple[list[tuple[str, str]], bool]:
    """``(tag, body)`` of each fenced block, and whether the last one was cut off (no closing fence)."""
    blocks: list[tuple[str, str]] = []
    pos, truncated = 0, False
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            break
        fence, tag = opening.group(1), opening.group(2).lower()
        body_start = opening.end() + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, body_start)
        if end is None:
            blocks.append((tag, text[body_start:]))
            truncated = True
            break
        blocks.append((tag, text[body_start : end.start()]))
        pos = end.end()
    return blocks, truncated


def extract_code(text: str) -> str | None:
    """The environment code in a model reply, or None when there is none.

    Reasoning blocks are dropped first (code drafted inside ``<think>`` is never taken). Among fenced blocks
    the last Python block (tagged ``python``/``py`` or untagged) that defines a class wins, else the last
    Python block: replies often end with a usage example after the environment. A reply cut off inside a
    fence yields the partial block (the syntax check then reports it). A reply without fences is returned
    whole when it parses as Python and defines a class.
    """
    body = strip_reasoning(text)
    blocks, _ = _blocks(body)
    python = [code for tag, code in blocks if tag in _PYTHON_TAGS or tag == ""]
    if python:
        with_class = [code for code in python if _CLASS.search(code)]
        chosen = (with_class or python)[-1]
        return chosen.strip("\n") + "\n"
    if blocks:
        return None
    stripped = body.strip()
    if not stripped or not _CLASS.search(stripped):
        return None
    try:
        parse_module(stripped)
    except SyntaxError:
        return None
    return stripped + "\n"


def looks_truncated(text: str) -> bool:
    """Whether the reply ends inside an open code fence (a reply cut at the token budget)."""
    return _blocks(strip_reasoning(text))[1]
