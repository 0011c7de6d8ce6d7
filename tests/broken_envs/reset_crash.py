# expect: RESET_CRASH
"""reset looks up a difficulty table with a key that does not exist."""

from spade.env import TextEnv

SIZES = {"easy": 3, "hard": 6}


class MissingKeyEnv(TextEnv):
    """Sort the numbers."""

    max_turns = 3

    def _reset(self, options):
        self.numbers = [self.rng.randint(1, 99) for _ in range(SIZES["medium"])]
        return f"Sort: {self.numbers}", {}

    def step(self, action):
        return self.end_turn("ok", 0.0, terminated=True)


ENV = MissingKeyEnv
