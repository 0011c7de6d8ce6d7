# expect: REWARD_RANGE
"""Gives 5 points for a win: within the sandbox's hard limit, outside the checker's [-1, 1]."""

from spade.env import TextEnv


class BigRewardEnv(TextEnv):
    """Guess a number between 1 and 30."""

    max_turns = 6

    def _reset(self, options):
        self.secret = self.rng.randint(1, 30)
        return "Guess a number between 1 and 30 (you get higher/lower hints).", {}

    def step(self, action):
        try:
            guess = int(action.strip())
        except ValueError:
            return self.end_turn("Please answer with a whole number.", -2.0)
        if guess == self.secret:
            return self.end_turn("Correct!", 5.0, terminated=True)
        return self.end_turn("higher" if guess < self.secret else "lower")

    def solution(self):
        return [str(self.secret)]


ENV = BigRewardEnv
