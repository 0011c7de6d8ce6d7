# expect: NONDETERMINISTIC
"""The first observation is the same for every seed; the hidden secret comes from the clock."""

import datetime

from spade.env import TextEnv


class HiddenClockEnv(TextEnv):
    """Guess a number between 1 and 1000 with higher/lower hints."""

    max_turns = 12

    def _reset(self, options):
        self.secret = datetime.datetime.now().microsecond % 1000 + 1
        return "Guess a number between 1 and 1000 (hints: higher/lower).", {}

    def step(self, action):
        try:
            guess = int(action.strip())
        except ValueError:
            return self.end_turn("Please answer with a whole number.")
        if guess == self.secret:
            return self.end_turn("Correct!", 1.0, terminated=True)
        return self.end_turn("higher" if guess < self.secret else "lower")

    def solution(self):
        return [str(self.secret)]


ENV = HiddenClockEnv
