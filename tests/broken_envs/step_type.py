# expect: STEP_TYPE
"""step returns the old 4-tuple (observation, reward, done, info)."""

from spade.env import TextEnv


class FourTupleEnv(TextEnv):
    """Is the number even?"""

    max_turns = 2

    def _reset(self, options):
        self.n = self.rng.randint(1, 1000)
        return f"Is {self.n} even? Answer yes or no.", {}

    def step(self, action):
        ok = action.strip().lower() == ("yes" if self.n % 2 == 0 else "no")
        return ("Correct!" if ok else "No."), float(ok), True, {}


ENV = FourTupleEnv
