"""Seating: deduce who sits in each seat of a row from a set of clues, one seat per turn.

Logical deduction seed environment. The clues are generated so that exactly one arrangement satisfies
them, and then pruned until none is redundant. The agent names the person in seat 1, then seat 2, and so
on; each right answer is revealed in the observation, a wrong one ends the episode (it contradicts the
clues, so it can only be a guess).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable
from typing import Any

from spade.env import TextEnv

NAMES = ("Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena")
# (people in the row, turn budget) per difficulty level
LEVELS: tuple[tuple[int, int], ...] = (
    (4, 6),
    (5, 7),
    (6, 8),
)
Seats = tuple[str, ...]
Where = dict[str, int]
"""Seat index (from 0) of each person."""
Clue = tuple[str, Callable[[Where], bool]]


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


def pair_clues(x: str, y: str) -> list[Clue]:
    """Every clue about how two people sit relative to each other."""

    def gap(w: Where) -> int:
        return w[y] - w[x]

    return [
        (f"{x} sits somewhere to the left of {y}.", lambda w: gap(w) > 0),
        (f"{x} sits directly to the left of {y}.", lambda w: gap(w) == 1),
        (f"{x} and {y} sit next to each other.", lambda w: abs(gap(w)) == 1),
        (f"{x} and {y} do not sit next to each other.", lambda w: abs(gap(w)) != 1),
        (f"Exactly one person sits between {x} and {y}.", lambda w: abs(gap(w)) == 2),
    ]


def single_clues(x: str, n: int) -> list[Clue]:
    """Every clue about where one person sits."""
    clues: list[Clue] = [
        (f"{x} sits at one end of the row.", lambda w: w[x] in (0, n - 1)),
        (f"{x} does not sit at either end of the row.", lambda w: w[x] not in (0, n - 1)),
    ]
    for k in range(n):
        clues.append((f"{x} sits in seat {k + 1}.", seat_test(x, k, True)))
        clues.append((f"{x} does not sit in seat {k + 1}.", seat_test(x, k, False)))
    return clues


def seat_test(x: str, k: int, sits: bool) -> Callable[[Where], bool]:
    """A test that ``x`` sits (or does not sit) in seat index ``k``."""
    return lambda w: (w[x] == k) == sits


class SeatingEnv(TextEnv):
    """Deduce the order of people in a row from clues, naming the person in each seat in turn."""

    skill = "logical_deduction"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 8  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        n, budget = LEVELS[self.difficulty]
        self.max_turns = self.turn_budget(budget)
        people = self.rng.sample(NAMES, n)
        self.people = sorted(people)
        self.answer: Seats = tuple(people)
        self.clues = self._make_clues(n)
        self.seated = 0
        return self._observe("New puzzle.", this_turn=0), {"difficulty": self.difficulty}

    def _make_clues(self, n: int) -> list[str]:
        """Add true clues in random order until one arrangement is left, then drop redundant ones."""
        arrangements = list(itertools.permutations(self.people))
        pool = [c for x in self.people for c in single_clues(x, n)]
        pool += [c for x, y in itertools.permutations(self.people, 2) for c in pair_clues(x, y)]
        where = [{p: k for k, p in enumerate(s)} for s in arrangements]
        truth = where[arrangements.index(self.answer)]
        pool = [c for c in pool if c[1](truth)]
        self.rng.shuffle(pool)
        chosen: list[tuple[str, int]] = []
        everything = (1 << len(arrangements)) - 1
        alive = everything
        for text, holds in pool:
            mask = sum(1 << i for i, w in enumerate(where) if holds(w))
            if alive & mask != alive:
                chosen.append((text, mask))
                alive &= mask
            if alive.bit_count() == 1:
                break
        for clue in list(chosen):
            rest = [m for t, m in chosen if t != clue[0]]
            if _intersect(rest, everything).bit_count() == 1:
                chosen.remove(clue)
        self.arrangements = arrangements
        self.clue_masks = [mask for _, mask in chosen]
        return [text for text, _ in chosen]

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset.

        The first observation states the puzzle; later ones show what changed (the seats filled so far and
        the next question): the clues stay in the conversation, and restating them every turn would make
        each turn's text several times longer. A reply that seats nobody gets :meth:`_retry` instead.
        """
        n = len(self.answer)
        known = [f"seat {k + 1}: {self.answer[k] if k < self.seated else '?'}" for k in range(n)]
        puzzle = ""
        if this_turn == 0:
            clues = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(self.clues))
            puzzle = (
                f"{n} people sit in a row of seats numbered 1 (left) to {n} (right): "
                f"{', '.join(self.people)}.\nClues:\n{clues}\n"
            )
        return (
            f"{event}\n{puzzle}"
            f"Seats so far: {'; '.join(known)}\n"
            f"Who sits in seat {self.seated + 1}? Answer with one name ({', '.join(self.people)}) in "
            "\\boxed{}. A wrong name ends the game.\n"
            f"Turns left: {self.turns_left - this_turn}"
        )

    def _retry(self, event: str) -> str:
        """The reply to a turn that seats nobody: the seats and the question stand as the last turn stated them."""
        return (
            f"{event} for seat {self.seated + 1} ({', '.join(self.people)}) in \\boxed{{}}. "
            f"Turns left: {self.turns_left - 1}"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = clean(action)
        named = [p for p in self.people if re.search(rf"\b{p.lower()}\b", text)]
        if len(named) != 1:
            return self.end_turn(self._retry("Please answer with exactly one name"))
        person, seat = named[0], self.seated + 1
        if person in self.answer[: self.seated]:
            return self.end_turn(self._retry(f"{person} is already seated; name someone else"))
        if person != self.answer[self.seated]:
            return self.end_turn(
                f"No: {person} cannot sit in seat {seat} given the clues. You lose.", 0.0, True
            )
        self.seated += 1
        if self.seated == len(self.answer):
            return self.end_turn(
                f"Yes, {person} sits in seat {seat}. Every seat is filled. You win!", 1.0, True
            )
        return self.end_turn(self._observe(f"Yes, {person} sits in seat {seat}."), 0.1)

    def solution(self) -> list[str]:
        """Solve the clues (the one arrangement they all allow) and name its people seat by seat."""
        alive = _intersect(self.clue_masks, (1 << len(self.arrangements)) - 1)
        return list(self.arrangements[alive.bit_length() - 1])

    def sample_action(self, rng: random.Random) -> str:
        """A random name from the row (used by tests as the random baseline)."""
        return rng.choice(self.people)


def _intersect(masks: list[int], everything: int) -> int:
    alive = everything
    for mask in masks:
        alive &= mask
    return alive


ENV = SeatingEnv
