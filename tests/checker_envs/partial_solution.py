"""Some instances cannot be won: the target may be odd while every number is even, and solution() then
returns its closest attempt, which loses."""

from itertools import combinations

from spade.env import TextEnv


class SubsetSumEnv(TextEnv):
    """Take numbers one at a time until they add up to the target exactly."""

    max_turns = 6

    def _reset(self, options):
        self.numbers = sorted(self.rng.sample(range(2, 41, 2), 5))
        picked = self.rng.sample(self.numbers, 3)
        # the defect: half the targets are odd, so no subset of these even numbers reaches them
        self.target = sum(picked) + self.rng.choice((0, 1))
        self.total = 0
        return (
            f"Numbers: {self.numbers}. Target: {self.target}. Take one number per turn with 'take N'; "
            "each number can be taken once. Reach the target exactly; going over loses.",
            {},
        )

    def step(self, action):
        words = action.strip().lower().split()
        if len(words) != 2 or words[0] != "take" or not words[1].isdigit():
            return self.end_turn("Write 'take N'.")
        n = int(words[1])
        if n not in self.numbers:
            return self.end_turn(f"{n} is not available; left: {self.numbers}.")
        self.numbers.remove(n)
        self.total += n
        if self.total == self.target:
            return self.end_turn(f"Total {self.total}: target reached!", 1.0, terminated=True)
        if self.total > self.target:
            return self.end_turn(f"Total {self.total}: over the target.", 0.0, terminated=True)
        return self.end_turn(f"Total {self.total}. Left: {self.numbers}.")

    def solution(self):
        best = ()
        for k in range(1, len(self.numbers) + 1):
            for combo in combinations(self.numbers, k):
                if sum(best) < sum(combo) <= self.target:
                    best = combo
        return [f"take {n}" for n in best]


ENV = SubsetSumEnv
