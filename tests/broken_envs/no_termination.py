# expect: NO_TERMINATION
"""A guessing game that never ends: no turn counter, and a wrong guess is never terminal."""

from spade.env import TextEnv


class EndlessGuessEnv(TextEnv):
    """Guess a number between 1 and 50."""

    def _reset(self, options):
        self.secret = self.rng.randint(1, 50)
        return "Guess a number between 1 and 50, e.g. \\boxed{25}.", {}

    def step(self, action):
        try:
            guess = int(action.strip())
        except ValueError:
            return "Please answer with a whole number.", 0.0, False, False, {}
        if guess == self.secret:
            return "Correct!", 1.0, True, False, {}
        hint = "higher" if guess < self.secret else "lower"
        return f"Wrong, go {hint}.", 0.0, False, False, {}

    def solution(self):
        return [str(self.secret)]


ENV = EndlessGuessEnv
