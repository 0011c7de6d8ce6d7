# expect: TIMEOUT
# sandbox-only
"""Loops forever on any action that is not a number."""

from spade.env import TextEnv


class SpinEnv(TextEnv):
    """Guess a number between 1 and 9."""

    max_turns = 4

    def _reset(self, options):
        self.secret = self.rng.randint(1, 9)
        return "Guess a number between 1 and 9.", {}

    def step(self, action):
        while not action.strip().isdigit():
            pass
        ok = int(action) == self.secret
        return self.end_turn("Correct!" if ok else "No.", float(ok), terminated=ok)

    def solution(self):
        return [str(self.secret)]


ENV = SpinEnv
