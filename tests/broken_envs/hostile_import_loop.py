# expect: TIMEOUT
# sandbox-only
"""Spins forever while the module is imported."""

from spade.env import TextEnv

while True:
    pass


class NeverLoadsEnv(TextEnv):
    def _reset(self, options):
        return "never reached", {}

    def step(self, action):
        return self.end_turn("never reached", 0.0, terminated=True)


ENV = NeverLoadsEnv
