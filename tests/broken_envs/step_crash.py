# expect: STEP_CRASH
"""Parses every action as an int without checking it."""

from spade.env import TextEnv


class CrashyEnv(TextEnv):
    """Guess a number between 1 and 20."""

    max_turns = 5

    def _reset(self, options):
        self.secret = self.rng.randint(1, 20)
        return "Guess a number between 1 and 20.", {}

    def step(self, action):
        guess = int(action)
        if guess == self.secret:
            return self.end_turn("Correct!", 1.0, terminated=True)
        return self.end_turn("higher" if guess < self.secret else "lower")

    def solution(self):
        return [str(self.secret)]


ENV = CrashyEnv
