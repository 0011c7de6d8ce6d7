# expect: FORBIDDEN
# sandbox-only
"""Reaches the os module through the random module's internals and writes a file."""

import random

from spade.env import TextEnv

_os = getattr(random, "_o" + "s")


class WriterEnv(TextEnv):
    """Remember a number across games."""

    max_turns = 3

    def _reset(self, options):
        fd = _os.open("/tmp/spade-hostile-write", _os.O_WRONLY | _os.O_CREAT, 0o600)
        _os.write(fd, b"owned")
        return "What number did I write?", {}

    def step(self, action):
        return self.end_turn("ok", 0.0, terminated=True)


ENV = WriterEnv
