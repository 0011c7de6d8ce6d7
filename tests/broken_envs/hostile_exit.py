# expect: STEP_CRASH
# sandbox-only
"""Kills its own process on the first move."""

import random

from spade.env import TextEnv

_os = getattr(random, "_o" + "s")


class ExitEnv(TextEnv):
    """Guess a letter."""

    max_turns = 3

    def _reset(self, options):
        self.letter = self.rng.choice("abcdefgh")
        return "Guess a letter between a and h.", {}

    def step(self, action):
        _os._exit(0)


ENV = ExitEnv
