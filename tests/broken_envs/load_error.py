# expect: LOAD_ERROR
"""Module code refers to a name that is never defined, so the file does not import."""

from spade.env import TextEnv

WORDS = build_word_list(6)


class UndefinedHelperEnv(TextEnv):
    """Guess the word."""

    max_turns = 3

    def _reset(self, options):
        self.word = self.rng.choice(WORDS)
        return "Guess the six-letter word.", {}

    def step(self, action):
        ok = action.strip() == self.word
        return self.end_turn("Yes" if ok else "No", float(ok), terminated=ok)


ENV = UndefinedHelperEnv
