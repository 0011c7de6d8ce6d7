"""Guess a number from 1 to 30 in 8 turns, told higher or lower after each wrong guess: a binary search wins
in 5, and guessing at random while ignoring the feedback (never the same number twice) wins 8/30, about 27%
of the episodes, against the checker's 20% limit."""

import re

from spade.env import TextEnv

LOW, HIGH, TURNS = 1, 30, 8
_NUMBER = re.compile(r"-?\d+")


class GuessNumberEnv(TextEnv):
    """Find the hidden whole number; each wrong guess is answered with higher or lower."""

    max_turns = TURNS

    def _reset(self, options):
        self.secret = self.rng.randint(LOW, HIGH)
        return (
            f"I picked a whole number from {LOW} to {HIGH}. Guess it in \\boxed{{}}; I answer higher or lower.",
            {},
        )

    def step(self, action):
        found = _NUMBER.findall(action)
        if not found:
            return self.end_turn("Guess a whole number, e.g. \\boxed{15}.")
        guess = int(found[-1])
        if guess == self.secret:
            return self.end_turn("Right!", 1.0, terminated=True)
        return self.end_turn("Higher." if guess < self.secret else "Lower.")

    def solution(self):
        low, high, guesses = LOW, HIGH, []
        while True:
            middle = (low + high) // 2
            guesses.append(f"\\boxed{{{middle}}}")
            if middle == self.secret:
                return guesses
            low, high = (middle + 1, high) if middle < self.secret else (low, middle - 1)


ENV = GuessNumberEnv
