# expect: REWARD_RANGE
"""Only a win pays out of range, so random play never sees it; playing the solution does."""

from spade.env import TextEnv


class JackpotEnv(TextEnv):
    """Answer three multiplication questions in a row."""

    max_turns = 5

    def _reset(self, options):
        self.pairs = [(self.rng.randint(2, 12), self.rng.randint(2, 12)) for _ in range(3)]
        self.index = 0
        return self._ask(), {}

    def _ask(self):
        a, b = self.pairs[self.index]
        return f"Question {self.index + 1}/3: what is {a} * {b}?"

    def step(self, action):
        a, b = self.pairs[self.index]
        if action.strip() != str(a * b):
            return self.end_turn("Wrong. Game over.", 0.0, terminated=True)
        self.index += 1
        if self.index == len(self.pairs):
            return self.end_turn("Jackpot!", 7.5, terminated=True)
        return self.end_turn(self._ask())

    def solution(self):
        return [str(a * b) for a, b in self.pairs]


ENV = JackpotEnv
