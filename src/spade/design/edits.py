"""The ``lines`` edit format: the designer sees numbered lines of its parent and rewrites some as ``N: text``.

A small model cannot copy long lines verbatim (SEARCH/REPLACE patches fail on that) nor write a whole file,
but it can name a line number and write one new line: measured on the embedded 135M model, 9 of 30 replies
apply and parse with one worked example against 2 of 30 SEARCH/REPLACE patches (SPEC §7). The excerpt shown
is the window of the parent richest in constants (:func:`excerpt_window`: level tables, sizes, budgets),
numbered with the parent's real line numbers; the prompt holds a worked exchange before the request.

Applying (:func:`apply_line_edits`) replaces each named line; the new text keeps the original line's
indentation (the model's own leading spaces are ignored, so a reply cannot break the block structure by
mis-indenting). Lines outside the shown window, a reply with no ``N:`` line, or one that changes nothing are
refused with the reason. The edited module then goes through the checker like any other design.
"""

from __future__ import annotations

import ast
import re

from spade.design.prompt_texts import DIFFICULTY_RULES, SKILL_DESCRIPTIONS
from spade.design.prompts import DesignRequest, Exemplar
from spade.pyast import parse_module
from spade.replies import parse_line_edits
from spade.types import Message

LINES_SYSTEM = (
    "You edit the Python code of text games. You change a constant or a rule by rewriting one line, and "
    "reply only with the new line, written as `N: new text` where N is the line number shown."
)
_EXAMPLE_CODE = """# (largest number, turn budget) per difficulty level
LEVELS: tuple[tuple[int, int], ...] = (
    (4, 4),
    (10, 6),
    (50, 9),
)
"""
_EXAMPLE_REPLY = "3:     (6, 4),"
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def excerpt_window(code: str, max_chars: int) -> tuple[int, int]:
    """The 1-based inclusive line range to show (a pure function of the code and the budget).

    The module-level constant table with the most number literals (``LEVELS = ...``: what sets a game's
    sizes, ranges and budgets), with the comment line right above it (it usually says what the numbers
    mean), when it fits ``max_chars``; otherwise the window within ``max_chars`` holding the most number
    literals (ties: the earliest).
    """
    lines = code.splitlines()
    if not lines:
        return 1, 0
    tables = [(sum(_is_tunable(ln) for ln in lines[a - 1 : b]), -a, a, b) for a, b in _constant_spans(code)]
    tables = [t for t in tables if t[0] > 0]
    if tables:
        _, _, first, last = max(tables)
        if first > 1 and lines[first - 2].strip().startswith("#"):
            first -= 1
        if sum(len(ln) + 6 for ln in lines[first - 1 : last]) <= max_chars:
            return first, last
    scores = [_is_tunable(line) for line in lines]
    best, best_score = (1, 1), -1
    for start in range(len(lines)):
        size, end, score = 0, start, 0
        while end < len(lines) and size + len(lines[end]) + 6 <= max_chars:
            size += len(lines[end]) + 6
            score += scores[end]
            end += 1
        if score > best_score:
            best, best_score = (start + 1, max(end, start + 1)), score
    return best


def _constant_spans(code: str) -> list[tuple[int, int]]:
    """Line spans of module-level assignments to UPPER_CASE names (none when the code does not parse)."""
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id.isupper() for t in targets):
            out.append((node.lineno, node.end_lineno or node.lineno))
    return out


def _is_tunable(line: str) -> int:
    """How many number literals a code line holds (comments and string-only lines hold none)."""
    stripped = line.strip()
    if not stripped or stripped.startswith(("#", '"', "'")):
        return 0
    return len(_NUMBER.findall(stripped.split("#", 1)[0]))


def numbered(code: str, first: int, last: int) -> str:
    """Lines ``first..last`` (1-based, inclusive) of ``code``, each prefixed with ``N: ``."""
    lines = code.splitlines()
    return "\n".join(f"{n}: {lines[n - 1]}" for n in range(first, min(last, len(lines)) + 1))


def _request_text(name: str, skill: str, code: str, span: tuple[int, int], advice: str) -> str:
    first, last = span
    return (
        f"Lines {first}-{last} of the game `{name}` (skill: {skill}):\n{numbered(code, first, last)}\n\n"
        f"Change one constant or rule so that it becomes a different game. {advice}\n"
        "Reply with the changed line only, as `N: new text`."
    )


