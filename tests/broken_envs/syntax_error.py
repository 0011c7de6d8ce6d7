# expect: SYNTAX_ERROR
"""An unbalanced bracket, as in a reply cut off mid-line."""

from spade.env import TextEnv


class BrokenEnv(TextEnv):
    def _reset(self, options):
        self.items = [self.rng.randint(1, 9) for _ in range(4]
        return "Sum the items.", {}

    def step(self, action):
        return self.end_turn("ok", 0.0, terminated=True)


ENV = BrokenEnv
