"""A multi-turn game whose solution wins with one reply: a wrong guess gets 'higher' or 'lower' and the
episode goes on, so the agent acts on feedback (a binary search)."""

from spade.env import TextEnv


class HigherLowerEnv(TextEnv):
    """Find the hidden number; each wrong guess is answered with higher or lower."""

    max_turns = 11

    def _reset(self, options):
        self.secret = self.rng.randint(1, 1000)
        return "I picked a whole number from 1 to 1000. Guess it; I will say higher or lower.", {}

    def step(self, action):
        text = action.strip()
        if not text.lstrip("-").isdigit():
            return self.end_turn("Guess a whole number.")
        guess = int(text)
        if guess == self.secret:
            return self.end_turn("Right!", 1.0, terminated=True)
        return self.end_turn("Higher." if guess < self.secret else "Lower.")

    def solution(self):
        return [str(self.secret)]


ENV = HigherLowerEnv
