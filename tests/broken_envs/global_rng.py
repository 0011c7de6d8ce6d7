# expect: GLOBAL_RNG
"""Draws the instance from the module-level random state and never seeds it."""

import random

from spade.env import TextEnv


class GlobalRngEnv(TextEnv):
    """Multiply two numbers."""

    max_turns = 2

    def _reset(self, options):
        self.a, self.b = random.randint(2, 20), random.randint(2, 20)
        return f"What is {self.a} * {self.b}?", {}

    def step(self, action):
        ok = action.strip() == str(self.a * self.b)
        return self.end_turn("Correct!" if ok else "Wrong.", float(ok), terminated=True)

    def solution(self):
        return [str(self.a * self.b)]


ENV = GlobalRngEnv
