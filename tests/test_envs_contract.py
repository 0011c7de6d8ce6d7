"""Registry-wide contract test: every seed environment, at every difficulty level.

Each registered environment must reset deterministically under a seed, vary across seeds, return well-typed
steps under random and junk actions, be won by its scripted solution on every seed tried, need at least
three steps to win, and resist a random policy (random actions from a plausible action space: the
environment's own ``sample_action`` when it has one, and a generic sampler built from the observation's
tokens, or from the tool schemas for tool-use environments).
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import spade.envs
from spade.config import CheckerConfig
from spade.config.skills import GAME_SKILLS, TOOL_SKILLS
from spade.design.hints import clean_hint
from spade.env import TextEnv, ToolEnv, answer_action, tool_call_action

NAMES = spade.envs.names()
CASES = [
    pytest.param(name, level, id=f"{name}-d{level}")
    for name in NAMES
    for level in range(spade.envs.spec(name).factory.difficulty_levels)
]
SOLUTION_SEEDS = range(20)
RANDOM_EPISODES = 200
GENERIC_EPISODES = 100
MAX_RANDOM_WIN_RATE = 0.10
MIN_WIN_STEPS = 3
JUNK = (
    "",
    " ",
    "x" * 5000,
    "ünïcødé ∑ 🙂 日本語",
    "\\boxed{}",
    "\\boxed{",
    "}{",
    "None",
    "<answer></answer>",
    "<tool_call>{not json}</tool_call>",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    "\x00\x1b[31m",
)
Policy = Callable[[TextEnv, str, random.Random], str]


@dataclass(frozen=True, slots=True)
class Episode:
    """The outcome of one played episode."""

    steps: int
    terminated: bool
    truncated: bool
    last_reward: float

    @property
    def won(self) -> bool:
        return self.terminated and self.last_reward >= 1.0


def check_step(result: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
    """Assert the Gymnasium 5-tuple types and the reward range, and return the tuple."""
    assert isinstance(result, tuple), f"step must return a tuple, got {type(result)}"
    assert len(result) == 5, f"step must return a 5-tuple, got {len(result)} items"
    obs, reward, terminated, truncated, info = result
    assert isinstance(obs, str), f"observation must be str, got {type(obs)}"
    assert type(reward) is float, f"reward must be a float (not bool or int), got {reward!r}"
    assert math.isfinite(reward), f"reward must be finite, got {reward}"
    assert -1.0 <= reward <= 1.0, f"reward out of [-1, 1]: {reward}"
    assert type(terminated) is bool, f"terminated must be bool, got {terminated!r}"
    assert type(truncated) is bool, f"truncated must be bool, got {truncated!r}"
    assert isinstance(info, dict), f"info must be a dict, got {type(info)}"
    json.dumps(info)
    return obs, reward, terminated, truncated, info


def play(env: TextEnv, seed: int, level: int, policy: Callable[[str], str]) -> Episode:
    """Play one episode; it must end (terminated or truncated) within ``max_turns`` steps."""
    obs, _ = env.reset(seed=seed, options={"difficulty": level})
    for step in range(1, env.max_turns + 1):
        obs, reward, terminated, truncated, _ = check_step(env.step(policy(obs)))
        if terminated or truncated:
            return Episode(step, terminated, truncated, reward)
    pytest.fail(f"episode did not end within max_turns={env.max_turns}")


def scripted(actions: list[str]) -> Callable[[str], str]:
    """A policy that replays ``actions`` in order, whatever it observes."""
    queue = iter(actions)
    return lambda _: next(queue)


def rng_for(name: str, level: int, salt: str) -> random.Random:
    return random.Random(zlib.crc32(f"{name}/{level}/{salt}".encode()))


def tokens(obs: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_.\-]+", obs) or ["x"]


def generic_action(env: TextEnv, obs: str, rng: random.Random) -> str:
    """A random action built from what the agent can see: observation tokens, or random tool calls."""
    words = tokens(obs)
    if isinstance(env, ToolEnv):
        if rng.random() < 0.15:
            return answer_action(rng.choice([*words, str(rng.randint(0, 100))]))
        schema = rng.choice(env.tool_schemas())["function"]
        props = schema.get("parameters", {}).get("properties", {})
        return tool_call_action(schema["name"], **{k: random_value(v, words, rng) for k, v in props.items()})
    return " ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))


def random_value(prop: dict[str, Any], words: list[str], rng: random.Random) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        return rng.randint(-2, 100)
    if kind == "number":
        return round(rng.uniform(-10, 1000), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [rng.choice(words) for _ in range(rng.randint(0, 3))]
    return rng.choice(words)


def own_sampler(env: TextEnv, obs: str, rng: random.Random) -> str:
    sample: Callable[[random.Random], str] | None = getattr(env, "sample_action", None)
    return sample(rng) if sample is not None else generic_action(env, obs, rng)


def win_rate(name: str, level: int, policy: Policy, episodes: int, salt: str) -> tuple[float, list[int]]:
    """Win rate of ``policy`` over ``episodes`` seeds, and the step counts of the wins."""
    env = spade.envs.make(name)
    rng = rng_for(name, level, salt)
    wins = []
    for seed in range(episodes):
        episode = play(env, 10_000 + seed, level, lambda obs: policy(env, obs, rng))
        if episode.won:
            wins.append(episode.steps)
    return len(wins) / episodes, wins


# -- static shape of the library ----------------------------------------------------------------------
def test_registry_covers_every_skill() -> None:
    skills = {spade.envs.spec(n).skill for n in NAMES}
    assert set(GAME_SKILLS) <= skills, f"game skills without a seed environment: {set(GAME_SKILLS) - skills}"
    assert set(TOOL_SKILLS) <= skills, f"tool skills without a seed environment: {set(TOOL_SKILLS) - skills}"


@pytest.mark.parametrize("name", NAMES)
def test_declaration(name: str) -> None:
    spec = spade.envs.spec(name)
    cls = spec.factory
    assert inspect.isclass(cls)
    assert issubclass(cls, TextEnv)
    assert spec.description, "the class docstring needs a one-line summary"
    assert len(spec.description) < 140, "the docstring's first line should be a one-line summary"
    assert cls.difficulty_levels >= 3
    assert cls.default_difficulty == 1
    assert spec.setting == ("tool_use" if issubclass(cls, ToolEnv) else "games")
    assert cls._reset is not TextEnv._reset
    assert cls.step is not TextEnv.step
    assert cls.solution is not TextEnv.solution, "seed environments must provide solution()"
    if spec.setting == "games":  # the warm start answers hint requests with it (sft.hints)
        assert spec.strategy, "solution() needs a docstring saying how to play, as a hint would"
        assert clean_hint(spec.strategy) == (spec.strategy, "ok")


@pytest.mark.parametrize("name", NAMES)
def test_source_is_self_contained(name: str) -> None:
    """Seed files pass the checker's import allow-list (the sandbox preloads only those modules)."""
    tree = ast.parse(spade.envs.spec(name).source())
    assert ast.get_docstring(tree), "module docstring missing"
    allowed = CheckerConfig().allowed_imports
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    bad = [m for m in imported if not any(m == ok or m.startswith(ok + ".") for ok in allowed)]
    assert not bad, f"imports outside the allow-list: {bad}"
    assert any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ENV" for t in n.targets)
        for n in tree.body
    ), "module-level `ENV = ClassName` missing"


