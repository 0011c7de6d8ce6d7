"""SPADE self-play generated game"""

import random
import re
from collections import deque
from typing import Dict, List, Tuple

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


class GridEnv:
    """Helper: a walled grid with open cells. Not the game itself (no reset/step)."""

    def __init__(self, rows: int, cols: int, walls: List[Tuple[int, int]]):
        self.rows = rows
        self.cols = cols
        self.walls = set(walls)

    def is_open(self, cell: Tuple[int, int]) -> bool:
        r, c = cell
        return 0 <= r < self.rows and 0 <= c < self.cols and cell not in self.walls

    def neighbours(self, cell: Tuple[int, int]) -> Dict[str, Tuple[int, int]]:
        out = {}
        for name, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if self.is_open(nxt):
                out[name] = nxt
        return out


class LanternMazeEnv:
    """Guide a lantern-bearer through a dark maze to the exit; you only see the cells next to you."""

    def __init__(self, max_turns=20, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0
        self.grid = None
        self.pos = (0, 0)
        self.exit = (0, 0)
        self.reset()

    def reset(self, seed=None) -> Tuple[str, dict]:
        if seed is not None:
            random.seed(seed)
        self.turn_count = 0
        while True:
            walls = [(r, c) for r in range(5) for c in range(5) if random.random() < 0.3]
            self.grid = GridEnv(5, 5, walls)
            self.pos = (0, 0)
            self.exit = (4, 4)
            path = self._path()
            if self.grid.is_open(self.pos) and path is not None and len(path) >= 8:
                break
        return self._render("You wake in a dark maze holding a lantern."), {}

    def _path(self):
        if not self.grid.is_open(self.pos) or not self.grid.is_open(self.exit):
            return None
        queue = deque([(self.pos, [])])
        seen = {self.pos}
        while queue:
            cell, path = queue.popleft()
            if cell == self.exit:
                return path
            for name, nxt in self.grid.neighbours(cell).items():
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, [*path, name]))
        return None

    def _render(self, msg):
        open_dirs = ", ".join(sorted(self.grid.neighbours(self.pos))) or "none"
        return (
            f"{msg}\n"
            f"Position: {self.pos} | Exit: {self.exit}\n"
            f"The lantern shows open passages: {open_dirs}\n"
            f"Turn {self.turn_count}/{self.max_turns}\n"
            "Move with \\boxed{up}, \\boxed{down}, \\boxed{left} or \\boxed{right}."
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, dict]:
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        match = re.search(r"\\boxed\{([^}]*)\}", action)
        if not match:
            return ("Use \\boxed{direction} format.", 0.0, False, truncated, {})
        move = match.group(1).strip().lower()
        options = self.grid.neighbours(self.pos)
        if move not in MOVES:
            return (self._render(f"'{move}' is not a direction."), 0.0, False, truncated, {})
        if move not in options:
            return (self._render("A wall blocks the way."), 0.0, False, truncated, {})
        self.pos = options[move]
        if self.pos == self.exit:
            return ("You step into daylight. You escaped the maze!", 1.0, True, False, {})
        if truncated:
            return ("Your lantern burns out before you find the exit.", 0.0, False, True, {})
        return (self._render(f"You move {move}."), 0.0, False, False, {})

    def solution(self) -> str:
        path = self._path()
        return ", ".join(path) if path else "no path"

    def close(self):
        pass
