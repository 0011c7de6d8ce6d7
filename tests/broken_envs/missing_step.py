# expect: MISSING_METHOD
"""Forgot to implement step."""

from spade.env import TextEnv


class NoStepEnv(TextEnv):
    """Count the vowels in a word."""

    def _reset(self, options):
        self.word = self.rng.choice(["banana", "kiwi", "cherry", "apricot"])
        return f"How many vowels are in {self.word!r}?", {}

    def solution(self):
        return [str(sum(c in "aeiou" for c in self.word))]


ENV = NoStepEnv
