"""Procedural-pool baseline: Reasoning-Gym tasks as training environments with adaptive difficulty.

``spade train --mode procedural`` trains the agent alone (no designer, as ``fixed_pool``) on Reasoning-Gym
tasks. Each task becomes a native environment source (:func:`task_source`) whose difficulty levels come from
the package's own curriculum: level ``k`` sets every curriculum attribute to ``min(k, its top level)`` and
the generator configuration is what the curriculum makes of that (:func:`task_levels`). The environment runs
inside the sandbox like any other (the zygote preloads ``reasoning_gym``, :func:`sandbox_limits`), draws its
item from the generator with the episode seed, scores answers with the package's scorer (win: score ≥ 1.0;
feedback after a wrong answer, 2 tries as the evaluation suite) and knows its answer (``solution()``), so
worked demonstrations and the scripted solver work.

The mode itself (:mod:`spade.modes.procedural`) moves each task's level by the agent's win rate. This module
is the task-environment library it uses; ``spade play rg:<task>``, the scripted backend and the config's
checks use it too, without the mode.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from typing import TYPE_CHECKING, Any

from spade.config.sandbox import Limits
from spade.errors import SpadeError
from spade.types import EnvSource

if TYPE_CHECKING:
    from spade.config import ProceduralConfig

ENV_PREFIX = "rg:"
"""Environment ids of procedural tasks are ``rg:<task>``."""
ASK = "Give only the final answer inside \\boxed{}."
"""The instruction after every question (the scripted test policy recognises procedural games by it)."""
INSTALL_HINT = (
    "--mode procedural needs the reasoning_gym package: install the eval extra, pip install -e '.[eval]' "
    "(or `make setup`)"
)


class ProceduralError(SpadeError):
    """A Reasoning-Gym task cannot be turned into a training environment (the message says why)."""


def env_id(task: str) -> str:
    """The environment id of ``task``."""
    return ENV_PREFIX + task


def task_of(env: str) -> str:
    """The task of a procedural environment id."""
    return env.removeprefix(ENV_PREFIX)


# -- configuration checks (called by spade.run.preflight.check_names) ---------------------------------------------


def task_problem(tasks: Sequence[str], where: str = "procedural.tasks") -> str:
    """'' when every task is a Reasoning-Gym task, else one line (naming ``where``) saying how to fix it."""
    try:
        from reasoning_gym.factory import DATASETS  # noqa: PLC0415 - optional package, imported on use
    except ImportError:
        return INSTALL_HINT
    if not tasks:
        return f"{where} is empty: name at least one Reasoning-Gym task"
    for name in tasks:
        if name not in DATASETS:
            close = difflib.get_close_matches(name, list(DATASETS), n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            return f"{where}: {name!r} is not a Reasoning-Gym task; {hint}(`spade eval --list-tasks`)"
    return ""


# -- environments ---------------------------------------------------------------------------------------------


@functools.cache
def task_levels(task: str) -> tuple[str, ...]:
    """The generator configuration of each difficulty level of ``task``, as JSON objects (easiest first).

    From the package's curriculum (``reasoning_gym.factory.create_curriculum``): level ``k`` puts every
    attribute at ``min(k, its top level)``; a task without a curriculum has one level (its defaults). Every
    level is checked by building one item on this side of the sandbox.

    Raises:
        ProceduralError: a level's configuration is rejected by the generator.
    """
    import reasoning_gym  # noqa: PLC0415 - optional package
    from reasoning_gym.factory import create_curriculum  # noqa: PLC0415

    try:
        curriculum = create_curriculum(task)
    except (KeyError, ValueError):
        return (json.dumps({}),)
    attributes = list(curriculum.attributes.values())
    names = [n for a in attributes for n in _field_names(a)]
    out = []
    for k in range(max((len(a.levels) for a in attributes), default=1)):
        for a in attributes:
            curriculum.set_attr_level(a.name, min(k, len(a.levels) - 1))
        generated = curriculum.generate_configuration()
        config = json.loads(json.dumps({n: getattr(generated, n) for n in names}))
        try:
            reasoning_gym.create_dataset(task, seed=0, size=1, **config)[0]
        except (TypeError, ValueError, AssertionError) as exc:
            raise ProceduralError(f"task {task!r} level {k} ({config}) is rejected: {exc}") from None
        out.append(json.dumps(config, sort_keys=True))
    return tuple(out)


def _field_names(attribute: Any) -> list[str]:
    if hasattr(attribute, "lower_field_name"):
        return [attribute.lower_field_name, attribute.upper_field_name]
    return [attribute.field_name]


_TEMPLATE = '''"""Reasoning-Gym task {task!r} as a training environment (written by spade --mode procedural).

