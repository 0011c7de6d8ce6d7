# expect: MULTIPLE_ENV_CLASSES
"""Two complete environment classes and no ENV to choose between them."""


class EasyGuessEnv:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.secret = 3
        return "Guess 1-5.", {}

    def step(self, action):
        return "Done.", 0.0, True, False, {}


class HardGuessEnv:
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns

    def reset(self, seed=None):
        self.secret = 7
        return "Guess 1-10.", {}

    def step(self, action):
        return "Done.", 0.0, True, False, {}
