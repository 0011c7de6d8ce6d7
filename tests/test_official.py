"""Official-format compatibility: the fixture files load unchanged through the native loader and play."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from spade import envs
from spade.env import TextEnv, answer_action, tool_call_action
from spade.envs.loader import EnvLoadError, exec_module, find_env_class, load_env_factory
from spade.envs.official import OfficialEnv
from spade.envs.official_fixtures import fixture_names, read_fixture

FIXTURES = fixture_names()
GAMES = [n for n in FIXTURES if n.startswith("game_")]
TOOLS = [n for n in FIXTURES if n.startswith("tool_")]


def load(name: str, max_turns: int | None = None) -> OfficialEnv:
    env = load_env_factory(read_fixture(name), name, max_turns=max_turns)()
    assert isinstance(env, OfficialEnv)
    return env


def game_moves(env: OfficialEnv) -> list[str]:
    """The fixtures' games describe their solution as comma-separated moves (what goes inside \\boxed{})."""
    return [move.strip() for move in str(env.solution()).split(", ")]


# -- the fixture set ----------------------------------------------------------------------------------------
def test_fixture_set_covers_every_official_shape() -> None:
    sources = {name: read_fixture(name) for name in FIXTURES}
    tool_sources = [sources[n] for n in TOOLS]
    assert len(GAMES) >= 2
    assert len(TOOLS) >= 2
    imports = re.compile(r"^from tool_use_base_env import ToolUseBaseEnv$", re.MULTILINE)
    assert any(imports.search(s) for s in tool_sources)
    assert any("(ToolUseBaseEnv)" in s and not imports.search(s) for s in tool_sources)
    assert any("_message_criteria" in s and "_current_msg" in s for s in tool_sources)
    assert all("random.seed(seed)" in s for s in sources.values())


def test_fixtures_ship_as_package_data() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert "envs/official_fixtures/*.py" in pyproject["tool"]["setuptools"]["package-data"]["spade"]
    with pytest.raises(FileNotFoundError, match="known: game_"):
        read_fixture("game_missing.py")


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_loads_and_resets_deterministically(name: str) -> None:
    env = load(name)
    obs, info = env.reset(seed=7)
    assert isinstance(obs, str)
    assert obs
    assert isinstance(info, dict)
    instance = (obs, env.solution())
    assert env.reset(seed=7)[0] == obs
    assert env.solution() == instance[1]
    assert load(name).reset(seed=7)[0] == obs
    assert any((env.reset(seed=s)[0], env.solution()) != instance for s in range(8, 14))


# -- games --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", GAMES)
def test_game_wins_with_scripted_moves_that_the_adapter_boxes(name: str) -> None:
    env = load(name)
    for seed in range(6):
        env.reset(seed=seed)
        moves = game_moves(env)
        for i, move in enumerate(moves):
            obs, reward, terminated, truncated, _ = env.step(move)
            assert terminated == (i == len(moves) - 1), (seed, i, obs)
        assert (reward, terminated, truncated) == (1.0, True, False)


def test_game_accepts_actions_that_are_already_boxed() -> None:
    env = load("game_calculator_target.py")
    env.reset(seed=3)
    for move in game_moves(env):
        result = env.step(f"I will press {move}. \\boxed{{{move}}}")
    assert result[1:3] == (1.0, True)


def test_game_wrong_moves_lose_and_truncate_at_the_adapter_budget() -> None:
    env = load("game_lantern_maze.py", max_turns=4)
    assert env.max_turns == 4
    assert env.inner.max_turns == 4
    env.reset(seed=0)
    results = [env.step("up") for _ in range(4)]  # (0, 0) has no cell above it
    assert all(r[1] == 0.0 and not r[2] for r in results)
    assert [r[3] for r in results] == [False, False, False, True]
    assert "wall" in results[0][0]


def test_game_wrong_accusation_terminates_without_reward() -> None:
    env = load("game_coin_weighing.py")
    env.reset(seed=1)
    fake = env.inner.fake
    obs, reward, terminated, _, _ = env.step(f"accuse {fake % 9 + 1}")
    assert (reward, terminated) == (0.0, True)
    assert "genuine" in obs


