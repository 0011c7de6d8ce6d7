"""Paint the marked cells of a grid, but reset forgets to clear the paint: the first observation of a second
episode on the same instance shows the last episode's board."""

from spade.env import TextEnv

SIZE = 4


class PaintEnv(TextEnv):
    """Paint every marked cell of a 4x4 grid, one cell per turn, by its coordinates."""

    max_turns = 12

    def __init__(self, max_turns=None):
        super().__init__(max_turns)
        self.painted = set()  # the defect: never cleared in _reset

    def _reset(self, options):
        cells = [(r, c) for r in range(SIZE) for c in range(SIZE)]
        self.marked = set(self.rng.sample(cells, 4))
        return (
            "Paint every cell marked '*' by sending 'row col' (0-3), one cell per turn.\n" + self._board(),
            {},
        )

    def _board(self):
        def mark(cell):
            return "#" if cell in self.painted else "*" if cell in self.marked else "."

        return "\n".join("".join(mark((r, c)) for c in range(SIZE)) for r in range(SIZE))

    def step(self, action):
        parts = action.split()
        if len(parts) != 2 or not all(p.isdigit() and int(p) < SIZE for p in parts):
            return self.end_turn("Send a row and a column from 0 to 3, e.g. '1 2'.\n" + self._board())
        self.painted.add((int(parts[0]), int(parts[1])))
        if self.marked <= self.painted:
            return self.end_turn("Every marked cell is painted.", 1.0, terminated=True)
        return self.end_turn(self._board())

    def solution(self):
        return [f"{r} {c}" for r, c in sorted(self.marked)]


ENV = PaintEnv
