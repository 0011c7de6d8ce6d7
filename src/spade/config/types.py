"""The value sets of config fields, as ``Literal`` aliases.

They live at the bottom of the package so that :mod:`spade.config` imports nothing above it; the modules that
act on a value set (:mod:`spade.actions`, :mod:`spade.scoring.credit`, ...) import its alias from here.
"""

from __future__ import annotations

from typing import Literal

ModeName = Literal["selfplay", "fixed_pool", "procedural"]
"""'selfplay': designer and agent (SPADE); 'fixed_pool': agent only, on a fixed pool (the baseline);
'procedural': agent only, on Reasoning-Gym tasks with adaptive difficulty."""

Setting = Literal["games", "tool_use"]
"""Which skills environments are designed for (see :mod:`spade.config.skills`)."""

ActionMode = Literal["boxed", "boxed_last", "lenient", "raw"]
"""``boxed``: the *first* ``\\boxed{...}`` after any reasoning block, else the stripped text (the authors'
parser, :func:`spade.actions.first_boxed`). ``boxed_last``: as ``boxed`` with the *last* complete box
(:func:`spade.actions.last_boxed`). ``lenient``: as ``boxed``; without a box, the number on the last line when
it holds exactly one, else the last line (lines of bare markdown decoration skipped; small models rarely box
their answers). ``raw``: the text after reasoning, stripped."""

Difficulty = Literal["easy", "medium", "hard"]
"""Target difficulty of a designed environment."""

RateMeasure = Literal["wins", "mean_return"]
"""How a window's win rate is measured: fraction of plays won, or mean episode return (as released)."""

RegretMethod = Literal["control_variate", "paired", "difference_of_means"]
"""How regret is estimated from the hinted and unhinted plays (see :mod:`spade.scoring.regret`)."""

DesignerReward = Literal["regret", "shuffled", "random"]
"""What the designer is trained on: its samples' own rewards, the rewards of its regeneration shuffled among
its samples, or uniform draws in their range (see :func:`spade.scoring.credit.spurious_rewards`)."""

LPBaseline = Literal["before", "updated"]
"""What the learning_potential reward measures a window rate against: the skill's slow EMA before this batch
moves it, or after (the released order)."""

AgentPrompt = Literal["compact", "released"]
"""How the agent is asked to play (see :mod:`spade.play.prompts`): 'compact', a short system prompt that asks
for a brief thought and the action in ``\\boxed{}`` (small models); 'released', the authors' prompt: no system
prompt, the first observation wrapped in "Please reason step by step, and put your final answer within
\\boxed{}." (a tool-use environment's first observation as it is)."""