Difficulty level k uses the generator configuration LEVELS[k] (from the package's curriculum); the item is
the generator's item for the episode seed; answers are scored by the package's scorer (win: score >= 1.0).
"""

import json
import re

import reasoning_gym
from reasoning_gym.utils import extract_answer

from spade.env import TextEnv

TASK = {task!r}
LEVELS = [json.loads(level) for level in {levels!r}]
ASK = {ask!r}
RETRY = "Your answer is incorrect. Try again: " + ASK[0].lower() + ASK[1:]


class ReasoningGymTask(TextEnv):
    """{task}: one Reasoning-Gym item per episode, {tries} tries with feedback after a wrong answer."""

    skill = {skill!r}
    max_turns = {tries}
    difficulty_levels = len(LEVELS)

    def _reset(self, options):
        self.data = reasoning_gym.create_dataset(TASK, seed=self._seed, size=1, **LEVELS[self.difficulty])
        self.entry = self.data[0]
        return self.entry["question"] + "\\n\\n" + ASK, {{"task": TASK, "level": self.difficulty}}

    def step(self, action):
        text = str(action)
        boxed = re.findall(r"\\\\boxed\\{{([^{{}}]*)\\}}", text)
        answer = boxed[-1].strip() if boxed else extract_answer(text) if "<answer>" in text else text.strip()
        try:
            score = float(self.data.score_answer(answer, entry=self.entry))
        except Exception:  # the package's scorers raise on some malformed answers: a wrong answer
            score = 0.0
        if score >= 1.0:
            return self.end_turn("Correct!", 1.0, terminated=True)
        if self.turns_left <= 1:
            return self.end_turn("Incorrect.", 0.0, terminated=True)
        return self.end_turn(RETRY)

    def solution(self):
        return [str(self.entry["answer"])]


ENV = ReasoningGymTask
'''


@functools.cache
def hard_table() -> dict[str, Any]:
    """The shipped appendix-A.3 table: ``{"source": ..., "tasks": {name: {"category", "hard_config"}}}``."""
    text = resources.files("spade.envs").joinpath("data/reasoning_gym_hard.json").read_text()
    table: dict[str, Any] = json.loads(text)
    return table


def category_of(task: str) -> str:
    """The SPADE paper's category of a task ('other' outside the hard table)."""
    return str(hard_table()["tasks"].get(task, {}).get("category", "other"))


def task_source(task: str, tries: int = 2) -> EnvSource:
    """The native environment source of ``task`` (id ``rg:<task>``), with its curriculum's levels baked in."""
    code = _TEMPLATE.format(
        task=task, levels=list(task_levels(task)), tries=tries, ask=ASK, skill=category_of(task)
    )
    return EnvSource(code=code, skill=category_of(task), env_id=env_id(task))


def sources(cfg: ProceduralConfig) -> list[EnvSource]:
    """The environment sources of the configured tasks."""
    return [task_source(t, cfg.tries) for t in cfg.tasks]


def sandbox_limits(limits: Limits) -> Limits:
    """``limits`` with ``reasoning_gym`` preloaded in the zygote (instances cannot import it after the UID drop)."""
    if "reasoning_gym" in limits.preload:
        return limits
    return replace(limits, preload=(*limits.preload, "reasoning_gym"))
