"""Combination lock: open a lock of several dials, guessing one dial at a time from higher/lower answers.

Logical deduction seed environment. The dials are set in order; each guess at the current dial is answered
with whether its number is higher or lower, and a right guess moves on to the next dial. Halving the range
still possible on each dial (binary search) always opens the lock within the turn budget, while guessing at
random rarely does. A guess that repeats an earlier one, or falls outside what the answers so far allow, is
legal but wastes a turn. Only opening the lock is rewarded (1.0).
"""

from __future__ import annotations

import random
import re
from typing import Any

from spade.env import TextEnv

# The budgets are what binary search needs in the worst case: random guessing wins under 10% of games.
# (dials, largest number on a dial, turn budget) per difficulty level
LEVELS: tuple[tuple[int, int, int], ...] = (
    (3, 12, 12),
    (3, 20, 15),
    (4, 30, 20),
    (4, 100, 28),
)
BARE_RE = re.compile(r"^\s*(-?\d+)\s*[.!]?\s*$")


def read_guess(action: str) -> int | None:
    """The guessed number: ``\\boxed{N}`` (the last one, anywhere in the text) or a bare number."""
    text = str(action)
    boxed = re.findall(r"\\boxed\s*\{\s*(-?\d+)\s*\}", text)
    if boxed:
        return int(boxed[-1])
    match = BARE_RE.match(text)
    return int(match.group(1)) if match else None


class CombinationLockEnv(TextEnv):
    """Open a lock by finding each dial's number from higher/lower answers, within a turn budget."""

    skill = "logical_deduction"
    difficulty_levels = len(LEVELS)
    default_difficulty = 1
    max_turns = 28  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        dials, self.top, turns = LEVELS[self.difficulty]
        self.max_turns = self.turn_budget(turns)
        self.code = [self.rng.randint(1, self.top) for _ in range(dials)]
        self.dial = 0  # index of the dial being guessed
        self.low, self.high = 1, self.top  # what the answers so far allow for the current dial
        intro = (
            f"A lock has {dials} dials, each set to a whole number from 1 to {self.top}. Find them one at a "
            "time: write one number per turn, like \\boxed{7}. I say whether the dial's number is higher or "
            "lower (and the range it can still be in), or that it is right and we move to the next dial. "
            f"Dial 1 of {dials}. Turns left: {self.turns_left}"
        )
        return intro, {"difficulty": self.difficulty, "dials": dials, "top": self.top}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        guess = read_guess(action)
        if guess is None:
            return self.end_turn(f"Could not read a number; write one like \\boxed{{7}}. {self._left()}")
        secret = self.code[self.dial]
        if guess != secret:
            if guess < secret:
                way, self.low = "higher", max(self.low, guess + 1)
            else:
                way, self.high = "lower", min(self.high, guess - 1)
            return self.end_turn(
                f"{guess}: dial {self.dial + 1}'s number is {way}, from {self.low} to {self.high}. {self._left()}"
            )
        self.dial += 1
        self.low, self.high = 1, self.top
        if self.dial == len(self.code):
            return self.end_turn(f"{guess} is right. The lock opens. You win!", 1.0, terminated=True)
        return self.end_turn(
            f"{guess} is right. Dial {self.dial + 1} of {len(self.code)}, from 1 to {self.top}. {self._left()}"
        )

    def _left(self) -> str:
        return f"Turns left: {self.turns_left - 1}"  # end_turn is about to count this turn

    def solution(self) -> list[str]:
        """Binary search on each dial: guess the middle of the range still possible until it is right."""
        moves = []
        for secret in self.code:
            low, high = 1, self.top
            while True:
                guess = (low + high) // 2
                moves.append(str(guess))
                if guess == secret:
                    break
                low, high = (guess + 1, high) if guess < secret else (low, guess - 1)
        return moves

    def sample_action(self, rng: random.Random) -> str:
        """A uniform random guess over a dial's range (used by tests as the random baseline)."""
        return str(rng.randint(1, self.top))


ENV = CombinationLockEnv
