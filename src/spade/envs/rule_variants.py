"""Rule variants of seed games: the seed's source with some of its rules rewritten, solution included.

A rule variant changes what the game says or accepts, not only its size: the lock's feedback in other words,
its numbers counted from 0, its dials named from the last, or its answers without the range still possible;
a sequences game of one rule that asks for 1-3 next terms after 4 or 6 shown. Each variant is the seed's
source with exact text edits (:class:`Rule`), so it follows the seed as the seed changes, and an edit whose
text the seed no longer has raises ValueError instead of leaving a variant that is silently the seed. The
seed's ``solution()`` is edited with its rules (the 0-based lock searches 0..top-1), so every variant is won
by its own solution.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

Edit = tuple[str, str]
"""``(old, new)``: every occurrence of ``old`` in the source becomes ``new`` (``old`` must occur)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One named change of a seed game's rules: text edits applied in order."""

    tag: str
    """Short name, part of the variant's name (``too``, ``base0``, ...)."""
    edits: tuple[Edit, ...]


def apply(source: str, rules: tuple[Rule, ...]) -> str:
    """``source`` with every edit of ``rules`` applied in order; ValueError names an edit with nothing to
    change (the seed changed under it: update the rule)."""
    for rule in rules:
        for old, new in rule.edits:
            if old not in source:
                raise ValueError(f"rule {rule.tag!r}: the source has no {old!r} to replace; update the rule")
            source = source.replace(old, new)
    return source


# -- combination_lock -------------------------------------------------------------------------------------

_LOCK_FEEDBACK = "{guess}: dial {self.dial + 1}'s number is {way}, from {self.low} to {self.high}. "
LOCK_WORDINGS: tuple[Rule, ...] = (
    Rule("too", (
        ("the dial's number is higher or ", "your number is too low or "),
        ("lower (and the range", "too high (and the range"),
        ('"higher", max(', '"too low", max('),
        ('"lower", min(', '"too high", min('),
        (_LOCK_FEEDBACK, "{guess} is {way} for dial {self.dial + 1}, whose number is from {self.low} to "
                         "{self.high}. "),
    )),
    Rule("updown", (
        ("the dial's number is higher or ", "to go up or "),
        ("lower (and the range", "down (and the range"),
        ('"higher", max(', '"up", max('),
        ('"lower", min(', '"down", min('),
        (_LOCK_FEEDBACK, "{guess}: go {way} on dial {self.dial + 1}, from {self.low} to {self.high}. "),
    )),
    Rule("above", (
        ("the dial's number is higher or ", "the dial's number is above or "),
        ("lower (and the range", "below yours (and the range"),
        ('"higher", max(', '"above", max('),
        ('"lower", min(', '"below", min('),
        (_LOCK_FEEDBACK, "Dial {self.dial + 1}'s number is {way} {guess}, from {self.low} to {self.high}. "),
    )),
)  # fmt: skip
"""Other words for the lock's answers (the seed says higher / lower)."""
LOCK_BASE0 = Rule("base0", (
    ("whole number from 1 to {self.top}", "whole number from 0 to {self.top - 1}"),
    ("self.rng.randint(1, self.top)", "self.rng.randint(0, self.top - 1)"),
    ("self.low, self.high = 1, self.top", "self.low, self.high = 0, self.top - 1"),
    ("from 1 to {self.top}. {self._left()}", "from 0 to {self.top - 1}. {self._left()}"),
    ("low, high = 1, self.top\n", "low, high = 0, self.top - 1\n"),
    ("rng.randint(1, self.top)", "rng.randint(0, self.top - 1)"),
))  # fmt: skip
"""Dials numbered 0 to top - 1 instead of 1 to top (as many numbers: the same turn budget)."""
LOCK_REVERSE = Rule("reverse", (
    ("Dial 1 of {dials}. ", "Dials go from the last to the first. Dial {dials} of {dials}. "),
    ("self.dial + 1", "len(self.code) - self.dial"),
))  # fmt: skip
"""Dials found from the last to the first (the seed goes from dial 1)."""
LOCK_NORANGE = Rule("norange", (
    (" (and the range it can still be in)", ""),
    (", from {self.low} to {self.high}. {self._left()}", ". {self._left()}"),
    (", whose number is from {self.low} to {self.high}. {self._left()}", ". {self._left()}"),
))  # fmt: skip
"""Answers that no longer say the range still possible: the player keeps it (edits the wordings' texts too)."""