# -- reset ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "level"), CASES)
def test_reset_types_and_determinism(name: str, level: int) -> None:
    options = {"difficulty": level}
    env = spade.envs.make(name)
    obs, info = env.reset(seed=7, options=options)
    assert isinstance(obs, str)
    assert obs.strip()
    assert isinstance(info, dict)
    json.dumps(info)
    first_solution = env.solution()
    again, _ = spade.envs.make(name).reset(seed=7, options=options)
    assert again == obs, "reset(seed=s) must reproduce the same instance"
    env.reset(seed=8, options=options)
    assert env.reset(seed=7, options=options)[0] == obs, "reset must not depend on earlier episodes"
    assert env.solution() == first_solution


@pytest.mark.parametrize(("name", "level"), CASES)
def test_seeds_vary(name: str, level: int) -> None:
    env = spade.envs.make(name)
    # An instance is what the agent sees plus what it must find out (a hidden game shows every seed alike).
    distinct = {(env.reset(seed=s, options={"difficulty": level})[0], str(env.solution())) for s in range(10)}
    assert len(distinct) > 1, "different seeds should give different instances"


def test_bad_difficulty_is_rejected() -> None:
    env = spade.envs.make(NAMES[0])
    with pytest.raises(ValueError, match="difficulty"):
        env.reset(seed=0, options={"difficulty": env.difficulty_levels})


