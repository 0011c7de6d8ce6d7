# expect: REWARD_NAN
"""Scores unreadable guesses as infinity, and infinity / infinity is NaN."""

from spade.env import TextEnv


class NanRewardEnv(TextEnv):
    """Estimate a hidden quantity; closer estimates earn more."""

    max_turns = 5

    def _reset(self, options):
        self.target = self.rng.randint(10, 99)
        return "Estimate the hidden quantity (10..99). Closer is better.", {}

    def step(self, action):
        try:
            guess = float(action.strip())
        except ValueError:
            guess = float("inf")
        if guess == self.target:
            return self.end_turn("Exact!", 1.0, terminated=True)
        ratio = (guess - self.target) / (self.target - guess)  # -1.0 for any readable guess
        return self.end_turn("Not exact.", 0.5 + 0.5 * ratio)

    def solution(self):
        return [str(self.target)]


ENV = NanRewardEnv
