# expect: EXPLOITABLE_DEGENERATE
"""Checks the answer with a substring test, so listing every number wins."""

from spade.env import TextEnv


class SubstringEnv(TextEnv):
    """Find the hidden two-digit code."""

    max_turns = 3

    def _reset(self, options):
        self.code = self.rng.randint(11, 99)
        return "A two-digit code opens the vault. Enter it.", {}

    def step(self, action):
        if str(self.code) in action:
            return self.end_turn("The vault opens.", 1.0, terminated=True)
        return self.end_turn("Nothing happens.")

    def solution(self):
        return [str(self.code)]


ENV = SubstringEnv