# -- step -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "level"), CASES)
def test_junk_actions_are_handled(name: str, level: int) -> None:
    env = spade.envs.make(name)
    for junk in JUNK:
        env.reset(seed=3, options={"difficulty": level})
        obs, reward, terminated, _, _ = check_step(env.step(junk))
        assert obs.strip(), f"an unreadable action {junk[:20]!r} deserves a helpful observation"
        assert not (terminated and reward >= 1.0), f"junk action {junk[:20]!r} won"
    rng = rng_for(name, level, "junk")
    episode = play(env, 4, level, lambda _: rng.choice(JUNK))
    assert not episode.won


@pytest.mark.parametrize(("name", "level"), CASES)
def test_truncates_at_max_turns(name: str, level: int) -> None:
    env = spade.envs.make(name)
    obs, _ = env.reset(seed=5, options={"difficulty": level})
    budget = env.max_turns
    assert shown_turns_left(obs) in (None, budget)
    for turn in range(1, budget + 1):
        obs, reward, terminated, truncated, _ = check_step(env.step("\\boxed{}"))
        assert not terminated, "an empty action must not end the episode"
        assert reward == 0.0, "an unreadable action earns nothing"
        assert truncated == (turn == budget)
        assert shown_turns_left(obs) in (None, budget - turn), f"wrong 'turns left' after turn {turn}"


def shown_turns_left(obs: str) -> int | None:
    """The turns-left count an observation shows, if it shows one."""
    found = re.findall(r"turns? left\W{0,3}(\d+)", obs, re.IGNORECASE)
    return int(found[-1]) if found else None


# -- winnability and resistance -------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "level"), CASES)
def test_solution_wins_every_seed(name: str, level: int) -> None:
    env = spade.envs.make(name)
    for seed in SOLUTION_SEEDS:
        env.reset(seed=seed, options={"difficulty": level})
        actions = env.solution()
        assert isinstance(actions, list)
        assert all(isinstance(a, str) for a in actions)
        assert len(actions) >= MIN_WIN_STEPS, f"seed {seed}: a win should take >= {MIN_WIN_STEPS} steps"
        assert len(actions) <= env.max_turns, f"seed {seed}: solution longer than max_turns"
        # A harness reads max_turns when it loads the class, before any reset: it must be an upper bound.
        assert env.max_turns <= type(env).max_turns, f"seed {seed}: budget above the class's max_turns"
        episode = play(env, seed, level, scripted(actions))
        assert episode.won, f"seed {seed}: the scripted solution did not win ({episode})"
        assert episode.steps == len(actions), f"seed {seed}: won before the script ended"


@pytest.mark.parametrize(("name", "level"), CASES)
@pytest.mark.parametrize(
    ("policy", "episodes"),
    [(own_sampler, RANDOM_EPISODES), (generic_action, GENERIC_EPISODES)],
    ids=["own", "generic"],
)
def test_random_policy_rarely_wins(name: str, level: int, policy: Policy, episodes: int) -> None:
    rate, wins = win_rate(name, level, policy, episodes, policy.__name__)
    assert rate < MAX_RANDOM_WIN_RATE, f"a random policy wins {rate:.0%} of episodes"
    assert all(steps >= MIN_WIN_STEPS for steps in wins), f"a random policy won in {min(wins)} steps"


# -- per-game details ---------------------------------------------------------------------------------------
def test_seating_states_the_clues_once() -> None:
    """Later observations show the seats, the names and the turns left; the clues stay in the first one."""
    env = spade.envs.make("seating")
    first, _ = env.reset(seed=3, options={"difficulty": 0})
    clues = re.findall(r"^\d+\. .+$", first, re.MULTILINE)
    answer = env.solution()
    later = [env.step("\\boxed{nobody}")[0], env.step(answer[0])[0]]
    assert clues
    for obs in later:
        assert not any(clue in obs for clue in clues)
        assert all(name in obs for name in answer)
        assert "Turns left:" in obs
    assert f"seat 1: {answer[0]}; seat 2: ?" in later[1]


def test_seating_retry_states_only_the_question() -> None:
    """A reply that seats nobody changes nothing, so the next observation does not show the seats again."""
    env = spade.envs.make("seating")
    env.reset(seed=3, options={"difficulty": 0})
    answer = env.solution()
    env.step(answer[0])
    retries = [env.step("\\boxed{\\boxed{")[0], env.step(answer[0])[0]]
    for obs, left in zip(retries, (4, 3), strict=True):
        assert "Seats so far" not in obs
        assert "seat 2 (" in obs
        assert all(name in obs for name in answer)
        assert obs.endswith(f"Turns left: {left}")
    assert retries[1].startswith(f"{answer[0]} is already seated")
    _, reward, terminated, _, _ = env.step(answer[1])
    assert (reward, terminated) == (0.1, False)
