"""Turning an agent's free-text reply into the action an environment receives."""

from __future__ import annotations

import re
from typing import Literal

ActionMode = Literal["boxed", "boxed_last", "lenient", "raw"]
"""``boxed``: the *first* ``\\boxed{...}`` after any reasoning block, else the stripped text (the authors'
parser, :func:`first_boxed`). ``boxed_last``: as ``boxed`` with the *last* complete box (:func:`last_boxed`).
``lenient``: as ``boxed``; without a box, the number on the last line when it holds exactly one, else the last
line (lines of bare markdown decoration skipped; small models rarely box their answers). ``raw``: the text
after reasoning, stripped."""

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_BOXED = "\\boxed"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FLAT_BOX = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_MODES: tuple[ActionMode, ...] = ("boxed", "boxed_last", "lenient", "raw")


def strip_reasoning(text: str) -> str:
    """Drop reasoning: everything up to the last ``</think>``; an unterminated ``<think>`` drops the rest."""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text


def first_boxed(text: str) -> str | None:
    """The authors' rule: the first ``\\boxed{...}`` whose content holds no braces; when every box nests braces,
    the last complete one (:func:`last_boxed`); None when there is no complete box.

    So ``\\boxed{1} ... \\boxed{2}`` gives ``1``, and ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``.
    """
    flat = _FLAT_BOX.search(text)
    if flat is not None:
        return flat.group(1).strip()
    return last_boxed(text)


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (balanced braces, nesting allowed), or None.

    Runs in linear time: once a later box is found unterminated, no earlier box can close past its opening
    brace (everything from there on stays at depth >= 1), so earlier scans stop at that brace.
    """
    limit = len(text)
    pos = text.rfind(_BOXED)
    while pos != -1:
        brace = _opening_brace(text, pos + len(_BOXED))
        if brace is not None:
            content = _balanced_content(text, brace, limit)
            if content is not None:
                return content.strip()
            limit = brace
        pos = text.rfind(_BOXED, 0, pos)
    return None


def _opening_brace(text: str, start: int) -> int | None:
    """Index of the ``{`` that follows ``start`` after optional whitespace (LaTeX allows it), or None."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    return i if i < len(text) and text[i] == "{" else None


def _balanced_content(text: str, brace: int, limit: int) -> str | None:
    """Text between ``text[brace] == "{"`` and its matching ``}`` when that lies before ``limit``."""
    depth = 0
    for j in range(brace, limit):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : j]
    return None


def parse_action(text: str, mode: ActionMode = "boxed") -> str:
    """Extract the action from a reply according to ``mode`` (see :data:`ActionMode`)."""
    if mode not in _MODES:
        raise ValueError(f"unknown action mode {mode!r}: use one of {', '.join(_MODES)}")
    body = strip_reasoning(text)
    if mode == "raw":
        return body.strip()
    boxed = last_boxed(body) if mode == "boxed_last" else first_boxed(body)
    if boxed is not None:
        return boxed
    if mode in ("boxed", "boxed_last"):
        return body.strip()
    # Markdown decoration (bold, code fences, quotes) is not an answer: skip lines made only of it.
    lines = [line for raw in body.splitlines() if (line := raw.strip().strip("*`\"'").strip())]
    if not lines:
        return ""
    numbers = _NUMBER.findall(lines[-1])
    if len(numbers) == 1:
        return str(numbers[0])
    return lines[-1].rstrip(".!")


def wrap_boxed(action: str) -> str:
    """Re-wrap an extracted action for environments that parse ``\\boxed{}`` themselves (official format)."""
    return f"\\boxed{{{action}}}"