def test_games_offer_no_tools() -> None:
    env = load(GAMES[0])
    env.reset(seed=0)
    assert env.tool_schemas() == []
    assert "no tools" in env.call_tool("anything", {})


# -- tool use -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", TOOLS)
def test_tool_fixture_exposes_openai_schemas(name: str) -> None:
    env = load(name)
    env.reset(seed=0)
    schemas = env.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == list(env.inner._tools)
    for schema in schemas:
        assert schema["type"] == "function"
        assert {"name", "description", "parameters"} <= set(schema["function"])


def pharmacy_refills(env: OfficialEnv, obs: str) -> tuple[list[str], float]:
    """Play the pharmacy task from tool outputs only, as an agent would: returns (refilled rx ids, copay)."""
    match = re.search(r"TASK: (.+?) called", obs)
    assert match
    hits = json.loads(env.call_tool("search_patient", {"query": match.group(1)}))
    (patient,) = hits
    rows = json.loads(env.call_tool("get_prescriptions", {"patient_id": patient}))
    refilled = [rx for rx, row in rows.items() if row["refills_left"] > 0]
    for rx in refilled:
        assert "Refill ordered" in env.call_tool("refill", {"rx_id": rx})
    return refilled, sum(rows[rx]["copay"] for rx in refilled)


def test_tool_fixture_wins_through_call_tool_with_a_bare_number() -> None:
    env = load("tool_pharmacy_refill.py")
    obs, _ = env.reset(seed=4)
    refilled, total = pharmacy_refills(env, obs)
    assert refilled
    assert str(env.inner._expected_answer).startswith("$")
    wrong = env.step(answer_action(f"{total + 1:.2f}"))
    assert wrong[1:4] == (0.0, False, False)
    assert wrong[0].startswith("Incorrect")
    assert env.step(answer_action(f"{total:,.2f}".replace(",", "")))[:3] == ("Correct!", 1.0, True)


