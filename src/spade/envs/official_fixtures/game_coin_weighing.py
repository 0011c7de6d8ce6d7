"""SPADE self-play generated game"""

import random
import re
from typing import Tuple


class TurnBasedGameEnv:
    """Shared plumbing for turn-based puzzles; concrete games override _start and _act."""

    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0

    def reset(self, seed=None) -> Tuple[str, dict]:
        if seed is not None:
            random.seed(seed)
        self.turn_count = 0
        return self._start(), {}

    def step(self, action: str) -> Tuple[str, float, bool, bool, dict]:
        self.turn_count += 1
        match = re.search(r"\\boxed\{([^}]*)\}", action)
        if not match:
            return ("Use \\boxed{...} format.", 0.0, False, self.turn_count >= self.max_turns, {})
        obs, reward, done = self._act(match.group(1).strip().lower())
        truncated = not done and self.turn_count >= self.max_turns
        return (obs, reward, done, truncated, {})

    def _start(self):
        raise NotImplementedError

    def _act(self, command):
        raise NotImplementedError

    def close(self):
        pass


class CoinWeighingEnv(TurnBasedGameEnv):
    """Find the one heavier counterfeit among nine coins with a balance scale, then accuse it."""

    def __init__(self, max_turns=8, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)
        self.fake = 1
        self.weighings = 0
        self.reset()

    def _start(self):
        self.fake = random.randint(1, 9)
        self.weighings = 0
        return (
            "Nine coins (1-9) look identical, but one is heavier. You may use the balance scale at most 2 "
            "times, then accuse a coin.\n"
            "Weigh with \\boxed{weigh 1,2,3 vs 4,5,6}; accuse with \\boxed{accuse 7}."
        )

    def _act(self, command):
        if command.startswith("weigh "):
            if self.weighings >= 2:
                return ("The scale is locked: you used both weighings. Accuse a coin.", 0.0, False)
            try:
                left_txt, right_txt = command[6:].split("vs")
                left = [int(x) for x in left_txt.split(",") if x.strip()]
                right = [int(x) for x in right_txt.split(",") if x.strip()]
            except ValueError:
                return ("Could not read that weighing.", 0.0, False)
            if (
                len(left) != len(right)
                or set(left) & set(right)
                or not all(1 <= c <= 9 for c in left + right)
            ):
                return ("Each pan needs the same number of distinct coins 1-9.", 0.0, False)
            self.weighings += 1
            heavier = "left" if self.fake in left else "right" if self.fake in right else "neither"
            side = "balances" if heavier == "neither" else f"tips to the {heavier}"
            return (f"Weighing {self.weighings}: the scale {side}.", 0.0, False)
        if command.startswith("accuse "):
            try:
                coin = int(command[7:])
            except ValueError:
                return ("Accuse a coin number 1-9.", 0.0, False)
            if coin == self.fake:
                return (f"Coin {coin} is the counterfeit. You win!", 1.0, True)
            return (f"Coin {coin} is genuine. The counterfeit was {self.fake}.", 0.0, True)
        return ("Unknown command. Use weigh or accuse.", 0.0, False)

    def solution(self) -> str:
        groups = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
        group = groups[(self.fake - 1) // 3]
        return f"weigh 1,2,3 vs 4,5,6, weigh {group[0]} vs {group[1]}, accuse {self.fake}"