def lock_rule_sets() -> list[tuple[Rule, ...]]:
    """Every combination of wording (seed or one of :data:`LOCK_WORDINGS`), 0-based numbers, reversed dials
    and hidden range, except the seed's own rules: 31 rule sets."""
    out: list[tuple[Rule, ...]] = []
    wordings: tuple[Rule | None, ...] = (None, *LOCK_WORDINGS)
    for wording, *flags in itertools.product(wordings, (False, True), (False, True), (False, True)):
        chosen = (
            wording,
            *(r for r, on in zip((LOCK_BASE0, LOCK_REVERSE, LOCK_NORANGE), flags, strict=True) if on),
        )
        rules = tuple(r for r in chosen if r is not None)
        if rules:
            out.append(rules)
    return out


def lock_apply(source: str, rules: tuple[Rule, ...]) -> str:
    """The lock's ``source`` under ``rules``; the hidden range goes last, after the wording it edits."""
    norange = tuple(r for r in rules if r is LOCK_NORANGE)
    rest = tuple(r for r in rules if r is not LOCK_NORANGE)
    edited = apply(source, rest)
    if not norange:
        return edited
    # only the feedback text the source holds now is there to shorten: drop the edits for the other texts
    present = tuple(e for e in LOCK_NORANGE.edits if e[0] in edited)
    return apply(edited, (Rule(LOCK_NORANGE.tag, present),))


# -- sequences --------------------------------------------------------------------------------------------

SEQUENCE_RULES = ("arithmetic", "cycle", "letters", "geometric", "alternating_steps", "fibonacci_like",
                  "growing_gaps", "interleaved", "double_then_add", "polynomial")  # fmt: skip
"""The seed's rule generators; a variant plays one of them alone."""
SEQUENCE_SHOWN = (4, 6)
"""Terms shown (the seed shows 5, 6 or 7 of a mixture of rules)."""
SEQUENCE_ASKED = (1, 2, 3)
"""Next terms asked for (the seed asks 3)."""
SEQUENCE_SPARE = 2
_SEQ_LEVELS_RE = re.compile(r"^LEVELS: [^=]+= \(\n.*?^\)\n", re.MULTILINE | re.DOTALL)
_ASKED_RE = re.compile(r"^ASKED = \d+\n", re.MULTILINE)


def sequence_source(source: str, rule: str, shown: int, asked: int) -> str:
    """The sequences ``source`` with one rule ``rule`` at every level, ``shown`` terms shown and ``asked``
    next terms to give; ValueError when the source has no level table, ``ASKED`` or rule named ``rule``."""
    if f"\ndef {rule}(" not in source:
        raise ValueError(f"the sequences source has no rule {rule!r}")
    levels, asked_line = _SEQ_LEVELS_RE.search(source), _ASKED_RE.search(source)
    if levels is None or asked_line is None:
        raise ValueError("the sequences source has no `LEVELS: ... = (` table or `ASKED = N` line to replace")
    table = f"LEVELS: tuple[tuple[tuple[Rule, ...], int, int], ...] = ((({rule},), {shown}, {SEQUENCE_SPARE}),) * 3\n"
    source = source[: levels.start()] + table + source[levels.end() :]
    return _ASKED_RE.sub(f"ASKED = {asked}\n", source, count=1)


def sequence_variants() -> list[tuple[str, int, int]]:
    """(rule, shown, asked) of every sequences variant, in suite order: 60 variants."""
    return list(itertools.product(SEQUENCE_RULES, SEQUENCE_SHOWN, SEQUENCE_ASKED))
