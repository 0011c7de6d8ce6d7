# expect: BAD_SIGNATURE
"""step takes no action argument, so the harness cannot call it."""

from spade.env import TextEnv


class NoActionEnv(TextEnv):
    """Press the button when the light is green."""

    max_turns = 3

    def _reset(self, options):
        self.green = self.rng.random() < 0.5
        return "Press the button?", {}

    def step(self):
        return self.end_turn("Pressed.", float(self.green), terminated=True)


ENV = NoActionEnv