def test_tool_calls_as_text_and_their_errors() -> None:
    env = load("tool_pharmacy_refill.py")
    env.reset(seed=5)
    name = next(iter(env.inner._state["patients"].values()))["name"]
    obs, reward, terminated, truncated, _ = env.step(tool_call_action("search_patient", query=name))
    assert name in json.loads(obs)[next(iter(json.loads(obs)))]["name"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert "unknown tool" in env.step(tool_call_action("delete_everything"))[0]
    assert "malformed" in env.step("<tool_call>{not json</tool_call>")[0]
    assert env.step("I am not sure what to do.")[1] == -0.1
    assert env.call_tool("refill", {"rx_id": "RX0"}).startswith("Error")
    assert env.call_tool("refill", {"bogus": 1}).startswith("Error calling refill")


_FORGETFUL_TOOL_ENV = """
class EchoEnv(ToolUseBaseEnv):
    def reset(self, seed=None):  # forgets to reset turn_count and _call_history
        self._tools = {"echo": {"description": "Echo", "parameters": {"type": "object", "properties": {}}}}
        self._expected_answer = "42"
        return "Say 42." + self._obs_suffix(), {}

    def tool_echo(self):
        return "echo"
"""


def test_reused_tool_instance_starts_each_episode_with_a_fresh_turn_budget() -> None:
    env = load_env_factory(_FORGETFUL_TOOL_ENV, max_turns=3)()
    assert isinstance(env, OfficialEnv)
    env.reset(seed=0)
    assert env.call_tool("echo", {}) == "echo"
    assert [env.step("hm")[3] for _ in range(3)] == [False, False, True]
    env.reset(seed=0)
    assert env.inner.turn_count == 0
    assert env.step("hm")[3] is False


def test_wrong_answer_on_the_last_turn_truncates_rather_than_terminates() -> None:
    env = load("tool_pharmacy_refill.py", max_turns=2)
    env.reset(seed=0)
    env.step("hm")
    _, reward, terminated, truncated, _ = env.step(answer_action("$0.01"))
    assert (reward, terminated, truncated) == (0.0, False, True)


# -- multi-turn protocol ------------------------------------------------------------------------------------
def test_multiturn_reveals_one_instruction_at_a_time() -> None:
    env = load("tool_calendar_multiturn.py")
    obs, _ = env.reset(seed=2)
    messages = env.inner._user_messages
    assert obs == messages[0]
    assert all(m not in obs for m in messages[1:])
    early = env.step(answer_action("done"))
    assert early[1:3] == (0.0, False)
    assert f"step 1/{len(messages)}" in early[0]

    day = re.search(r"on (\w+)\?", obs)
    assert day
    listing = env.call_tool("list_events", {"day": day.group(1).lower()})
    assert "NEW INSTRUCTION" in listing
    assert messages[1] in listing
    move = re.search(r"Move the (.+) to (\d+):00", messages[1])
    assert move
    events = json.loads(listing.split("\n\n[")[0])
    event_id = next(e for e, ev in events.items() if ev["title"] == move.group(1))
    moved = env.step(tool_call_action("reschedule", event_id=event_id, hour=int(move.group(2))))[0]
    assert messages[2] in moved
    guest = re.search(r"invite (\w+) to it", messages[2])
    assert guest
    done = env.call_tool("invite", {"event_id": event_id, "person": guest.group(1)})
    assert "[ALL STEPS COMPLETE]" in done
    assert env.step(answer_action("done"))[:3] == ("Correct!", 1.0, True)


def test_multiturn_cannot_skip_ahead() -> None:
    env = load("tool_calendar_multiturn.py")
    env.reset(seed=3)
    inner = env.inner
    out = env.call_tool("reschedule", {"event_id": inner.event_id, "hour": inner.new_hour})
    assert "NEW INSTRUCTION" not in out
    assert inner._current_msg == 0
    assert env.step(answer_action("done"))[1] == 0.0


# -- class discovery and loader errors ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("game_lantern_maze.py", "LanternMazeEnv"),  # helper GridEnv (no reset/step) is defined first
        ("game_coin_weighing.py", "CoinWeighingEnv"),  # base TurnBasedGameEnv has reset/step itself
        ("tool_pharmacy_refill.py", "PharmacyRefillEnv"),  # ToolUseBaseEnv is injected, not discovered
        ("tool_calendar_multiturn.py", "TeamCalendarMTEnv"),  # ToolUseBaseEnv is imported, not discovered
    ],
)
def test_class_discovery_skips_helpers_and_bases(name: str, expected: str) -> None:
    module = exec_module(read_fixture(name), name)
    assert find_env_class(module).__name__ == expected


_GAME_BODY = """
    def __init__(self, max_turns=5, **kwargs):
        self.max_turns = max_turns
    def reset(self, seed=None):
        return "start", {}
    def step(self, action):
        return "ok", 0.0, False, False, {}
"""


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (f"class AlphaEnv:{_GAME_BODY}\nclass BetaEnv:{_GAME_BODY}", r"several candidate.*AlphaEnv, BetaEnv"),
        (f"class Game:{_GAME_BODY}", "no environment class found"),
        ("class BrokenEnv:\n    def reset(self:\n        pass\n", "syntax error at line 2"),
        ("ENV = 42\n", "ENV must be a subclass"),
    ],
    ids=["two-unrelated", "none", "syntax", "bad-ENV"],
)
def test_loader_errors_say_what_to_fix(source: str, message: str) -> None:
    with pytest.raises(EnvLoadError, match=message):
        load_env_factory(source)


def test_official_files_may_use_numpy_without_importing_it() -> None:
    source = f"class SumEnv:{_GAME_BODY}".replace('return "start", {}', "return str(np.arange(4).sum()), {}")
    assert load_env_factory(source)().reset(seed=0)[0] == "6"


@pytest.mark.parametrize("name", envs.names("tool_use"))
def test_native_library_sources_take_the_same_loader_path(name: str) -> None:
    env = load_env_factory(envs.spec(name).source(), name)()
    assert isinstance(env, TextEnv)
    assert not isinstance(env, OfficialEnv)
    assert env.reset(seed=11)[0] == envs.make(name).reset(seed=11)[0]
    for action in env.solution():
        result = env.step(action)
    assert result[1:3] == (1.0, True)
