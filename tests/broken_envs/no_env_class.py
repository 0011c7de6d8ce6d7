# expect: NO_ENV_CLASS
"""Defines helpers and a game class, but neither ENV nor a class whose name ends in 'Env'."""

import random


class Board:
    def __init__(self, size):
        self.cells = [0] * size


class TicTacToeGame:
    def __init__(self, max_turns=9):
        self.max_turns = max_turns

    def start(self, seed=None):
        self.rng = random.Random(seed)
        self.board = Board(9)
        return "Place your mark (1-9).", {}