def _advice(parent: Exemplar, difficulty: str) -> str:
    if parent.win_rate is None:
        return f"Target: {DIFFICULTY_RULES.get(difficulty, difficulty)}"
    if parent.win_rate > 0.6:
        return f"The player wins {parent.win_rate:.0%} of games: make it harder."
    if parent.win_rate < 0.3:
        return f"The player wins {parent.win_rate:.0%} of games: make it a little easier."
    return f"The player wins {parent.win_rate:.0%} of games: keep the difficulty, change the challenge."


def mechanical_edit(code: str, window: tuple[int, int], variant: int) -> tuple[int, str] | None:
    """A small constant change inside ``window``: ``(line number, new stripped text)``, or None (no number).

    ``variant`` picks which number changes and whether it goes up or down by one (never below 1), so the
    requests of one regeneration show different worked edits.
    """
    lines = code.splitlines()  # a window may end on empty last lines, which splitlines drops
    slots = [
        (n, m)
        for n in range(window[0], min(window[1], len(lines)) + 1)
        if _is_tunable(lines[n - 1])
        for m in _NUMBER.finditer(lines[n - 1].split("#", 1)[0])
        if "." not in m.group(0)
    ]
    if not slots:
        return None
    n, match = slots[variant % len(slots)]
    value = int(match.group(0))
    new_value = value + 1 if (variant // len(slots)) % 2 == 0 or value <= 1 else value - 1
    line = lines[n - 1]
    return n, (line[: match.start()] + str(new_value) + line[match.end() :]).strip()


def build_line_edit_messages(req: DesignRequest, *, example_chars: int, variant: int = 0) -> list[Message]:
    """The chat messages of a ``lines`` edit: system, one worked exchange, then the request.

    The worked exchange is a mechanical one-number edit of the same lines (:func:`mechanical_edit`; the
    model copies line numbers and shapes from an example, so an example on other lines misleads it), or a
    fixed example when the lines hold no number.
    """
    parent = req.parent
    if parent is None:
        raise ValueError("a lines edit needs a parent environment; pass parent= or use mode='generate'")
    skill_text = f"{req.skill}: {SKILL_DESCRIPTIONS[req.skill]}"
    window = excerpt_window(parent.code, example_chars)
    edit = mechanical_edit(parent.code, window, variant)
    if edit is None:
        span = (1, len(_EXAMPLE_CODE.splitlines()))
        example = _request_text("guess_number", "logical_deduction", _EXAMPLE_CODE, span, "Target: easy.")
        reply = _EXAMPLE_REPLY
    else:
        example = _request_text(parent.env_id, skill_text, parent.code, window, "Make a small change.")
        reply = f"{edit[0]}: {edit[1]}"
    request = _request_text(parent.env_id, skill_text, parent.code, window, _advice(parent, req.difficulty))
    return [
        {"role": "system", "content": LINES_SYSTEM},
        {"role": "user", "content": example},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": request},
    ]


UNCHANGED = "the edit changes nothing"
"""Why :func:`apply_line_edits` refuses a reply that rewrites lines as they were."""


def apply_line_edits(parent: str, text: str, max_chars: int, *, cut: bool = False) -> tuple[str | None, str]:
    """Apply a reply's ``N: text`` lines to ``parent``; ``(code, "")`` or ``(None, why)`` (never raises).

    Only lines inside :func:`excerpt_window` ``(parent, max_chars)`` (the window the prompt showed) may change;
    each keeps its original indentation.
    """
    edits = parse_line_edits(text, cut=cut)
    if not edits:
        return None, "no `N: new text` line in the reply"
    first, last = excerpt_window(parent, max_chars)
    outside = sorted(n for n in edits if not first <= n <= last)
    if outside:
        return None, f"line(s) {outside} are outside the lines shown ({first}-{last})"
    lines = parent.splitlines()
    changed = False
    for n, new in edits.items():
        old = lines[n - 1]
        indent = old[: len(old) - len(old.lstrip())]
        changed |= new != old.strip()
        lines[n - 1] = indent + new
    if not changed:
        return None, UNCHANGED
    return "\n".join(lines) + "\n", ""
