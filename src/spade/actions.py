"""Turning an agent's free-text reply into the action an environment receives."""

from __future__ import annotations

import re
from typing import Literal

ActionMode = Literal["boxed", "lenient", "raw"]
"""``boxed``: the last ``\\boxed{...}`` after any reasoning block, else the stripped text (the paper's parser).
``lenient``: as ``boxed``; without a box, the number on the last line when it holds exactly one, else the last
non-empty line (small models rarely box their answers). ``raw``: the text after reasoning, stripped."""

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_BOXED = "\\boxed"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def strip_reasoning(text: str) -> str:
    """Drop reasoning blocks: everything up to the last ``</think>``; an unterminated ``<think>`` drops the rest."""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (balanced braces, nesting allowed), or None."""
    pos = text.rfind(_BOXED)
    while pos != -1:
        content = _balanced_content(text, pos + len(_BOXED))
        if content is not None:
            return content.strip()
        pos = text.rfind(_BOXED, 0, pos)
    return None


def _balanced_content(text: str, start: int) -> str | None:
    i = start
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def parse_action(text: str, mode: ActionMode = "boxed") -> str:
    """Extract the action from a reply according to ``mode`` (see :data:`ActionMode`)."""
    body = strip_reasoning(text)
    if mode == "raw":
        return body.strip()
    boxed = last_boxed(body)
    if boxed is not None:
        return boxed
    if mode == "boxed":
        return body.strip()
    lines = [ln.strip().strip("*`\"'").strip() for ln in body.splitlines() if ln.strip()]
    if not lines:
        return ""
    numbers = _NUMBER.findall(lines[-1])
    if len(numbers) == 1:
        return numbers[0]
    return lines[-1].rstrip(".!")


def wrap_boxed(action: str) -> str:
    """Re-wrap an extracted action for environments that parse ``\\boxed{}`` themselves (official format)."""
    return f"\\boxed{{{action}}}"
