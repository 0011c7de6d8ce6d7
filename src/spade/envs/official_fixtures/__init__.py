"""Environment files in the authors' (official) format, kept verbatim as compatibility fixtures.

They are written the way the authors' designer writes them (global ``random.seed``, ``typing.Tuple``,
``ToolUseBaseEnv`` used without an import or imported from ``tool_use_base_env``, ``\\boxed{}`` parsed by
each game itself) and must load unchanged through :func:`spade.envs.loader.load_env_factory`. They are data,
not modules of this package: read them with :func:`read_fixture`, never import them.

* ``game_calculator_target.py``: a game whose ``solution()`` is a comma-separated list of presses.
* ``game_lantern_maze.py``: a game preceded by a helper class named ``GridEnv`` without ``reset``/``step``
  (the authors' loader picks the first ``*Env`` name and fails on it).
* ``game_coin_weighing.py``: a game deriving from a base class ``TurnBasedGameEnv`` that has ``reset`` and
  ``step`` itself.
* ``tool_pharmacy_refill.py``: single-task tool use, ``ToolUseBaseEnv`` not imported, calls ``_obs_suffix()``,
  expects a ``$``-formatted amount.
* ``tool_calendar_multiturn.py``: the multi-turn ``_user_messages`` / ``_message_criteria`` / ``_current_msg``
  protocol, imports ``ToolUseBaseEnv`` from ``tool_use_base_env``.
* ``tool_review_prose.py``: multi-turn tool use whose ``solution()`` is prose with positional arguments named
  after variables bound only in ``reset`` (``"create_event(review, day, hour); invite(review, dana); ..."``):
  not executable as written, accepted through the plan bound to the instance (a SOLUTION_PROSE warning).
"""

from __future__ import annotations

from importlib import resources


def fixture_names() -> list[str]:
    """File names of the fixtures (``game_*.py`` and ``tool_*.py``), sorted."""
    files = resources.files(__name__).iterdir()
    return sorted(f.name for f in files if f.name.endswith(".py") and f.name.startswith(("game_", "tool_")))


def read_fixture(name: str) -> str:
    """Source text of one fixture; unknown names raise FileNotFoundError listing the known ones."""
    if name not in fixture_names():
        raise FileNotFoundError(f"no official fixture {name!r}; known: {', '.join(fixture_names())}")
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
