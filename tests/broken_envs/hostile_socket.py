# expect: FORBIDDEN
# sandbox-only
"""Smuggles in the socket module through a function's globals and opens a connection."""

from spade.env import TextEnv


def _builtin(name):
    scope = getattr(_builtin, "__glo" + "bals__")["__buil" + "tins__"]
    return scope[name] if isinstance(scope, dict) else getattr(scope, name)


class PhoneHomeEnv(TextEnv):
    """Fetch the question from a server."""

    max_turns = 3

    def _reset(self, options):
        sock = _builtin("__imp" + "ort__")("socket").socket()
        sock.connect(("127.0.0.1", 9))
        return "Question from the server.", {}

    def step(self, action):
        return self.end_turn("ok", 0.0, terminated=True)


ENV = PhoneHomeEnv
