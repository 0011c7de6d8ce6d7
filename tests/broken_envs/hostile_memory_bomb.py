# expect: MEMORY
# sandbox-only
"""Builds a multi-gigabyte table in reset."""

from spade.env import TextEnv


class HogEnv(TextEnv):
    """Look up a value in a big table."""

    max_turns = 3

    def _reset(self, options):
        self.table = bytearray(8 << 30)
        return "Which byte is at position 7?", {}

    def step(self, action):
        return self.end_turn("ok", 0.0, terminated=True)


ENV = HogEnv
