# expect: FORBIDDEN_IMPORT
"""Shells out to compute something the environment could compute itself."""

import subprocess

from spade.env import TextEnv


class ShellEnv(TextEnv):
    """Report today's date."""

    max_turns = 2

    def _reset(self, options):
        self.today = subprocess.run(["date", "+%F"], capture_output=True, text=True).stdout.strip()
        return "What is today's date (YYYY-MM-DD)?", {}

    def step(self, action):
        ok = action.strip() == self.today
        return self.end_turn("Correct!" if ok else "Wrong.", float(ok), terminated=True)


ENV = ShellEnv
