# expect: NONDETERMINISTIC
"""Draws the instance from the clock instead of the seed."""

import datetime

from spade.env import TextEnv


class ClockEnv(TextEnv):
    """Add two numbers."""

    max_turns = 3

    def _reset(self, options):
        now = datetime.datetime.now()
        self.a = now.microsecond % 97
        self.b = (now.microsecond // 97) % 89
        return f"What is {self.a} + {self.b}?", {}

    def step(self, action):
        if action.strip() == str(self.a + self.b):
            return self.end_turn("Correct!", 1.0, terminated=True)
        return self.end_turn("Wrong.", 0.0, terminated=True)

    def solution(self):
        return [str(self.a + self.b)]


ENV = ClockEnv
