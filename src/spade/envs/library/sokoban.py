"""Sokoban: walk around a walled room and push a box onto the target square.

Spatial reasoning seed environment. The agent moves one square per turn (up, down, left, right); walking
into the box pushes it one square if the square behind it is free. Boxes cannot be pulled, so pushing the
box onto a square from which it can never reach the target (a corner, or along a wall away from the
target) ends the episode. Instances are generated at random and kept only when a breadth-first search
finds a shortest solution whose length fits the level.
"""

from __future__ import annotations

import random
import re
from collections import deque
from typing import Any

from spade.env import TextEnv

# (interior size, inner walls, shortest-solution range, spare turns) per difficulty level
LEVELS: tuple[tuple[int, int, tuple[int, int], int], ...] = (
    (4, 1, (3, 5), 4),
    (5, 3, (6, 11), 5),
    (6, 6, (10, 18), 6),
)
Cell = tuple[int, int]
DIRECTIONS: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
ALIASES = {"u": "up", "d": "down", "l": "left", "r": "right", "north": "up", "south": "down",
           "west": "left", "east": "right", "n": "up", "s": "down", "w": "left", "e": "right"}  # fmt: skip


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


def parse_direction(action: str) -> str | None:
    """The one direction named in the action ("move up", "U", "east"...), or None."""
    words = re.findall(r"[a-z]+", clean(action))
    found = {ALIASES.get(w, w) for w in words if ALIASES.get(w, w) in DIRECTIONS}
    return found.pop() if len(found) == 1 else None


def add(cell: Cell, delta: Cell) -> Cell:
    """The cell one step from ``cell`` in direction ``delta``."""
    return cell[0] + delta[0], cell[1] + delta[1]


class SokobanEnv(TextEnv):
    """Push a box onto the target square in a small walled room, one move per turn."""

    skill = "spatial_reasoning"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 24  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        size, walls, (low, high), spare = LEVELS[self.difficulty]
        while True:
            self.floor = self._random_room(size, walls)
            self.player, self.box, self.target = self.rng.sample(sorted(self.floor), 3)
            self.live = self._live_cells()
            path = self._shortest_path() if self.box in self.live else None
            # A path in one direction would let "always push right" win without looking at the room.
            if path is not None and low <= len(path) <= high and len(set(path)) > 1:
                break
        self.size = size
        self.start = (self.player, self.box)
        self.max_turns = self.turn_budget(len(path) + spare)
        return self._observe("New room.", this_turn=0), {"difficulty": self.difficulty}

    def _random_room(self, size: int, walls: int) -> set[Cell]:
        cells = {(r, c) for r in range(1, size + 1) for c in range(1, size + 1)}
        return cells - set(self.rng.sample(sorted(cells), walls))

    def _live_cells(self) -> set[Cell]:
        """Cells from which the box can still be pushed to the target (found by pulling it backwards)."""
        live, queue = {self.target}, deque([self.target])
        while queue:
            cell = queue.popleft()
            for delta in DIRECTIONS.values():
                before, standing = (
                    add(cell, (-delta[0], -delta[1])),
                    add(cell, (-2 * delta[0], -2 * delta[1])),
                )
                if before in self.floor and standing in self.floor and before not in live:
                    live.add(before)
                    queue.append(before)
        return live

    def _move(self, player: Cell, box: Cell, direction: str) -> tuple[Cell, Cell] | None:
        """The (player, box) after one move, or None when a wall or the blocked box stops it."""
        delta = DIRECTIONS[direction]
        ahead = add(player, delta)
        if ahead not in self.floor:
            return None
        if ahead != box:
            return ahead, box
        pushed = add(box, delta)
        return (ahead, pushed) if pushed in self.floor else None

    def _shortest_path(self) -> list[str] | None:
        """Breadth-first search over (player, box) positions for the fewest moves that solve the room."""
        start = (self.player, self.box)
        parents: dict[tuple[Cell, Cell], tuple[tuple[Cell, Cell], str] | None] = {start: None}
        queue = deque([start])
        while queue:
            state = queue.popleft()
            if state[1] == self.target:
                return _unwind(parents, state)
            for direction in DIRECTIONS:
                after = self._move(state[0], state[1], direction)
                if after is not None and after not in parents and after[1] in self.live:
                    parents[after] = (state, direction)
                    queue.append(after)
        return None

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset."""
        symbols = {self.target: "T", self.box: "B", self.player: "@"}
        header = "   " + " ".join(str(c) for c in range(self.size + 2))
        rows = [header]
        for r in range(self.size + 2):
            cells = [symbols.get((r, c), "." if (r, c) in self.floor else "#") for c in range(self.size + 2)]
            rows.append(f"{r:>2} " + " ".join(cells))
        grid = "\n".join(rows)
        return (
            f"{event}\nPush the box (B) onto the target (T). You are @, # is a wall, . is floor.\n{grid}\n"
            f"You are at row {self.player[0]}, column {self.player[1]}; the box is at row {self.box[0]}, "
            f"column {self.box[1]}; the target is at row {self.target[0]}, column {self.target[1]}.\n"
            "Move one square per turn: \\boxed{up}, \\boxed{down}, \\boxed{left} or \\boxed{right}. Walking "
            "into the box pushes it; it cannot be pulled, so a box stuck in a corner loses the game.\n"
            f"Turns left: {self.turns_left - this_turn}"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        direction = parse_direction(action)
        if direction is None:
            return self.end_turn(self._observe("Unknown move; answer up, down, left or right."))
        after = self._move(self.player, self.box, direction)
        if after is None:
            return self.end_turn(self._observe(f"Blocked: you cannot move {direction}."))
        pushed = after[1] != self.box
        self.player, self.box = after
        if self.box == self.target:
            return self.end_turn("The box is on the target. You win!", 1.0, terminated=True)
        if self.box not in self.live:
            return self.end_turn("The box is stuck and can never reach the target. You lose.", 0.0, True)
        event = f"You moved {direction}" + (" and pushed the box." if pushed else ".")
        return self.end_turn(self._observe(event))

    def solution(self) -> list[str]:
        """Plan the route before moving: push the box only where it can still reach the target, never into
        a corner (the script plays the shortest move sequence, found by breadth-first search)."""
        current = (self.player, self.box)
        self.player, self.box = self.start
        try:
            path = self._shortest_path()
        finally:
            self.player, self.box = current
        if path is None:
            raise RuntimeError("no solution found; the generator guarantees one exists")
        return path

    def sample_action(self, rng: random.Random) -> str:
        """A random direction (used by tests as the random baseline)."""
        return rng.choice(list(DIRECTIONS))


def _unwind(
    parents: dict[tuple[Cell, Cell], tuple[tuple[Cell, Cell], str] | None], state: tuple[Cell, Cell]
) -> list[str]:
    moves: list[str] = []
    link = parents[state]
    while link is not None:
        state, direction = link
        moves.append(direction)
        link = parents[state]
    return moves[::-1]


ENV = SokobanEnv
