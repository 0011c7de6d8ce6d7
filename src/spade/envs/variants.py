"""Held-out variants of seed games: a level table replaced by a level the seed never had, or rules rewritten.

A family of games whose rules a policy trained on the seed game knows, at sizes it never played: the held-out
suite on which training on that game (and on designs edited from it) should show, item by item. Select one
with ``spade eval envs --tasks variants:combination_lock``.

``combination_lock``: every lock of 1-4 dials with numbers up to 6, 8, 10, 12, 16, 20 or 24, with the turn
budget binary search needs in the worst case (``dials × ⌈log2(top + 1)⌉``, the rule the seed's levels
follow), except the seed's own levels: 26 games, from a single dial of 6 (a policy that guesses wins some)
to four dials of 24.

``lock_rules``: the lock under every combination of other rules (:mod:`spade.envs.rule_variants`: other words
for its answers, numbers from 0, dials from the last, no range said) at 1 dial of 12, 2 of 10 and 3 of 8: 93
games. ``sequences``: the sequences game with one of its rules alone, 4 or 6 terms shown and 1-3 asked: 60
games. ``heldout``: all three, 179 games (``spade eval envs --tasks variants:heldout``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from spade import envs
from spade.envs import rule_variants

PREFIX = "variants:"
"""How ``spade eval envs --tasks`` names a family."""
LOCK_DIALS = (1, 2, 3, 4)
LOCK_TOPS = (6, 8, 10, 12, 16, 20, 24)
_LEVELS_RE = re.compile(r"^LEVELS: [^=]+= \(\n.*?^\)\n", re.MULTILINE | re.DOTALL)


def lock_levels() -> list[tuple[int, int, int]]:
    """(dials, top, turns) of every combination_lock variant, in suite order."""
    from spade.envs.library.combination_lock import LEVELS  # noqa: PLC0415 - the seed's own levels

    grid = [(d, t, d * math.ceil(math.log2(t + 1))) for d in LOCK_DIALS for t in LOCK_TOPS]
    return [level for level in grid if level not in LEVELS]


def with_levels(source: str, level: tuple[int, int, int]) -> str:
    """``source`` with its ``LEVELS`` table replaced by ``level`` at every difficulty (so any level played is
    the variant); raises ValueError when the source has no such table."""
    seed_levels = _LEVELS_RE.search(source)
    if seed_levels is None:
        raise ValueError("the source has no `LEVELS: ... = (` table to replace")
    table = f"LEVELS: tuple[tuple[int, int, int], ...] = ({level!r},) * 4\n"
    return source[: seed_levels.start()] + table + source[seed_levels.end() :]


LOCK_RULE_SIZES = ((1, 12), (2, 10), (3, 8))
"""(dials, top) at which every lock rule set is played: held-out sizes a guessing player wins now and then
(1 dial) to rarely (3 dials)."""


def lock_sizes() -> list[tuple[str, str]]:
    """(name, source) of the seed lock at every size of :func:`lock_levels` (``variants:combination_lock``)."""
    source = envs.spec("combination_lock").source()
    return [(f"combination_lock_d{d}_t{t}", with_levels(source, (d, t, n))) for d, t, n in lock_levels()]


def lock_rules() -> list[tuple[str, str]]:
    """(name, source) of every lock rule set (:func:`rule_variants.lock_rule_sets`) at every size of
    :data:`LOCK_RULE_SIZES`: 93 games named ``combination_lock_d{dials}_t{top}_{tags}``."""
    source = envs.spec("combination_lock").source()
    out = []
    for d, t in LOCK_RULE_SIZES:
        sized = with_levels(source, (d, t, d * math.ceil(math.log2(t + 1))))
        for rules in rule_variants.lock_rule_sets():
            tags = "_".join(r.tag for r in rules)
            out.append((f"combination_lock_d{d}_t{t}_{tags}", rule_variants.lock_apply(sized, rules)))
    return out


def sequences_rules() -> list[tuple[str, str]]:
    """(name, source) of every sequences variant (one rule, 4 or 6 terms shown, 1-3 asked): 60 games named
    ``sequences_{rule}_s{shown}_a{asked}``."""
    source = envs.spec("sequences").source()
    return [
        (f"sequences_{rule}_s{shown}_a{asked}", rule_variants.sequence_source(source, rule, shown, asked))
        for rule, shown, asked in rule_variants.sequence_variants()
    ]


def heldout() -> list[tuple[str, str]]:
    """The held-out family (``variants:heldout``): the lock's sizes, the lock's rule variants and the
    sequences variants, 179 games."""
    return lock_sizes() + lock_rules() + sequences_rules()


FAMILIES: dict[str, Callable[[], list[tuple[str, str]]]] = {
    "combination_lock": lock_sizes,
    "lock_rules": lock_rules,
    "sequences": sequences_rules,
    "heldout": heldout,
}
"""Family name (``variants:NAME``) -> its (variant name, source) list."""


def family(name: str) -> list[tuple[str, str]]:
    """(variant name, source) of every variant of family ``name``; KeyError names the known families."""
    if name not in FAMILIES:
        raise KeyError(f"no variants of {name!r}; families: {', '.join(FAMILIES)}")
    return FAMILIES[name]()
