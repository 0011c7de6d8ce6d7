"""The scripted designer's replies to ``lines`` edit prompts (:mod:`spade.design.edits`): a level table rewritten.

The seed games keep their levels in a module-level table of one tuple per level and line, turn budget (or
spare turns) last: ``(3, 12, 12)`` is combination_lock's (dials, largest number, turns). The prompt shows the
table as numbered lines but not which level is played, so a reply rewrites every row it shows:

* ``valid``: every row made a little easier in one of a few ways (:data:`EASIER`), one per request of a
  regeneration. Whatever level is played changes, and for combination_lock, cpu-tiny's designer game, the
  checker accepts every way (its scripted solution still wins, random guessing still does not); on other
  games the edits apply and parse, and the checker judges them as it judges a model's;
* ``broken``: the first row loses its closing parenthesis (the module no longer parses);
* ``hostile``: the first row becomes a call of ``os._exit`` (the module ends the process that imports it).

A prompt whose lines hold no row (a table written on one line, say) is answered with a reply that names no
line, which is refused as a confused model's reply is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spade.design.edits import mechanical_edit

ROW = re.compile(r"^\s*\(.*\)\s*,?\s*(?:#.*)?$")
"""A table row: a tuple on a line of its own."""
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")
_SHOWN = re.compile(r"^(\d+): (.*)$", re.MULTILINE)
_VARIANTS = 64
"""Worked-edit variants tried when recognising one (a window of up to 32 numbers)."""


def _shift(line: str, from_end: int, delta: int, floor: int) -> str:
    """``line`` with its ``from_end``-th last integer moved by ``delta`` (unchanged below ``floor``)."""
    found = list(_INT.finditer(line.split("#", 1)[0]))
    if len(found) < from_end:
        return line
    match = found[-from_end]
    value = int(match.group(0)) + delta
    return line if value < floor else line[: match.start()] + str(value) + line[match.end() :]


EASIER: tuple[Callable[[str], str], ...] = (
    lambda row: _shift(row, 1, +1, 1),
    lambda row: _shift(row, 2, -1, 2),
    lambda row: _shift(row, 1, +2, 1),
    lambda row: _shift(row, 2, -2, 2),
)
"""Ways of making a level easier: more turns (the row's last number), or a smaller size with the same turns
(the number before it; never the first, a count such as dials: one dial fewer with the same turns lets
random guessing win, and the checker refuses an exploitable game)."""


def shown_lines(prompt: str) -> dict[int, str]:
    """The numbered lines of the request (the prompt's last user turn; earlier ones are the worked example)."""
    request = prompt.rsplit("<|user|>", 1)[-1]
    return {int(m.group(1)): m.group(2) for m in _SHOWN.finditer(request)}


def worked_variant(prompt: str, lines: dict[int, str]) -> int | None:
    """The variant of the prompt's worked edit (:func:`spade.design.edits.mechanical_edit`), or None.

    The loop gives the requests of one regeneration the variants 0, 1, ...: a reply keyed by it differs from
    its siblings' (they would otherwise be merged as duplicates).
    """
    worked = prompt.rsplit("<|user|>", 1)[0].rsplit("<|assistant|>", 1)[-1].strip()
    match = _SHOWN.match(worked)
    if match is None or not lines:
        return None
    target = (int(match.group(1)), match.group(2).strip())
    code = "\n".join(lines.get(n, "") for n in range(1, max(lines) + 1))
    window = (min(lines), max(lines))
    return next((v for v in range(_VARIANTS) if mechanical_edit(code, window, v) == target), None)


def line_edit_reply(prompt: str, behaviour: str, unit: float) -> str:
    """The reply to a ``lines`` edit prompt; ``behaviour``: valid, broken or hostile (see the module
    docstring). A valid reply's way of easing the levels is picked by the worked edit's variant, else by
    ``unit`` (in [0, 1))."""
    lines = shown_lines(prompt)
    rows = {n: text.strip() for n, text in lines.items() if ROW.match(text) and _INT.search(text)}
    if not rows:
        return "I would make the game a little easier."
    first = min(rows)
    if behaviour == "broken":
        return f"{first}: {rows[first].replace(')', '', 1)}"
    if behaviour == "hostile":
        return f'{first}: __import__("os")._exit(3),'
    variant = worked_variant(prompt, lines)
    start = int(unit * len(EASIER)) if variant is None else variant % len(EASIER)
    for k in range(len(EASIER)):  # the first way, from the picked one on, that changes some row
        easier = EASIER[(start + k) % len(EASIER)]
        edits = [(n, easier(row)) for n, row in rows.items() if easier(row) != row]
        if edits:
            return "\n".join(f"{n}: {row}" for n, row in edits)
    return f"{first}: {rows[first]}"  # nothing to ease: the row as it was (refused: it changes nothing)
