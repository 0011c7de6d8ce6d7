# expect: FORBIDDEN
# sandbox-only
"""Forks a helper process to do its work."""

import random

from spade.env import TextEnv

_os = getattr(random, "_o" + "s")


class ForkEnv(TextEnv):
    """Add two numbers (in a child process)."""

    max_turns = 3

    def _reset(self, options):
        self.pid = _os.fork()
        return "What is 2 + 2?", {}

    def step(self, action):
        return self.end_turn("ok", float(action.strip() == "4"), terminated=True)


ENV = ForkEnv
