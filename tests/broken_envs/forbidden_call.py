# expect: FORBIDDEN_CALL
"""Loads its word list from a file, which environments cannot read."""

from spade.env import TextEnv


class FileWordsEnv(TextEnv):
    """Unscramble a word."""

    max_turns = 3

    def _reset(self, options):
        with open("/usr/share/dict/words") as handle:
            words = [w.strip() for w in handle if 4 <= len(w.strip()) <= 6]
        self.word = self.rng.choice(words)
        letters = list(self.word)
        self.rng.shuffle(letters)
        return f"Unscramble: {''.join(letters)}", {}

    def step(self, action):
        ok = action.strip().lower() == self.word
        return self.end_turn("Correct!" if ok else "No.", float(ok), terminated=ok)


ENV = FileWordsEnv
